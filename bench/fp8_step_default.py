"""The fp8-step lab's default run on the CPU backend: how long it takes, and what its evidence costs.

    .venv/bin/python bench/fp8_step_default.py                 # ~2-3 min on a busy 2-core machine
    .venv/bin/python bench/fp8_step_default.py --repeats 5 --skip-cli

Prints, all measured in this one command:
- the default run end to end, as a learner's job runs it (`python -m labs run fp8-step --params '{}'
  --backend cpu` in a subprocess: start-up, both trainings, evidence, charts, result.json), against the
  60 s the lesson promises, and whether the default shows the delayed-scaling spike and learns the task;
- the FP8 training run with evidence collection (per-step amax, scale, clipped and flushed counts, the
  step-0 gradient snapshot) over the same run without it: per-step median and whole-run time, target
  <= 1.05x. On and off are interleaved over repeats and the median is taken, so load from other processes
  hits both alike.
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

from labs.fp8_step.params import Params  # noqa: E402
from labs.fp8_step.run import build, train  # noqa: E402

TARGET_S = 60.0
TARGET_OVERHEAD = 1.05


def default_run() -> tuple[float, dict]:
    """Wall time of `python -m labs run fp8-step` with the default params, and its results block."""
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "labs", "run", "fp8-step", "--params", "{}", "--backend", "cpu", "--out", out],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=os.environ | {"PYTHONPATH": str(ROOT)},
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"default run failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        return wall, json.loads((Path(out) / "result.json").read_text())["results"]


def fp8_run(params: Params, collect: bool) -> tuple[float, float]:
    """(median ms per step, whole training seconds) of the FP8 run, evidence on or off."""
    built = build(params, "cpu", collect=collect)
    t0 = time.perf_counter()
    rec = train(built.fp8, built.fp8_precision, params, built.device, collect=collect)
    whole = time.perf_counter() - t0
    warm = min(3, len(rec.step_ms) // 4)  # first steps pay allocator and kernel-selection costs
    return statistics.median(rec.step_ms[warm:]), whole


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="interleaved on/off repeats of the FP8 training run")
    ap.add_argument("--skip-cli", action="store_true", help="leave out the end-to-end default run")
    args = ap.parse_args()
    params = Params()  # the lab's defaults, outlier included
    print(
        f"default params: steps={params.steps} batch={params.batch} seq={params.seq} d_model={params.d_model} "
        f"n_layers={params.n_layers} recipe={params.recipe} outlier_step={params.outlier_step} "
        f"outlier_scale={params.outlier_scale}"
    )
    ok = True
    if not args.skip_cli:
        wall, res = default_run()
        out = res.get("outlier") or {}
        gen = {k: res["runs"][k]["generation"]["accuracy"] for k in ("reference", "fp8")}
        print(
            f"default run, end to end: {wall:.1f} s (target <= {TARGET_S:.0f} s) -> {'ok' if wall <= TARGET_S else 'OVER'}"
        )
        print(
            f"  spike at step {out.get('step')}: clipped {out.get('clipped_at_spike')} values at the spike, "
            f"{out.get('clipped_after')} the step after; scale {out.get('scale_at_spike')} -> {out.get('scale_after')}"
        )
        print(f"  generation follows the stride: BF16 {gen['reference']:.0%}, FP8 {gen['fp8']:.0%}")
        ok &= wall <= TARGET_S and bool(out.get("clipped_at_spike")) and min(gen.values()) >= 0.9
    step = {True: [], False: []}  # type: dict[bool, list[float]]
    whole = {True: [], False: []}  # type: dict[bool, list[float]]
    for r in range(args.repeats):
        for collect in (True, False):
            ms, s = fp8_run(params, collect)
            step[collect].append(ms)
            whole[collect].append(s)
        print(
            f"repeat {r + 1}/{args.repeats}: evidence on {step[True][-1]:.2f} ms/step ({whole[True][-1]:.2f} s), "
            f"off {step[False][-1]:.2f} ms/step ({whole[False][-1]:.2f} s)",
            flush=True,
        )
    ratio_step = statistics.median(step[True]) / statistics.median(step[False])
    ratio_whole = statistics.median(whole[True]) / statistics.median(whole[False])
    print(f"evidence on / off, median step:   {ratio_step:.3f}x (target <= {TARGET_OVERHEAD}x)")
    print(f"evidence on / off, whole run:     {ratio_whole:.3f}x")
    ok &= ratio_step <= TARGET_OVERHEAD
    print("verdict:", "within targets" if ok else "OUTSIDE a target (see above)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
