"""The emulated FP8 linear layer and the per-tensor quantizers that feed it (labs.numerics.fp8's rules).

- `TensorQuantizer`: one tensor role's scaling state (e.g. layer 3's weight) plus the per-step
  evidence the fp8-step lab reports: amax, scale, values clipped and flushed to zero;
- `Fp8Linear`: a drop-in nn.Linear whose GEMM inputs are rounded onto the FP8 grid, products
  accumulated in FP32 (or, as an option, the forward GEMM of the delayed and current recipes through
  labs.numerics.accumulate's MODEL of Hopper's fast accumulation, as TE runs it), master weights kept
  in their own (higher) precision;
- helpers over a whole model: close the step, read every quantizer, freeze them for evaluation.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from labs.numerics.accumulate import AccumulatorModel, matmul_limited
from labs.numerics.delayed import DelayedScaling
from labs.numerics.fp8 import (
    Fp8Recipe,
    QuantResult,
    absmax,
    current_scale,
    quantize,
    quantize_blockwise,
    quantize_mx,
)

# The recipes whose forward GEMM TE runs with fast (limited-precision) accumulation:
# use_split_accumulator=False for fprop (module/base.py _2X_ACC_FPROP, recipe Float8CurrentScaling).
FAST_FPROP_RECIPES = ("delayed", "current")


@dataclass
class StepRecord:
    step: int
    amax: float  # max |x| seen this step (before scaling)
    scale: float  # scale applied to the largest value (the per-tensor scale, or its block's)
    clipped: int
    flushed: int
    numel: int


class TensorQuantizer:
    """Scaling state plus per-step evidence for one tensor role, e.g. layer 3's weight.

    Call `quantize()` during the step and `end_step()` once after the optimizer step. With
    `collect=False` it skips the clipped/flushed counts and history (the amax is still needed
    for scaling); `frozen=True` quantizes with the current scale and records nothing
    (evaluation, generation).
    """

    def __init__(self, name: str, role: str, recipe: Fp8Recipe, device=None, collect: bool = True):
        self.name, self.role, self.recipe = name, role, recipe
        self.fmt = recipe.format_for(role)
        self.collect = collect
        self.frozen = False
        self.step = 0
        self.delayed = (
            DelayedScaling(
                self.fmt,
                recipe.amax_history_len,
                recipe.amax_compute_algo,
                recipe.margin,
                device,
                update=recipe.delayed_update,
            )
            if recipe.kind == "delayed"
            else None
        )
        self._pending: list[tuple] = []  # this step's (amax, scale, clipped, flushed, numel) per call
        # (step, row, numel); row = (amax, scale, clipped, flushed): read into Python numbers at once on the CPU
        # (no sync there), kept as one (4,) tensor elsewhere so a GPU step never waits for its evidence.
        self._history: list[tuple[int, torch.Tensor | tuple[float, float, int, int], int]] = []

    def quantize(self, x: torch.Tensor, *, record: bool = True) -> torch.Tensor:
        """Round `x` (2-D, reduction dim last) onto the FP8 grid; returns FP32 values."""
        count = self.collect and record and not self.frozen
        kind = self.recipe.kind
        if self.delayed is not None:  # kind == "delayed"
            if self.delayed.scale.device != x.device:
                self._move(self.delayed, x.device)
            res = quantize(x, self.fmt, self.delayed.scale, count=count)
            if record and not self.frozen:
                self.delayed.record(res.amax)
        elif kind == "current":
            amax = absmax(x.detach().float())
            res = quantize(x, self.fmt, current_scale(amax, self.fmt, self.recipe.amax_epsilon), count=count, amax=amax)
        elif kind == "block":
            res = quantize_blockwise(x, self.fmt, self.recipe.block_for(self.role), count=count)
        else:
            res = quantize_mx(x, 32, self.fmt, dim=-1, count=count)
        if count:
            host = res.host_amax_scale
            if host is not None:  # the CPU counts read both already
                self._pending.append((host[0], host[1], res.clipped_t, res.flushed_t, x.numel()))
            else:
                self._accumulate(res, x.numel())
        return res.dequant

    @staticmethod
    def _move(delayed: DelayedScaling, device: torch.device) -> None:
        delayed.amax_history = delayed.amax_history.to(device)
        delayed.scale = delayed.scale.to(device)

    def _accumulate(self, res: QuantResult, numel: int) -> None:
        # Keep tensors as they are (no host sync, few ops); reduce once per step in end_step().
        scale_of_max = res.scale if res.scale.dim() == 0 else res.scale.min()
        self._pending.append((res.amax, scale_of_max, res.clipped_t, res.flushed_t, numel))

    def end_step(self) -> None:
        """After the step: delayed scaling updates its scale and rolls the history."""
        if self.frozen:
            return
        if self.delayed is not None:
            self.delayed.update()
        pending = self._pending
        if len(pending) == 1 and isinstance(pending[0][0], float):  # one call, read on the CPU already
            a, s, c, f, n = pending[0]
            self._history.append((self.step, (a, s, c, f), n))
        elif pending:
            amax, scale, clipped, flushed, numel = zip(*pending)
            if all(isinstance(a, float) for a in amax):  # read on the CPU by the counts already
                host = (max(amax), min(scale), int(sum(clipped)), int(sum(flushed)))
                self._history.append((self.step, host, sum(numel)))
            else:
                if len(self._pending) == 1:  # the usual case: one forward (or backward) per step
                    row = [amax[0], scale[0], clipped[0], flushed[0]]
                else:  # several calls in one step (e.g. gradient accumulation): TE keeps their max
                    amax_t = [torch.as_tensor(a, dtype=torch.float32) for a in amax]
                    scale_t = [torch.as_tensor(v, dtype=torch.float32) for v in scale]
                    row = [torch.stack(amax_t).max(), torch.stack(scale_t).min(), sum(clipped), sum(flushed)]
                if row[0].device.type == "cpu":
                    row_h = (float(row[0]), float(row[1]), int(row[2]), int(row[3]))
                    self._history.append((self.step, row_h, sum(numel)))
                else:
                    row_t = torch.stack([torch.as_tensor(v).detach().to(torch.float32) for v in row])  # (4,)
                    self._history.append((self.step, row_t, sum(numel)))
        self._pending = []
        self.step += 1

    @property
    def scale(self) -> float | None:
        """The per-tensor scale the next step will use (delayed only; others derive it per call)."""
        return float(self.delayed.scale) if self.delayed is not None else None

    def history(self) -> list[StepRecord]:
        on_device = [row for _, row, _ in self._history if isinstance(row, torch.Tensor)]
        read = iter(torch.stack(on_device).cpu().tolist() if on_device else [])  # one sync for all steps
        out = []
        for step, row, n in self._history:
            a, s, c, f = next(read) if isinstance(row, torch.Tensor) else row
            out.append(StepRecord(step, a, s, int(c), int(f), n))
        return out


# --------------------------------------------------------------------------- the linear layer


def _autocast_dtype(device_type: str) -> torch.dtype | None:
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return None


class _Fp8LinearFn(torch.autograd.Function):
    """y = x W^T + b with both GEMM operands on the FP8 grid and an FP32 product.

    forward : fprop  y  = q(x) @ q(W)^T                  x, W in E4M3
    backward: dgrad  dx = q(dy) @ q(W)                   dy in E5M2 (HYBRID) or E4M3
              wgrad  dW = q(dy)^T @ q(x)
    Per-tensor recipes reuse the forward FP8 tensors for the backward GEMMs (TE keeps the FP8
    copy and its transpose). Block and MX recipes scale along the reduction dim, which differs
    per GEMM, so the backward re-quantizes the saved high-precision tensors in the other
    orientation, as TE's column-wise copies do.
    """

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, mod: Fp8Linear
    ) -> torch.Tensor:
        out_dtype = _autocast_dtype(x.device.type) or x.dtype
        with torch.autocast(device_type=x.device.type, enabled=False):
            k = x.shape[-1]
            x2 = x.reshape(-1, k).float()  # (M, K)
            w = weight.float()  # (N, K)
            xq = mod.input_quantizer.quantize(x2)  # (M, K) FP8 values held in FP32
            wq = mod.weight_quantizer.quantize(w)  # (N, K)
            if mod.accumulator is not None and mod.recipe.kind in FAST_FPROP_RECIPES:
                y = matmul_limited(xq, wq.t(), mod.accumulator)  # (M, N), MODELLED fast accumulation
            else:
                y = xq @ wq.t()  # (M, N), FP32 accumulation
            if bias is not None:
                y = y + bias.float()
        ctx.mod = mod
        ctx.x_shape = x.shape
        ctx.x_dtype, ctx.w_dtype = x.dtype, weight.dtype
        ctx.has_bias = bias is not None
        if mod.recipe.kind in ("delayed", "current"):
            ctx.save_for_backward(xq, wq)
        else:
            ctx.save_for_backward(x2, w, wq)
        return y.reshape(*x.shape[:-1], y.shape[-1]).to(out_dtype)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        mod: Fp8Linear = ctx.mod
        n = grad_out.shape[-1]
        with torch.autocast(device_type=grad_out.device.type, enabled=False):
            g = grad_out.reshape(-1, n).float()  # (M, N)
            gq = mod.grad_quantizer.quantize(g)  # (M, N), blocks along N for dgrad
            if mod.recipe.kind in ("delayed", "current"):
                xq, wq = ctx.saved_tensors
                gq_t, xq_t, wq_t = gq, xq, wq
            else:
                x2, w, wq = ctx.saved_tensors
                # Re-quantize along the other axis; `record=False` keeps one count per tensor.
                gq_t = mod.grad_quantizer.quantize(g.t(), record=False).t()  # (M, N), blocks along M
                xq_t = mod.input_quantizer.quantize(x2.t(), record=False).t()  # (M, K), blocks along M
                if mod.recipe.kind == "mxfp8":
                    wq_t = mod.weight_quantizer.quantize(w.t(), record=False).t()  # (N, K), blocks along N
                else:
                    wq_t = wq  # 128x128 tiles serve both orientations
            dx = dw = db = None
            if ctx.needs_input_grad[0]:
                dx = (gq @ wq_t).reshape(ctx.x_shape).to(ctx.x_dtype)  # (M, K)
            if ctx.needs_input_grad[1]:
                dw = (gq_t.t() @ xq_t).to(ctx.w_dtype)  # (N, K)
            if ctx.has_bias and ctx.needs_input_grad[2]:
                db = g.sum(0).to(ctx.w_dtype)  # bias grad from the unquantized gradient
        return dx, dw, db, None


class Fp8Linear(nn.Module):
    """Drop-in nn.Linear whose GEMMs run on emulated FP8 with `recipe`.

    The parameters are ordinary (FP32 by default) master weights for the optimizer. Call
    `end_step()` (or `fp8_end_step(model)`) once per training step after the backward, so
    delayed scaling moves to the next step's scale.
    """

    weight: torch.Tensor  # an nn.Parameter: its own, or the wrapped nn.Linear's (from_linear)
    bias: torch.Tensor | None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        recipe: Fp8Recipe | None = None,
        name: str = "linear",
        collect: bool = True,
        device=None,
        dtype=None,
        accumulator: AccumulatorModel | None = None,
    ):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.recipe = recipe or Fp8Recipe()
        self.name = name
        self.accumulator = accumulator  # None: exact FP32 products; else the modelled forward accumulator
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=dtype)) if bias else None
        self.reset_parameters()
        self.input_quantizer = TensorQuantizer(f"{name}.input", "input", self.recipe, device, collect)
        self.weight_quantizer = TensorQuantizer(f"{name}.weight", "weight", self.recipe, device, collect)
        self.grad_quantizer = TensorQuantizer(f"{name}.grad_output", "grad_output", self.recipe, device, collect)

    def reset_parameters(self) -> None:
        # Same initialisation as nn.Linear so a seeded model starts identical in both runs.
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    @classmethod
    def from_linear(
        cls,
        linear: nn.Linear,
        recipe: Fp8Recipe | None = None,
        name: str = "linear",
        collect: bool = True,
        accumulator: AccumulatorModel | None = None,
    ):
        """Wrap an existing nn.Linear's parameters (shared, not copied)."""
        mod = cls.__new__(cls)
        nn.Module.__init__(mod)
        mod.in_features, mod.out_features = linear.in_features, linear.out_features
        mod.recipe = recipe or Fp8Recipe()
        mod.name = name
        mod.accumulator = accumulator
        mod.weight = linear.weight
        mod.bias = linear.bias
        dev = linear.weight.device
        mod.input_quantizer = TensorQuantizer(f"{name}.input", "input", mod.recipe, dev, collect)
        mod.weight_quantizer = TensorQuantizer(f"{name}.weight", "weight", mod.recipe, dev, collect)
        mod.grad_quantizer = TensorQuantizer(f"{name}.grad_output", "grad_output", mod.recipe, dev, collect)
        return mod

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Fp8LinearFn.apply(x, self.weight, self.bias, self)

    def quantizers(self) -> dict[str, TensorQuantizer]:
        return {"input": self.input_quantizer, "weight": self.weight_quantizer, "grad_output": self.grad_quantizer}

    def end_step(self) -> None:
        for q in self.quantizers().values():
            q.end_step()

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, recipe={self.recipe.kind}/{self.recipe.fp8_format}"


