"""CPU benchmark: tp-sweep and overlap-trace at their default sizes, through the same command the app runs.

    .venv/bin/python bench/tp_sweep_cpu.py            # degrees 1, 2, 4; overlap on 2 and 4 ranks

Prints, per TP degree, the measured step time relative to TP=1 from the same sweep, and, per rank
count, the windowed / immediate overlap ratio from the same overlap-trace run. Ratios only: absolute
CPU milliseconds say little about GPUs. Nothing here asserts a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_lab(lab: str, params: dict, out: Path) -> tuple[dict, float]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "labs",
            "run",
            lab,
            "--params",
            json.dumps(params),
            "--out",
            str(out),
            "--backend",
            "cpu",
        ],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{lab} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return json.loads((out / "result.json").read_text())["results"], wall


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="bench-tp-"))
    sweep, wall = run_lab("tp-sweep", {}, root / "sweep")
    print(f"tp-sweep (defaults, degrees {[d['degree'] for d in sweep['degrees']]}): {wall:.1f} s wall")
    print(f"{'TP':>3} {'step ms':>9} {'step/TP1':>9} {'GEMM ms':>9} {'coll ms':>9} {'wait ms':>9} {'max rel diff':>13}")
    for d in sweep["degrees"]:
        print(
            f"{d['degree']:>3} {d['step_ms']:>9.2f} {d['step_vs_tp1']:>9.2f} {d['local_gemm_ms']:>9.2f} "
            f"{d['collective_ms']:>9.2f} {d['wait_ms']:>9.2f} {d['parity']['max_rel_diff']:>13.2e}"
        )
    pred = sweep["predicted"]
    print(
        f"predicted ({pred['node']}, {pred['precision']}): over-sharding from TP={pred['oversharding_from']}, best TP={pred['best_degree']}"
    )
    cross = sweep["crossover"]
    print(
        f"crossover (collective > local GEMM): measured from TP={cross['measured_from']}, predicted from "
        f"TP={cross['predicted_from']} ({'agree' if cross['agree'] else 'disagree: ' + cross['explanation']})"
    )
    print(f"answer: {sweep['answer']}")
    for ranks in (2, 4):
        res, wall = run_lab("overlap-trace", {"ranks": ranks}, root / f"overlap{ranks}")
        w, i = res["schedules"]["windowed"], res["schedules"]["immediate"]
        ratio = (w["overlap_ratio"] / i["overlap_ratio"]) if i["overlap_ratio"] else float("inf")
        print(
            f"overlap-trace, {ranks} ranks: {wall:.1f} s wall; overlap ratio windowed {w['overlap_ratio']:.3f} vs "
            f"immediate {i['overlap_ratio']:.3f} (windowed/immediate = {ratio:.3g}); "
            f"exposed comm windowed/immediate = {w['exposed_comm_ms'] / i['exposed_comm_ms']:.2f}; "
            f"step windowed/immediate = {w['step_ms'] / i['step_ms']:.2f}"
        )
    print(f"bundles under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
