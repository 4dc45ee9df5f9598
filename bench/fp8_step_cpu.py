"""CPU benchmark for the fp8-step lab: emulation cost and instrumentation cost, as ratios.

    .venv/bin/python bench/fp8_step_cpu.py              # default lab model, ~10 s on an idle 2-core machine
    .venv/bin/python bench/fp8_step_cpu.py --steps 60 --repeats 5

Prints, all measured in this one process on the lab's default model:
- emulated-FP8 step time / BF16 step time (what software emulation costs on a CPU; on an FP8 GPU
  with Transformer Engine the same ratio is the real speedup, see bench/fp8_step_gpu.py);
- FP8 step with evidence collection / the same step without it (clipped/flushed counters, per-step
  history, step-0 gradient snapshot): the lab's instrumentation overhead.
Configurations are interleaved over repeats and the median is reported, so drift from other load on
the machine hits all of them alike. Timings are CPU timings; nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from labs.fp8_step.params import Params  # noqa: E402
from labs.fp8_step.run import OUTLIER_TARGET, build, one_step  # noqa: E402


def step_ms(params: Params, which: str, collect: bool) -> float:
    """Median wall ms of the training loop's own steps (evidence as `collect` says; the lab's reported step time
    comes from steps timed after training with evidence off, labs/fp8_step/run.py timed_steps)."""
    built = build(params, "cpu", collect=collect)
    model, prec = (built.reference, built.ref_precision) if which == "bf16" else (built.fp8, built.fp8_precision)
    opt = torch.optim.AdamW(model.parameters(), lr=params.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(params.seed + 1)
    target = dict(model.named_modules())[OUTLIER_TARGET]
    model.train()
    ms = []
    for step in range(params.steps):
        t0 = time.perf_counter()
        one_step(model, prec, params, step, opt, gen, target, built.device)
        ms.append((time.perf_counter() - t0) * 1e3)
    warm = min(3, len(ms) // 4)  # first steps pay allocator and kernel-selection costs
    return statistics.median(ms[warm:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="steps per measured run")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats per configuration")
    ap.add_argument("--recipe", default="delayed", choices=["delayed", "current", "block", "mxfp8"])
    args = ap.parse_args()
    params = Params(steps=args.steps, recipe=args.recipe)  # every other field: the lab's defaults
    configs = {
        "bf16": ("bf16", True),
        "fp8 (evidence on)": ("fp8", True),
        "fp8 (evidence off)": ("fp8", False),
    }
    times: dict[str, list[float]] = {k: [] for k in configs}
    for r in range(args.repeats):
        for name, (which, collect) in configs.items():
            times[name].append(step_ms(params, which, collect))
        print(
            f"repeat {r + 1}/{args.repeats}: " + ", ".join(f"{k} {v[-1]:.2f} ms" for k, v in times.items()), flush=True
        )
    med = {k: statistics.median(v) for k, v in times.items()}
    print()
    print(
        f"model: d_model={params.d_model} n_layers={params.n_layers} ffn={params.ffn} batch={params.batch} "
        f"seq={params.seq} recipe={params.recipe}/{params.fp8_format}; CPU timings, median of {args.repeats}"
    )
    for k, v in med.items():
        print(f"  {k:<20} {v:8.2f} ms/step")
    print(f"emulated FP8 / BF16 step time:          {med['fp8 (evidence on)'] / med['bf16']:.2f}x")
    print(f"instrumentation overhead (on / off):    {med['fp8 (evidence on)'] / med['fp8 (evidence off)']:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