def fp8_modules(model: nn.Module) -> Iterator[tuple[str, Fp8Linear]]:
    for name, mod in model.named_modules():
        if isinstance(mod, Fp8Linear):
            yield name, mod


def fp8_end_step(model: nn.Module) -> None:
    """Close the step for every Fp8Linear in `model` (delayed scaling updates here)."""
    for _, mod in fp8_modules(model):
        mod.end_step()


def fp8_quantizers(model: nn.Module) -> dict[str, TensorQuantizer]:
    """{"blocks.0.attn.qkv.input": quantizer, ...} in module order."""
    out = {}
    for name, mod in fp8_modules(model):
        for role, q in mod.quantizers().items():
            out[f"{name}.{role}"] = q
    return out


@contextlib.contextmanager
def fp8_frozen(model: nn.Module):
    """Quantize with the current scales but record nothing (evaluation, generation)."""
    qs = list(fp8_quantizers(model).values())
    before = [q.frozen for q in qs]
    for q in qs:
        q.frozen = True
    try:
        yield
    finally:
        for q, b in zip(qs, before):
            q.frozen = b


def set_fp8_collect(model: nn.Module, on: bool) -> None:
    """Turn the evidence counters on or off (the benchmark measures their cost)."""
    for q in fp8_quantizers(model).values():
        q.collect = on


__all__ = [
    "Fp8Linear",
    "StepRecord",
    "TensorQuantizer",
    "fp8_end_step",
    "fp8_frozen",
    "fp8_modules",
    "fp8_quantizers",
    "set_fp8_collect",
]
