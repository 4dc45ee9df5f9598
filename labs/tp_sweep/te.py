"""tp-sweep's Transformer Engine block: the same MLP as te.Linear(parallel_mode="column") -> gelu ->
te.Linear(parallel_mode="row"), under te.autocast with the chosen recipe, run beside the plain-PyTorch
Megatron mappings on every rank of the `te` backend.

Only the `te` backend imports this module's TE parts (inside functions); the backend exists only where
`import transformer_engine.pytorch` works. Checked against transformer_engine/pytorch/module/linear.py
@ v2.4, v2.9 and main: `Linear(in_features, out_features, sequence_parallel=False, tp_group=None, tp_size=1,
bias=True, params_dtype=None, parallel_mode=None, device="cuda", ...)`; parallel_mode="column" divides
out_features by tp_size (weight (out/p, in)), "row" divides in_features (weight (out, in/p)); the forward of a
row-parallel layer all-reduces its output (reduce-scatters it along dim 0 with sequence_parallel), the
column-parallel layer all-gathers its input along dim 0 first with sequence_parallel, and its backward
all-reduces the input gradient (reduce-scatters it with sequence_parallel), asynchronously beside the weight
gradient GEMM. The collectives go through torch.distributed (gather_along_first_dim,
reduce_scatter_along_first_dim, allreduce in transformer_engine/pytorch/distributed.py), so the profiler's
record_param_comms events carry their sizes.
"""

from __future__ import annotations

from typing import Any

import torch


def build(w1: torch.Tensor, w2: torch.Tensor, group: Any, degree: int, rank: int, sequence_parallel: bool):
    """te.Linear fc1 (column) and fc2 (row) holding this rank's shards of the same seeded weights."""
    import transformer_engine.pytorch as te

    ffn, hidden = w1.shape
    rows, cols = ffn // degree, ffn // degree
    mode = {"column": "column", "row": "row"} if degree > 1 else {"column": None, "row": None}
    kw: dict[str, Any] = {"bias": False, "params_dtype": torch.float32, "device": "cuda"}
    if degree > 1:
        kw |= {"tp_group": group, "tp_size": degree, "sequence_parallel": sequence_parallel}
    fc1 = te.Linear(hidden, ffn, parallel_mode=mode["column"], **kw)
    fc2 = te.Linear(ffn, hidden, parallel_mode=mode["row"], **kw)
    with torch.no_grad():
        fc1.weight.copy_(w1[rank * rows : (rank + 1) * rows])  # (ffn/p, hidden)
        fc2.weight.copy_(w2[:, rank * cols : (rank + 1) * cols])  # (hidden, ffn/p)
    return fc1, fc2


def recipe_for(name: str) -> Any:
    """The TE recipe object (HYBRID: E4M3 forward, E5M2 gradients), transformer_engine/common/recipe @ v2.3+."""
    from transformer_engine.common import recipe as r

    fmt = r.Format.HYBRID
    return {
        "delayed": lambda: r.DelayedScaling(fp8_format=fmt),
        "current": lambda: r.Float8CurrentScaling(fp8_format=fmt),
        "block": lambda: r.Float8BlockScaling(fp8_format=fmt),
        "mxfp8": lambda: r.MXFP8BlockScaling(fp8_format=fmt),
    }[name]()


def forward_backward(
    fc1, fc2, x, dy, *, group: Any, fp8: bool, recipe: Any, degree: int, rank: int, sequence_parallel: bool
):
    """One step of the TE block; returns the full output and input gradient on every rank (for parity).

    `group` holds this degree's ranks (a one-rank group at TP=1): delayed scaling reduces amaxes over it.
    """
    import torch.distributed as dist
    import torch.nn.functional as F
    import transformer_engine.pytorch as te

    from labs.fp8_step.te import te_fp8_autocast

    sp = sequence_parallel and degree > 1
    t = x.shape[0] // degree
    x_in = (x[rank * t : (rank + 1) * t] if sp else x).detach().clone().requires_grad_(True)  # (tokens[/p], hidden)
    dy_in = dy[rank * t : (rank + 1) * t] if sp else dy
    with torch.autocast("cuda", dtype=torch.bfloat16), te_fp8_autocast(te, recipe, enabled=fp8, group=group):
        h = F.gelu(fc1(x_in))  # (tokens, ffn/p): fc1 gathered the sequence first under sp
        y = fc2(h)  # (tokens[/p], hidden): all-reduced, or reduce-scattered under sp
    y.backward(dy_in.to(y.dtype))
    y_full, dx_full = y.detach().float(), x_in.grad.detach().float()
    if sp:  # gather the shards back only to compare with TP=1 (outside the timed work)
        y_full = _gather_rows(y_full, degree, group, dist)
        dx_full = _gather_rows(dx_full, degree, group, dist)
    return y_full, dx_full


