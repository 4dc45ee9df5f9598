"""The fp8-step lab's default run on the CPU backend: how long it takes, and what its evidence costs.

    .venv/bin/python bench/fp8_step_default.py                 # ~2-3 min on a busy 2-core machine
    .venv/bin/python bench/fp8_step_default.py --repeats 5 --skip-cli

Prints, all measured in this one command:
- the default run end to end, as a learner's job runs it (`python -m labs run fp8-step --params '{}'
  --backend cpu` in a subprocess: start-up, both trainings, evidence, charts, result.json), against the
  60 s the lesson promises, and whether the default shows the delayed-scaling spike and learns the task;
- the FP8 training run with evidence collection (per-step amax, scale, clipped and flushed counts, the
  step-0 gradient snapshot) over the same run without it, per step, target <= 1.05x. The two models train
  side by side, one step of each in turn (which goes first alternates), so load from other processes
  hits both alike; the ratio is of the median step times, over all repeats. Process CPU time per step is
  printed beside it: with `--threads 1` it is the steadier figure on a machine busy with other work.
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

import torch  # noqa: E402

from labs.fp8_step.params import Params  # noqa: E402
from labs.fp8_step.run import OUTLIER_TARGET, build, one_step  # noqa: E402

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


def fp8_steps(params: Params) -> tuple[dict[bool, list[float]], dict[bool, list[float]]]:
    """Per-step wall ms and process CPU ms of the FP8 run with evidence on and off, trained in lockstep."""
    runs = {}
    for collect in (True, False):
        built = build(params, "cpu", collect=collect)
        model = built.fp8
        runs[collect] = (
            model,
            torch.optim.AdamW(model.parameters(), lr=params.lr, weight_decay=0.0),
            torch.Generator().manual_seed(params.seed + 1),
            dict(model.named_modules())[OUTLIER_TARGET],
            built.fp8_precision,
            built.device,
        )
        model.train()
    ms: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    for step in range(params.steps):
        for collect in (True, False) if step % 2 == 0 else (False, True):
            model, opt, gen, target, prec, device = runs[collect]
            c0, t0 = time.process_time(), time.perf_counter()
            one_step(model, prec, params, step, opt, gen, target, device)  # its loss.item() waits for the step
            ms[collect].append((time.perf_counter() - t0) * 1e3)
            cpu[collect].append((time.process_time() - c0) * 1e3)
    warm = min(3, params.steps // 4)  # first steps pay allocator and kernel-selection costs
    return {k: v[warm:] for k, v in ms.items()}, {k: v[warm:] for k, v in cpu.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="interleaved on/off repeats of the FP8 training run")
    ap.add_argument("--skip-cli", action="store_true", help="leave out the end-to-end default run")
    ap.add_argument(
        "--threads", type=int, default=0, help="torch threads (0: torch's default); 1 makes CPU time robust to load"
    )
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
    if args.threads:
        torch.set_num_threads(args.threads)
    step: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    for r in range(args.repeats):
        got, got_cpu = fp8_steps(params)
        for k in (True, False):
            step[k] += got[k]
            cpu[k] += got_cpu[k]
        print(
            f"repeat {r + 1}/{args.repeats}: evidence on {statistics.median(got[True]):.2f} ms/step, "
            f"off {statistics.median(got[False]):.2f} ms/step",
            flush=True,
        )
    ratio_step = statistics.median(step[True]) / statistics.median(step[False])
    ratio_cpu = statistics.median(cpu[True]) / statistics.median(cpu[False])
    n = len(step[True])
    print(f"torch threads: {torch.get_num_threads()}")
    print(
        f"evidence on / off, median wall time per step over {n} steps each: {ratio_step:.3f}x (target <= {TARGET_OVERHEAD}x)"
    )
    print(f"evidence on / off, median process CPU time per step:              {ratio_cpu:.3f}x")
    ok &= ratio_step <= TARGET_OVERHEAD
    print("verdict:", "within targets" if ok else "OUTSIDE a target (see above)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
