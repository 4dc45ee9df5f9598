"""The pipeline lab's bubble against the formula as the micro-batches grow, on this machine.

    .venv/bin/python bench/pipeline_bubble.py [--backend cpu|torch-cuda] [--ranks 2] [--out DIR]

Runs GPipe and 1F1B at m = p, 2p, 4p, 8p with the same total batch (rows per micro-batch shrink as m grows)
and prints, per m: the measured idle share, the formula (p-1)/(m+p-1), the executed order replayed at each
action's measured compute time with free p2p, and the ratio measured / formula. The baseline is the m = p run
of the same command (1F1B refuses fewer micro-batches than stages): the bubble should fall with m as the formula does, while the excess over it (p2p, wake-ups,
other work on the cores) grows as micro-batches shrink. About a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH_ROWS = 1024  # the whole batch: m micro-batches of BATCH_ROWS / m rows


def run(params: dict, out: Path, backend: str) -> tuple[dict, float]:
    t0 = time.perf_counter()
    argv = [sys.executable, "-m", "labs", "run", "pipeline", "--params", json.dumps(params), "--out", str(out)]
    proc = subprocess.run([*argv, "--backend", backend], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"pipeline {params} failed:\n{proc.stderr[-2000:]}")
    return json.loads((out / "result.json").read_text())["results"], time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    rows = []
    ms = [args.ranks * k for k in (1, 2, 4, 8)]
    for m in ms:
        params = {
            "ranks": args.ranks,
            "microbatches": m,
            "microbatch_rows": BATCH_ROWS // m,
            "layers": 4 * args.ranks,
            "width": 512,
            "schedules": ["gpipe", "1f1b"],
            "steps": 3,
            "warmup": 1,
        }
        res, wall = run(params, root / f"m{m}", args.backend)
        for name, s in res["schedules"].items():
            rows.append(
                (m, name, s["bubble_fraction"], s["formula_step_fraction"], s["simulated_bubble_fraction"], wall)
            )
    base = {name: got for m, name, got, *_ in rows if m == ms[0]}
    print(
        f"{'m':>3} {'schedule':<6} {'measured':>9} {'formula':>8} {'replay':>7} {'meas/form':>9} {'vs m=p':>7} {'run s':>6}"
    )
    for m, name, got, form, replay, wall in rows:
        print(
            f"{m:>3} {name:<6} {got:>9.3f} {form:>8.3f} {replay:>7.3f} {got / form:>9.2f} "
            f"{got / base[name]:>7.2f} {wall:>6.1f}"
        )
    print(f"bundles in {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
