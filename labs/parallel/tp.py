"""Megatron-style tensor parallelism: the four region mappings, two parallel linears, degree checks.

Every collective is a small named autograd function, in conjugate pairs, so a call site reads as
data flow and its backward is the mirror image:

    copy_to_tp_region       forward: identity;              backward: all-reduce
    reduce_from_tp_region   forward: all-reduce;            backward: identity
    scatter_to_tp_region    forward: split (last dim);      backward: all-gather (last dim)
    gather_from_tp_region   forward: all-gather (last dim); backward: split (last dim)

(tests/labs/parallel/test_tp.py reads each function's "forward: X; backward: Y" line and checks it on gloo.)

An MLP block split this way needs exactly one all-reduce forward and one backward:

    x ──copy_to──> ColumnParallelLinear(fc1) ─gelu─> RowParallelLinear(fc2) ──reduce_from──> y
       (bwd: all-reduce dx)   W1[rows r]               W2[cols r]         (fwd: all-reduce y)

Timing: when a `Tracer` is active, every GEMM (forward and both backward GEMMs) is a compute span
and every collective a communication span, so a lab can draw what each rank did. With no tracer
active the functions cost nothing extra.
"""

from __future__ import annotations

import contextlib
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from labs.parallel.dims import TPDims  # noqa: F401  (re-exported for callers of labs.parallel.tp)
from labs.trace.timeline import Span

# ---- tracing ---------------------------------------------------------------------------------

_TRACER: Tracer | None = None