def _gather_rows(t: torch.Tensor, degree: int, group: Any, dist: Any) -> torch.Tensor:
    out = torch.empty((degree * t.shape[0], *t.shape[1:]), dtype=t.dtype, device=t.device)
    dist.all_gather_into_tensor(out, t.contiguous(), group=group)
    return out


def collective_plan(tokens: int, hidden: int, degree: int, sequence_parallel: bool, elem_bytes: int) -> list[dict]:
    """The collectives one step issues, with the bytes of the full tensor each one moves (BF16 activations)."""
    if degree == 1:
        return []
    n = tokens * hidden * elem_bytes
    if sequence_parallel:
        return [
            {"name": "all-gather X (fc1 fwd, sequence parallel)", "kind": "all-gather", "bytes": n},
            {"name": "reduce-scatter Y (fc2 fwd)", "kind": "reduce-scatter", "bytes": n},
            {"name": "all-gather dY (fc2 bwd)", "kind": "all-gather", "bytes": n},
            {"name": "reduce-scatter dX (fc1 bwd)", "kind": "reduce-scatter", "bytes": n},
        ]
    return [
        {"name": "all-reduce Y (fc2 fwd)", "kind": "all-reduce", "bytes": n},
        {"name": "all-reduce dX (fc1 bwd, async beside the weight-gradient GEMM)", "kind": "all-reduce", "bytes": n},
    ]


def ring_bytes_per_rank(plan: list[dict], degree: int) -> float:
    """What each rank sends in a ring: all-reduce 2(p-1)/p of the tensor, all-gather and reduce-scatter (p-1)/p."""
    f = (degree - 1) / degree if degree > 1 else 0.0
    return sum((2 * f if c["kind"] == "all-reduce" else f) * c["bytes"] for c in plan)


__all__ = ["build", "collective_plan", "forward_backward", "recipe_for", "ring_bytes_per_rank"]


def run_degree(w1, w2, x, dy, group, degree: int, rank: int, params: Any, profile_path: Any) -> dict:
    """Warm up and time the TE block at one degree on this rank (CUDA events), profile the timed steps, and
    return what the launcher compares with the Megatron block and TP=1."""
    import torch.distributed as dist

    from labs.trace.profile import nvtx_range, profiled

    fc1, fc2 = build(w1, w2, group, degree, rank, params.sequence_parallel)
    rec = recipe_for(params.recipe) if params.fp8 else None
    kw = {
        "group": group,
        "fp8": params.fp8,
        "recipe": rec,
        "degree": degree,
        "rank": rank,
        "sequence_parallel": params.sequence_parallel,
    }
    for _ in range(max(1, params.warmup)):  # TE allocates workspaces and FP8 state on the first call
        forward_backward(fc1, fc2, x, dy, **kw)
    times = []
    with profiled(profile_path, enabled=profile_path is not None) as prof:
        for s in range(params.steps):
            fc1.weight.grad = fc2.weight.grad = None
            dist.barrier(group=group)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with nvtx_range(f"te TP={degree} step {s}", "step"):
                start.record()
                y, dx = forward_backward(fc1, fc2, x, dy, **kw)
                end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
            if prof is not None:
                prof.step()
    times.sort()
    return {
        "step_ms": times[(len(times) - 1) // 2],
        "y": y.cpu() if rank == 0 else None,
        "dx": dx.cpu() if rank == 0 else None,
        "dw1": fc1.weight.grad.float().cpu(),
        "dw2": fc2.weight.grad.float().cpu(),
        "profile": str(profile_path) if profile_path is not None else None,
    }
