"""GPU benchmark: BF16 vs FP8 training step with Transformer Engine at a realistic layer size.

    .venv/bin/python bench/fp8_step_gpu.py                    # hidden 4096, FFN 16384, 32 heads, seq 2048, batch 8
    .venv/bin/python bench/fp8_step_gpu.py --layers 4 --recipe current

Both timings come from the same te.TransformerLayer stack in the same process; only te.autocast
(FP8 on/off) differs, so the ratio is the FP8 speedup of fused TE layers on this GPU. A step is
forward + backward + AdamW on the stack. Times come from CUDA events after a warmup. Achieved
TFLOP/s counts the GEMM FLOPs (6 x tokens x parameters) plus causal attention (half of the full
4 x B x S^2 x H forward, x3 for forward + backward).

Without a CUDA GPU, without Transformer Engine, or on a GPU whose FP8 support TE denies, it prints
why and exits 0 (nothing to measure is not a failure). A few minutes on an H100.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def skip(reason: str) -> int:
    """Nothing to measure here is not a failure: say why and exit 0 (scripts/gpu-check.sh relies on it)."""
    print(f"fp8_step_gpu: skipped: {reason}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--layers", type=int, default=2, help="te.TransformerLayer blocks in the stack")
    ap.add_argument("--recipe", default="delayed", choices=["delayed", "current", "block", "mxfp8"])
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        return skip("no CUDA GPU visible (this benchmark measures FP8 tensor cores; use bench/fp8_step_cpu.py here)")
    from labs import env

    report = env.probe()
    if not report["transformer_engine"]["available"]:
        return skip(report["transformer_engine"]["reason"])
    support = report["fp8_recipes"][args.recipe]
    if not support["supported"]:
        return skip(f"recipe {args.recipe} not supported here: {support['reason']}")

    import transformer_engine.pytorch as te

    from labs.fp8_step.params import Params
    from labs.fp8_step.te import te_fp8_autocast, te_recipe_for

    fp8_recipe = te_recipe_for(Params(recipe=args.recipe, steps=2))  # TE recipe from the lab's mapping
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(
        te.TransformerLayer(
            hidden_size=args.hidden,
            ffn_hidden_size=args.ffn,
            num_attention_heads=args.heads,
            self_attn_mask_type="causal",
            layer_number=i + 1,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            params_dtype=torch.bfloat16,
        )
        for i in range(args.layers)
    ).cuda()
    opt = torch.optim.AdamW(layers.parameters(), lr=1e-4, fused=True)
    # te.TransformerLayer takes (seq, batch, hidden) by default.
    x = torch.randn(args.seq, args.batch, args.hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn_like(x)

    def step(fp8: bool) -> None:
        with te_fp8_autocast(te, fp8_recipe, enabled=fp8):
            h = x
            for layer in layers:
                h = layer(h)  # (S, B, H)
        h.backward(grad)
        opt.step()
        opt.zero_grad(set_to_none=True)

    def measure(fp8: bool) -> tuple[float, int]:
        for _ in range(args.warmup):
            step(fp8)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.iters):
            step(fp8)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / args.iters, torch.cuda.max_memory_allocated()

    n_params = sum(p.numel() for p in layers.parameters())
    tokens = args.seq * args.batch
    flops = 6 * tokens * n_params + 3 * 2 * args.batch * args.seq**2 * args.hidden * args.layers
    print(
        f"GPU: {report['device']['name']} (cc {report['device']['compute_capability']}), "
        f"TE {report['versions']['transformer_engine']}, torch {report['versions']['torch']}"
    )
    print(
        f"stack: {args.layers} x te.TransformerLayer, hidden {args.hidden}, ffn {args.ffn}, heads {args.heads}, "
        f"seq {args.seq}, batch {args.batch}; {n_params / 1e6:.0f}M params; recipe {fp8_recipe}"
    )
    results = {}
    for name, fp8 in (("bf16", False), ("fp8", True)):
        ms, mem = measure(fp8)
        results[name] = ms
        print(
            f"  {name}: {ms:8.2f} ms/step  {flops / (ms / 1e3) / 1e12:7.1f} TFLOP/s  peak {mem / 2**30:.1f} GiB",
            flush=True,
        )
    print(f"FP8 speedup over BF16 (same layers, same process): {results['bf16'] / results['fp8']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