class Tracer:
    """Collects spans for one rank. CPU: wall clock (perf_counter, one clock for all processes on a
    Linux host). CUDA: events on the current stream, turned into times after one synchronize, so
    host-side timers never pretend to measure kernels."""

    def __init__(self, rank: int, device: torch.device):
        self.rank = rank
        self.cuda = device.type == "cuda"
        self._pending: list[tuple] = []
        self._origin_event: torch.cuda.Event | None = None
        self._origin_wall_ms = 0.0

    def start(self) -> None:
        """Mark time zero of the measured region (call right after a barrier)."""
        self._pending.clear()
        if self.cuda:
            torch.cuda.synchronize()
            self._origin_wall_ms = time.perf_counter() * 1e3
            origin = torch.cuda.Event(enable_timing=True)
            origin.record()
            self._origin_event = origin

    def now(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def add(self, lane: str, name: str, start, end, **args) -> None:
        self._pending.append((lane, name, start, end, args))

    @contextlib.contextmanager
    def span(self, lane: str, name: str, **args):
        start = self.now()
        try:
            yield
        finally:
            self.add(lane, name, start, self.now(), **args)

    def _ms(self, mark) -> float:
        if self.cuda:
            if self._origin_event is None:
                raise RuntimeError("Tracer.start() must run before spans are read on CUDA")
            return self._origin_wall_ms + self._origin_event.elapsed_time(mark)
        return mark * 1e3

    def spans(self) -> list[Span]:
        """Absolute milliseconds; labs subtract a common origin across ranks."""
        if self.cuda:
            torch.cuda.synchronize()
        return [Span(self.rank, lane, name, self._ms(s), self._ms(e), args) for lane, name, s, e, args in self._pending]


@contextlib.contextmanager
def tracing(tracer: Tracer | None):
    global _TRACER
    previous, _TRACER = _TRACER, tracer
    try:
        yield tracer
    finally:
        _TRACER = previous


def _span(lane: str, name: str, **args):
    return _TRACER.span(lane, name, **args) if _TRACER is not None else contextlib.nullcontext()


# ---- raw collectives (traced) ------------------------------------------------------------------


def _world(group) -> int:
    return dist.get_world_size(group) if dist.is_initialized() else 1


def _all_reduce(x: torch.Tensor, group, name: str) -> torch.Tensor:
    if _world(group) == 1:  # TP=1: nothing to reduce, and no span either
        return x
    x = x.contiguous()
    with _span("communication", name, kind="all-reduce", bytes=x.numel() * x.element_size()):
        dist.all_reduce(x, group=group)
    return x


def all_gather_into(out: torch.Tensor, x: torch.Tensor, group, async_op: bool = False):
    """Gather `x` from every rank into `out` (rank-major along dim 0); prefers the non-deprecated name."""
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return fn(out, x, group=group, async_op=async_op)


def _all_gather_last_dim(x: torch.Tensor, group, name: str) -> torch.Tensor:
    world = _world(group)
    if world == 1:
        return x
    x = x.contiguous()
    # gloo accepts only the concatenated form: rank-major along dim 0.
    out = torch.empty((world * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)  # (p*d0, ..., n/p)
    with _span("communication", name, kind="all-gather", bytes=out.numel() * out.element_size()):
        all_gather_into(out, x, group)
    return torch.cat(out.view(world, *x.shape).unbind(0), dim=-1)  # (d0, ..., n)


def _split_last_dim(x: torch.Tensor, group) -> torch.Tensor:
    world = _world(group)
    if world == 1:
        return x
    rank = dist.get_rank(group)
    return x.chunk(world, dim=-1)[rank].contiguous()


# ---- the four mappings -------------------------------------------------------------------------


class _CopyToTPRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad.clone(), ctx.group, "all-reduce dX (copy_to bwd)"), None


class _ReduceFromTPRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        return _all_reduce(x.clone(), group, "all-reduce Y (reduce_from fwd)")

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _ScatterToTPRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _split_last_dim(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_last_dim(grad, ctx.group, "all-gather dX (scatter_to bwd)"), None


class _GatherFromTPRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _all_gather_last_dim(x, group, "all-gather Y (gather_from fwd)")

    @staticmethod
    def backward(ctx, grad):
        return _split_last_dim(grad, ctx.group), None


def copy_to_tp_region(x: torch.Tensor, group=None) -> torch.Tensor:
    """Enter a tensor-parallel region with a replicated input.

    forward: identity; backward: all-reduce
    Each rank's partial input gradient covers only its shard of the next weight, so they are summed.
    """
    return _CopyToTPRegion.apply(x, group)


def reduce_from_tp_region(x_parallel: torch.Tensor, group=None) -> torch.Tensor:
    """Leave a tensor-parallel region whose ranks hold partial sums.

    forward: all-reduce; backward: identity
    """
    return _ReduceFromTPRegion.apply(x_parallel, group)


def scatter_to_tp_region(x: torch.Tensor, group=None) -> torch.Tensor:
    """Keep this rank's slice of the last dimension.

    forward: split; backward: all-gather
    """
    return _ScatterToTPRegion.apply(x, group)


def gather_from_tp_region(x_parallel: torch.Tensor, group=None) -> torch.Tensor:
    """Concatenate every rank's slice of the last dimension.

    forward: all-gather; backward: split
    """
    return _GatherFromTPRegion.apply(x_parallel, group)


# ---- linears with traced GEMMs -----------------------------------------------------------------


_SCALES: list[tuple[str, float]] | None = None


@contextlib.contextmanager
def recording_scales():
    """Collect (GEMM input, FP8 scale) for every emulated FP8 cast inside the block, in call order."""
    global _SCALES
    previous, _SCALES = _SCALES, []
    try:
        yield _SCALES
    finally:
        _SCALES = previous


def _amax_over_tp(t: torch.Tensor, group) -> torch.Tensor:
    """This tensor's amax, maxed over the TP group: a shard then takes the scale the whole tensor would.

    This is the emulation's choice, not Transformer Engine's rule for every tensor: every FP8 GEMM input here (input,
    weight shard, gradient) is scaled from the whole tensor's amax, so the sharded block lands on the TP=1 grid and
    its parity against TP=1 isolates the reordered sums. Transformer Engine differs by recipe. Delayed scaling
    all-reduces every FP8 tensor's amax over the autocast's amax_reduction_group
    (FP8GlobalStateManager.reduce_and_update_fp8_tensors, quantization.py @ d0067d0 2.20.0.dev0). Current scaling
    reduces only two amaxes, and only under sequence parallelism: a column-parallel layer's input and a row-parallel
    layer's grad_output, over tp_group (linear.py @ d0067d0, `set_quantizer_amax_reduction_group(...,
    tp_group if (sequence_parallel and parallel_mode == "column") else None)` and the row/grad_output twin); a weight
    shard, or any tensor without sequence parallelism, takes its own shard's amax there. A one-element all-reduce,
    untraced: it is not one of the block's data collectives, and it stays inside the step time.
    """
    amax = t.detach().abs().amax().float().reshape(1)  # (1,)
    if _world(group) > 1:
        dist.all_reduce(amax, op=dist.ReduceOp.MAX, group=group)
    return amax[0]


def fp8_round(t: torch.Tensor, fmt: str, group=None, name: str = "") -> torch.Tensor:
    """Emulated FP8 GEMM input: per-tensor current scaling (labs.numerics.fp8) from the amax of the whole
    tensor across the TP group, so every rank's shard lands on the grid TP=1 would use."""
    from labs.numerics import fp8

    scale = fp8.current_scale(_amax_over_tp(t, group), fmt)
    if _SCALES is not None:
        _SCALES.append((name, float(scale)))
    return fp8.quantize(t, fmt, scale, count=False).dequant.to(t.dtype)


class _TracedLinear(torch.autograd.Function):
    """y = x @ w.T with each of the three GEMMs (forward, dX, dW) timed as its own compute span.

    fp8=True rounds the GEMM inputs onto the FP8 grid first (E4M3 for x and w, E5M2 for the
    incoming gradient: the HYBRID recipe), each scaled from its amax over `group`; products still
    accumulate in FP32.
    """

    @staticmethod
    def forward(ctx, x, weight, name, fp8, group):
        if fp8:
            x, weight = fp8_round(x, "e4m3", group, f"{name} input"), fp8_round(weight, "e4m3", group, f"{name} weight")
        ctx.save_for_backward(x, weight)
        ctx.name, ctx.fp8, ctx.group = name, fp8, group
        with _span("compute", f"{name} fwd GEMM", m=x.numel() // x.shape[-1], n=weight.shape[0], k=x.shape[-1]):
            return x @ weight.t()  # (..., in) @ (in, out) -> (..., out)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        if ctx.fp8:
            grad = fp8_round(grad, "e5m2", ctx.group, f"{ctx.name} grad_output")
        with _span("compute", f"{ctx.name} dX GEMM"):
            grad_x = grad @ weight  # (..., out) @ (out, in) -> (..., in)
        with _span("compute", f"{ctx.name} dW GEMM"):
            grad_w = grad.reshape(-1, grad.shape[-1]).t() @ x.reshape(-1, x.shape[-1])  # (out, in)
        return grad_x, grad_w, None, None, None


def traced_linear(x: torch.Tensor, weight: torch.Tensor, name: str, fp8: bool = False, group=None) -> torch.Tensor:
    return _TracedLinear.apply(x, weight, name, fp8, group)


class ColumnParallelLinear(torch.nn.Module):
    """Y = X W^T with W split by output rows: rank r owns W[r*out/p:(r+1)*out/p, :].

    Input replicated, output sharded along its last dim (gather_output=False keeps it that way,
    which is what a following RowParallelLinear wants).
    """

    def __init__(
        self,
        weight_full: torch.Tensor,
        group=None,
        *,
        name: str = "fc1",
        gather_output: bool = False,
        fp8: bool = False,
    ):
        super().__init__()
        world, rank = _world(group), (dist.get_rank(group) if _world(group) > 1 else 0)
        out_features, in_features = weight_full.shape
        rows = out_features // world
        self.group, self.name, self.gather_output, self.fp8 = group, name, gather_output, fp8
        self.row_range = (rank * rows, (rank + 1) * rows)
        self.weight_parallel = torch.nn.Parameter(
            weight_full[self.row_range[0] : self.row_range[1]].clone()
        )  # (out/p, in)
        self.full_shape = (out_features, in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = copy_to_tp_region(x, self.group)
        y_parallel = traced_linear(x, self.weight_parallel, self.name, self.fp8, self.group)  # (..., out/p)
        return gather_from_tp_region(y_parallel, self.group) if self.gather_output else y_parallel

    def mapping(self) -> dict:
        return {
            "weight": f"{self.name}.weight",
            "split": "column-parallel (output rows)",
            "full_shape": list(self.full_shape),
            "slice": f"rows {self.row_range[0]}:{self.row_range[1]}",
            "local_shape": list(self.weight_parallel.shape),
        }


class RowParallelLinear(torch.nn.Module):
    """Y = X W^T with W split by input columns: rank r owns W[:, r*in/p:(r+1)*in/p].

    Input sharded along its last dim (input_is_parallel=True: it comes from a ColumnParallelLinear),
    output = all-reduce of per-rank partial sums, replicated.
    """

    def __init__(
        self,
        weight_full: torch.Tensor,
        group=None,
        *,
        name: str = "fc2",
        input_is_parallel: bool = True,
        fp8: bool = False,
    ):
        super().__init__()
        world, rank = _world(group), (dist.get_rank(group) if _world(group) > 1 else 0)
        out_features, in_features = weight_full.shape
        cols = in_features // world
        self.group, self.name, self.input_is_parallel, self.fp8 = group, name, input_is_parallel, fp8
        self.col_range = (rank * cols, (rank + 1) * cols)
        self.weight_parallel = torch.nn.Parameter(
            weight_full[:, self.col_range[0] : self.col_range[1]].clone()
        )  # (out, in/p)
        self.full_shape = (out_features, in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_parallel = x if self.input_is_parallel else scatter_to_tp_region(x, self.group)  # (..., in/p)
        y_partial = traced_linear(
            x_parallel, self.weight_parallel, self.name, self.fp8, self.group
        )  # (..., out), partial
        return reduce_from_tp_region(y_partial, self.group)

    def mapping(self) -> dict:
        return {
            "weight": f"{self.name}.weight",
            "split": "row-parallel (input columns)",
            "full_shape": list(self.full_shape),
            "slice": f"cols {self.col_range[0]}:{self.col_range[1]}",
            "local_shape": list(self.weight_parallel.shape),
        }


def gelu(x: torch.Tensor) -> torch.Tensor:
    with _span("compute", "gelu"):
        return F.gelu(x)
