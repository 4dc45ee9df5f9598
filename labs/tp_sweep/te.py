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

Under sequence parallelism fc1's backward gathers X again (it kept only its shard: linear.py @ d0067d0
2.20.0.dev0, `_Linear.backward`, `gather_along_first_dim(inputmat, tp_group, async_op=True,
quantizer=quantizer)`), and with FP8 the forward's X gather, that re-gather and fc2's dY gather move
tensors already quantized (linear.py `_Linear.forward`: `inputmat = input_quantizer(inputmat)` before
`gather_along_first_dim(..., quantizer=quantizer)`; dY in base.py `grad_output_preprocess`): 1 byte per
element. The reduce-scatters and all-reduces carry BF16 outputs and gradients (2 bytes).
"""

from __future__ import annotations

from typing import Any

import torch

from labs.parallel import comm


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
    """One step of the TE block; returns this rank's output and input gradient (shards under sp).

    `group` holds this degree's ranks (a one-rank group at TP=1): delayed scaling reduces amaxes over it.
    """
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
    return y.detach().float(), x_in.grad.detach().float()


def full_outputs(y, dx, *, degree: int, group: Any, sequence_parallel: bool):
    """The whole output and input gradient on every rank, for parity: under sp each rank holds a row shard.
    Called after the timed steps, so these gathers are not part of any step time."""
    import torch.distributed as dist

    if not (sequence_parallel and degree > 1):
        return y, dx
    return _gather_rows(y, degree, group, dist), _gather_rows(dx, degree, group, dist)


def _gather_rows(t: torch.Tensor, degree: int, group: Any, dist: Any) -> torch.Tensor:
    out = torch.empty((degree * t.shape[0], *t.shape[1:]), dtype=t.dtype, device=t.device)
    dist.all_gather_into_tensor(out, t.contiguous(), group=group)
    return out


# Bytes per element a collective moves: BF16 activations and gradients, FP8 where TE quantizes before it gathers.
BF16_BYTES, FP8_BYTES = 2, 1


def collective_plan(tokens: int, hidden: int, degree: int, sequence_parallel: bool, fp8: bool) -> list[dict]:
    """The collectives one step issues, with the bytes of the full tensor each one moves."""
    if degree == 1:
        return []
    n = tokens * hidden
    gathered = FP8_BYTES if fp8 else BF16_BYTES  # TE casts X and dY to FP8 before gathering them
    if sequence_parallel:
        return [
            {"name": "all-gather X (fc1 fwd, sequence parallel)", "kind": "all-gather", "bytes": n * gathered},
            {"name": "reduce-scatter Y (fc2 fwd)", "kind": "reduce-scatter", "bytes": n * BF16_BYTES},
            {"name": "all-gather dY (fc2 bwd)", "kind": "all-gather", "bytes": n * gathered},
            {
                "name": "all-gather X again (fc1 bwd, for the weight gradient)",
                "kind": "all-gather",
                "bytes": n * gathered,
            },
            {"name": "reduce-scatter dX (fc1 bwd)", "kind": "reduce-scatter", "bytes": n * BF16_BYTES},
        ]
    return [
        {"name": "all-reduce Y (fc2 fwd)", "kind": "all-reduce", "bytes": n * BF16_BYTES},
        {
            "name": "all-reduce dX (fc1 bwd, async beside the weight-gradient GEMM)",
            "kind": "all-reduce",
            "bytes": n * BF16_BYTES,
        },
    ]


def ring_bytes_per_rank(plan: list[dict], degree: int) -> float:
    """What each rank sends in a ring: all-reduce 2(p-1)/p of the tensor, all-gather and reduce-scatter (p-1)/p."""
    return sum(comm.bus_bytes(c["kind"], degree, c["bytes"]) for c in plan)


def reset_fp8_state() -> None:
    """Forget every FP8 module TE registered so far, before the next degree builds its own.

    TE keeps process-wide FP8 state: delayed scaling registers each module's amax in
    FP8GlobalStateManager's global_amax_buffer, keyed by recipe and id(group), and never removes it, so a
    later degree would still reduce and update the previous degree's dead modules. `reset()` replaces that
    state (transformer_engine/pytorch/quantization.py @ d0067d0 2.20.0.dev0: `quantization_state =
    FP8GlobalState()`; @ v2.9 the class attributes, global_amax_buffer = {} among them; fp8.py before v2.9).
    """
    from labs.fp8_step.te import state_manager

    state_manager().reset()


__all__ = [
    "build",
    "collective_plan",
    "forward_backward",
    "full_outputs",
    "recipe_for",
    "reset_fp8_state",
    "ring_bytes_per_rank",
]


def run_degree(w1, w2, x, dy, group, host, degree: int, rank: int, params: Any, profile_path: Any) -> dict:
    """Warm up and time the TE block at one degree on this rank (CUDA events), profile the timed steps, and
    return what the launcher compares with the Megatron block and TP=1. Only the step is timed: the
    gathers that assemble the outputs for parity run after the last timed step."""
    from labs.trace.profile import align_ranks, nvtx_range, profiled

    reset_fp8_state()
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
            align_ranks(host, prof=prof, cuda=True)  # off the profiled timeline (labs.trace.profile)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with nvtx_range(f"te TP={degree} step {s}", "step"):
                start.record()
                y, dx = forward_backward(fc1, fc2, x, dy, **kw)
                end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
            if prof is not None and s < params.steps - 1:
                prof.step()  # one ProfilerStep#N per timed step
    y, dx = full_outputs(y, dx, degree=degree, group=group, sequence_parallel=params.sequence_parallel)
    times.sort()
    return {
        "step_ms": times[(len(times) - 1) // 2],
        "y": y.cpu() if rank == 0 else None,
        "dx": dx.cpu() if rank == 0 else None,
        "dw1": fc1.weight.grad.float().cpu(),
        "dw2": fc2.weight.grad.float().cpu(),
        "profile": str(profile_path) if profile_path is not None else None,
    }
