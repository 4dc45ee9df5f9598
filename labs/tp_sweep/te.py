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
quantizer=quantizer)`), and with FP8 the forward's X gather, that re-gather and fc2's dY gather move tensors
already quantized. What each gather carries depends on the recipe (`collective_plan`, read in
transformer_engine/pytorch/distributed.py @ v2.9: `_all_gather_fp8`, `_all_gather_fp8_blockwise`,
`_all_gather_mxfp8`; module/linear.py and module/base.py `grad_output_preprocess` @ v2.9 for the usages; the same
at main d0067d0): see `gather_bytes`. The reduce-scatters and all-reduces carry BF16 outputs and gradients.
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


# Bytes per element a collective moves: BF16 activations and gradients, FP8 data where TE quantizes before it gathers.
BF16_BYTES, FP8_BYTES = 2, 1
# The block each scale covers, for the recipes whose gathers carry scales: 1x128 tiles, 32-element MX blocks.
SCALE_BLOCK = {"block": 128, "mxfp8": 32}


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def gather_bytes(recipe: str | None, rows: int, cols: int, degree: int, usages: tuple[str, ...]) -> tuple[int, str]:
    """(bytes, what they are) of one all-gather of a (rows, cols) tensor, each of `degree` ranks holding rows/degree,
    in the `usages` TE asks of it ("rowwise", "columnwise"), as transformer_engine/pytorch/distributed.py @ v2.9
    gathers it:

    - no FP8 (recipe None): BF16.
    - delayed, current: the FP8 data only, row-wise; TE takes every rank's per-tensor scale to be equal and does not
      gather it (`_all_gather_fp8`: `out._scale_inv = inp._scale_inv`), and builds a transpose locally.
    - block (1x128 tiles, compact format for the gather), mxfp8 (32-element blocks): FP8 data per usage plus its
      scale-inverses: block's FP32 per 128 elements (row-wise (M, ceil(K/128)), column-wise (ceil(M/128), K) per rank,
      Float8BlockQuantizer.get_scale_shape with all_gather_usage), MXFP8's E8M0 byte per 32 (row-wise (M,
      round_up(K/32, 4)), column-wise (M/32, round_up(K, 128)) per rank, MXFP8Quantizer.make_empty, the row padding
      stripped before the gather). A shard that is not whole blocks (`is_quantizable`: both dims multiples of the
      block) is gathered in BF16 and quantized after.
    """
    n = rows * cols
    if recipe is None:
        return n * BF16_BYTES, "BF16"
    if recipe not in SCALE_BLOCK:
        return n * FP8_BYTES, "FP8 data, row-wise (one per-tensor scale, not gathered)"
    block, local = SCALE_BLOCK[recipe], rows // degree
    if local % block or cols % block:
        return (
            n * BF16_BYTES,
            f"BF16: a {local} x {cols} shard is not whole {block}-element blocks, so TE gathers it in high precision",
        )
    total = 0
    for usage in usages:
        if recipe == "block":
            scales = rows * -(-cols // 128) * 4 if usage == "rowwise" else degree * -(-local // 128) * cols * 4
        else:
            scales = (
                rows * _round_up(cols // 32, 4) if usage == "rowwise" else degree * (local // 32) * _round_up(cols, 128)
            )
        total += n * FP8_BYTES + scales
    kind = "FP32 scale-inverses per 128" if recipe == "block" else "E8M0 scales per 32"
    return total, f"FP8 data {' and '.join(usages)} with {kind}"


def collective_plan(
    tokens: int, hidden: int, degree: int, sequence_parallel: bool, fp8: bool, recipe: str | None = None
) -> list[dict]:
    """The collectives one step issues, with the bytes each moves in all (the whole tensor, for a ring's count).

    The usages TE v2.9 asks of each gather: fc1's forward X gather row-wise only (linear.py `_Linear.forward`:
    `quantizer.set_usage(rowwise=True, columnwise=False)` before `gather_along_first_dim`); fc2's dY gather both,
    for its dgrad and wgrad GEMMs (`_Linear.backward`: `set_usage(rowwise=True, columnwise=True)`); fc1's backward
    X re-gather column-wise, for the wgrad GEMM, except for the per-tensor recipes, which gather row-wise only
    (`supports_only_rowwise_all_gather`).
    """
    if degree == 1:
        return []
    n = tokens * hidden
    rec = recipe if fp8 else None
    bf16 = n * BF16_BYTES
    if sequence_parallel:
        per_tensor = rec in (None, "delayed", "current")
        x_fwd, x_what = gather_bytes(rec, tokens, hidden, degree, ("rowwise",))
        dy, dy_what = gather_bytes(
            rec, tokens, hidden, degree, ("rowwise",) if per_tensor else ("rowwise", "columnwise")
        )
        x_bwd, x_bwd_what = gather_bytes(rec, tokens, hidden, degree, ("rowwise",) if per_tensor else ("columnwise",))
        return [
            {
                "name": "all-gather X (fc1 fwd, sequence parallel)",
                "kind": "all-gather",
                "bytes": x_fwd,
                "carries": x_what,
            },
            {"name": "reduce-scatter Y (fc2 fwd)", "kind": "reduce-scatter", "bytes": bf16, "carries": "BF16"},
            {"name": "all-gather dY (fc2 bwd)", "kind": "all-gather", "bytes": dy, "carries": dy_what},
            {
                "name": "all-gather X again (fc1 bwd, for the weight gradient)",
                "kind": "all-gather",
                "bytes": x_bwd,
                "carries": x_bwd_what,
            },
            {"name": "reduce-scatter dX (fc1 bwd)", "kind": "reduce-scatter", "bytes": bf16, "carries": "BF16"},
        ]
    return [
        {"name": "all-reduce Y (fc2 fwd)", "kind": "all-reduce", "bytes": bf16, "carries": "BF16"},
        {
            "name": "all-reduce dX (fc1 bwd, async beside the weight-gradient GEMM)",
            "kind": "all-reduce",
            "bytes": bf16,
            "carries": "BF16",
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
    """Warm up and time the TE block at one degree on this rank, then profile as many more steps, and return what
    the launcher compares with the Megatron block and TP=1.

    The step time comes from steps run alone between two CUDA events, with no profiler on
    (labs.parallel.timing.time_steps); the profiler records a separate window of steps for the kernels. The
    gathers that assemble the outputs for parity run after both."""
    from labs.parallel import timing
    from labs.trace.profile import align_ranks, nvtx_range, profile_step, profiled

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
    outputs: list = []

    def align() -> None:
        fc1.weight.grad = fc2.weight.grad = None
        align_ranks(host, cuda=True)

    def step() -> None:
        outputs[:] = forward_backward(fc1, fc2, x, dy, **kw)

    for _ in range(timing.warmup_for("cuda", params.warmup)):  # TE allocates workspaces and FP8 state here
        align()
        step()
    times = timing.time_steps(
        step, steps=params.steps, align=align, sync=torch.cuda.synchronize, new_event=timing.events_for("cuda")
    )
    with profiled(profile_path, enabled=profile_path is not None) as prof:
        for s in range(params.steps):
            align()
            with profile_step(prof, s), nvtx_range(f"te TP={degree} step {s}", "step"):
                step()
            torch.cuda.synchronize()
    y, dx = full_outputs(*outputs, degree=degree, group=group, sequence_parallel=params.sequence_parallel)
    times.sort()
    return {
        "step_ms": times[(len(times) - 1) // 2],
        "y": y.cpu() if rank == 0 else None,
        "dx": dx.cpu() if rank == 0 else None,
        "dw1": fc1.weight.grad.float().cpu(),
        "dw2": fc2.weight.grad.float().cpu(),
        "profile": str(profile_path) if profile_path is not None else None,
    }
