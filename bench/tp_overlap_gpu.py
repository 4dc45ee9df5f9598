"""GPU benchmark for one H200 (or H100) node: tp-sweep and overlap-trace on NCCL, measured beside predicted.

    .venv/bin/python bench/tp_overlap_gpu.py [--out DIR]   # exits 0 with a note when no CUDA GPU is visible

Runs the sweep at a realistic block (tokens 8192, hidden 4096, ffn 16384) over every power-of-two
degree the node has (up to 8), then overlap-trace on 2 ranks and on all ranks, and prints ratios:
step / TP=1 measured and predicted, windowed / immediate overlap, and HTA's overlap beside the lab's.
On one GPU the sweep runs TP=1 alone (CUDA events, profiler trace, HTA path) and everything that needs
two ranks says so and is skipped. The backend is auto: te where Transformer Engine imports (the te.Linear
block runs beside the Megatron one), else torch-cuda. A few minutes on 8 GPUs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_lab(lab: str, params: dict, out: Path, backend: str = "auto") -> tuple[dict, float]:
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
            backend,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        sys.exit(f"{lab} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    return json.loads((out / "result.json").read_text())["results"], time.perf_counter() - t0


def _hta(res: dict) -> str:
    prof = res.get("profiler") or {}
    if not prof.get("applies"):
        return "HTA n/a"
    ratios = [(r["hta_overlap_ratio"], r["lab_kernel_overlap_ratio"]) for r in prof["ranks"]]
    return "HTA/lab " + ", ".join(
        f"{h if h is None else round(h, 3)}/{k if k is None else round(k, 3)}" for h, k in ratios
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="where the lab bundles go (default: a temporary folder)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("tp_overlap_gpu: skipped: torch is not installed")
        return 0
    if not torch.cuda.is_available():
        print(
            "tp_overlap_gpu: skipped: no CUDA GPU visible (this benchmark needs an NVLink node; CPU numbers come "
            "from bench/tp_sweep_cpu.py)"
        )
        return 0
    n = torch.cuda.device_count()
    degrees = [d for d in (1, 2, 4, 8) if d <= n]
    root = args.out or Path(tempfile.mkdtemp(prefix="bench-tp-gpu-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"{n} x {torch.cuda.get_device_name(0)}")
    shape = {"tokens": 8192, "hidden": 4096, "ffn": 16384}
    sweep, wall = run_lab("tp-sweep", {**shape, "degrees": degrees, "steps": 10, "warmup": 3}, root / "sweep")
    pred = {p["degree"]: p for p in sweep["predicted"]["per_degree"]}
    p1 = pred[1]["step_ms"]
    print(f"tp-sweep: {wall:.1f} s wall")
    print(
        f"{'TP':>3} {'step ms':>9} {'step/TP1':>9} {'pred step/TP1':>14} {'coll ms':>9} {'pred coll ms':>13} {'max rel diff':>13}"
    )
    for d in sweep["degrees"]:
        p = pred.get(d["degree"])
        print(
            f"{d['degree']:>3} {d['step_ms']:>9.3f} {d['step_vs_tp1']:>9.2f} {p['step_ms'] / p1:>14.2f} "
            f"{d['collective_ms']:>9.3f} {p['collective_ms']:>13.3f} {d['parity']['max_rel_diff']:>13.2e}  {_hta(d)}"
        )
        if "te" in d:
            t = d["te"]
            print(
                f"    te.Linear block: {t['step_ms']:.3f} ms ({t['step_vs_megatron']:.2f}x Megatron), parity "
                f"{t['parity']['max_rel_diff']:.2e} ({t['parity']['tolerance']}), {_hta(t)}"
            )
    print(f"answer: {sweep.get('answer')}")
    if n < 2:
        print("overlap-trace: skipped: needs 2 GPUs (an NCCL all-gather between devices); this machine has 1")
    for ranks in sorted({2, n}) if n >= 2 else []:
        params = {"ranks": ranks, "tokens": 8192, "hidden": 4096, "ffn": 16384, "window_out": 8192, "steps": 10}
        res, wall = run_lab("overlap-trace", params, root / f"overlap{ranks}")
        w, i = res["schedules"]["windowed"], res["schedules"]["immediate"]
        print(
            f"overlap-trace, {ranks} ranks: {wall:.1f} s; overlap ratio windowed {w['overlap_ratio']:.3f} vs immediate "
            f"{i['overlap_ratio']:.3f}; step windowed/immediate = {w['step_ms'] / i['step_ms']:.2f}; windowed {_hta(w)}"
        )
    print(f"bundles under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
