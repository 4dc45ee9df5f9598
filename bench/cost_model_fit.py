"""Each lab's run-time cost model (labs.spec LabSpec.cost) against direct runs on this machine's CPU backend.

    .venv/bin/python bench/cost_model_fit.py                 # ~16 runs, 2-4 min on the 2-core machine
    .venv/bin/python bench/cost_model_fit.py --lab fp8-step --repeats 2

Runs `python -m labs run LAB --params ... --backend cpu` in a subprocess, as the worker does, at sizes from
tiny to each lab's defaults, and prints the wall time beside the cost model's estimate and their ratio. This is
what the constants in labs/resources.py and each lab's `estimate_seconds` are calibrated against (the first-run
estimates bench/eta_accuracy.py checks come from the same model); for fp8-step it also prints the lab's own
median ms per training step of each run, which separates per-step cost from start-up.
Timings are CPU timings on whatever else this machine is doing; nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labs import catalog  # noqa: E402

SMALL_FP8 = {"batch": 2, "seq": 8, "d_model": 16, "n_heads": 2, "ffn": 32, "n_layers": 1, "outlier_step": None}
TINY_MLP = {"tokens": 16, "hidden": 32, "ffn": 64, "steps": 1, "warmup": 0}
SIZES: list[tuple[str, dict]] = [
    ("env-check", {}),
    ("fp8-step", {**SMALL_FP8, "steps": 4}),
    ("fp8-step", {**SMALL_FP8, "steps": 16, "d_model": 32, "ffn": 64}),
    ("fp8-step", {"steps": 40}),
    ("fp8-step", {}),
    ("fp8-step", {"steps": 40, "d_model": 128, "ffn": 512, "n_layers": 4}),
    ("fp8-step", {"steps": 40, "batch": 32, "seq": 64}),
    ("tp-sweep", {"degrees": [1, 2], **TINY_MLP}),
    ("tp-sweep", {"degrees": [1, 2, 4], **TINY_MLP}),
    ("tp-sweep", {}),
    ("tp-sweep", {"tokens": 1024, "hidden": 512, "ffn": 2048}),
    ("overlap-trace", {"ranks": 2, "window_out": 64, **TINY_MLP}),
    ("overlap-trace", {"ranks": 4, "window_out": 64, **TINY_MLP}),
    ("overlap-trace", {}),
    ("overlap-trace", {"tokens": 2048}),
]


def run(lab: str, params: dict) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as out:
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
                "--backend",
                "cpu",
                "--out",
                out,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=os.environ | {"PYTHONPATH": str(ROOT)},
            timeout=600,
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{lab} {params} failed (exit {proc.returncode}): {proc.stderr[-1500:]}")
        return wall, json.loads((Path(out) / "result.json").read_text())["results"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", help="only this lab's sizes")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each size (the median is printed)")
    args = ap.parse_args()
    print(f"{'lab':<14} {'model':>7} {'took':>7} {'ratio':>6}  params / detail")
    ratios = []
    for lab, params in SIZES:
        if args.lab and lab != args.lab:
            continue
        spec = catalog.get(lab)
        model = spec.estimate_seconds(spec.params.model_validate(params), "cpu")
        walls, detail = [], ""
        for _ in range(args.repeats):
            wall, res = run(lab, params)
            walls.append(wall)
            if lab == "fp8-step":
                ms = {k: round(res["runs"][k]["ms_per_step"], 1) for k in ("reference", "fp8")}
                detail = f"  ms/step BF16 {ms['reference']}, FP8 {ms['fp8']}"
        took = statistics.median(walls)
        ratios.append(model / took)
        print(f"{lab:<14} {model:>6.1f}s {took:>6.1f}s {model / took:>6.2f}  {json.dumps(params)}{detail}", flush=True)
    errors = [abs(r - 1) for r in ratios]
    worst = max(max(r, 1 / r) for r in ratios)
    print(f"\n{len(ratios)} sizes: median error {statistics.median(errors):.0%}, worst off by {worst:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
