"""FP8 numerics in software, following Transformer Engine's semantics (each rule below names its TE source).

Everything here runs on any torch device, CPU included, so the `cpu` backend emulates FP8
with the same rules TE applies on an H100:

- formats: E4M3 (max 448) and E5M2 (max 57344); HYBRID = E4M3 forward, E5M2 for gradients;
- quantize = multiply by the scale, clamp to +-max *explicitly*, then cast. The clamp is ours
  because the cast's overflow behaviour differs between libraries (saturate, NaN or inf);
- the amax of a tensor ignores NaN (TE's cast kernels reduce with fmaxf) and keeps inf;
- delayed scaling's scale rule (`compute_scale`); the per-tensor state and TE's fused and unfused
  history updates live in labs.numerics.delayed;
- current scaling, 1x128 / 128x128 block scaling with power-of-two scales, and MXFP8 with an
  E8M0 shared scale per 32 values that is rounded up so nothing clips;
- narrow accumulation (a running sum rounded to FP8, optionally promoted to FP32 every N terms)
  and symmetric absmax integer quantization, for the lesson's worked numbers (the model of a GEMM's
  limited-precision accumulator is labs.numerics.accumulate);
- `Fp8Recipe`, the settings one FP8 run uses (TE's DelayedScaling defaults).

The emulated FP8 linear layer and its per-tensor quantizers live in labs.numerics.fp8_linear.

Quick check:

    python -c "from labs.numerics.fp8 import quantize; import torch; print(quantize(torch.tensor([120., 300.]), 'e4m3', 448/240))"
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import torch
import torch.nn.functional as F

FormatName = Literal["e4m3", "e5m2"]
RecipeKind = Literal["delayed", "current", "block", "mxfp8"]
Role = Literal["input", "weight", "grad_output"]

FLT_MAX = torch.finfo(torch.float32).max
_F32_EPS = 2.0**-23  # FP32's ulp at 1: a power of two p is followed by p * (1 + eps)


@dataclass(frozen=True)
class Fp8Format:
    """Limits of one FP8 encoding (OCP FP8: E4M3 has no inf, E5M2 is IEEE-like)."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max: float  # largest finite value; clamp target before the cast
    min_normal: float  # 2**(1 - bias)
    min_subnormal: float  # 2**(1 - bias - mantissa_bits); half of it and below rounds to 0
    has_inf: bool
    torch_dtype: torch.dtype

    @cached_property
    def clip_threshold(self) -> float:
        """Scaled magnitudes above this lose more than rounding error to the clamp.

        Up to max + half an ULP the value would round to max anyway (ties go to max, whose
        mantissa is even), so only values beyond it count as clipped. This keeps a tensor's
        own amax, scaled by an FP32 scale that rounded up by an ulp, from counting as a clip.
        """
        top_ulp = 2.0 ** (math.floor(math.log2(self.max)) - self.mantissa_bits)
        return self.max + top_ulp / 2

    @cached_property
    def flush_bound(self) -> float:
        """An exact product |x| * s at or past this cannot round to 0: the FP32 number after half the
        smallest subnormal (the cast rounds to nearest even, so up to that half goes to 0)."""
        return self.min_subnormal / 2 * (1 + _F32_EPS)


FORMATS: dict[str, Fp8Format] = {
    "e4m3": Fp8Format("e4m3", 4, 3, 7, 448.0, 2.0**-6, 2.0**-9, False, torch.float8_e4m3fn),
    "e5m2": Fp8Format("e5m2", 5, 2, 15, 57344.0, 2.0**-14, 2.0**-16, True, torch.float8_e5m2),
}

FP8_MAX: dict[str, float] = {name: f.max for name, f in FORMATS.items()}


def _format(fmt: str) -> Fp8Format:
    try:
        return FORMATS[fmt]
    except KeyError:
        raise ValueError(f"fmt: got {fmt!r}, expected one of {', '.join(FORMATS)}") from None


# --------------------------------------------------------------------------- quantize


@dataclass
class QuantResult:
    """One quantization. `dequant` holds FP32 values that lie exactly on the scaled FP8 grid.

    On a GPU the counts stay tensors so a caller does not pay a host sync per call (the int
    properties sync when read); on the CPU, where reading a scalar costs no sync, they are ints.
    """

    dequant: torch.Tensor  # same shape as the input, float32
    data: torch.Tensor  # the raw FP8 tensor (before dividing by the scale)
    scale: torch.Tensor  # multiplier applied before the cast (per tensor or per block)
    amax: torch.Tensor  # max |x| of the unscaled input (per tensor or per block)
    clipped_t: torch.Tensor | int | None  # values with |x * scale| beyond max + half an ULP (saturated)
    flushed_t: torch.Tensor | int | None  # nonzero inputs that came back as exactly 0
    # max amax and min scale as Python numbers, where the CPU counts already read them
    host_amax_scale: tuple[float, float] | None = None

    @property
    def clipped(self) -> int:
        return int(self.clipped_t) if self.clipped_t is not None else 0

    @property
    def flushed(self) -> int:
        return int(self.flushed_t) if self.flushed_t is not None else 0


def absmax(x: torch.Tensor, dim=None, keepdim: bool = False) -> torch.Tensor:
    """max |x| with NaN ignored and inf kept, as TE's cast and amax kernels reduce (fmaxf from 0).

    transformer_engine/common/util/cast_kernels.cuh and recipe/current_scaling.cu `amax_kernel` (v2.9,
    main): `fmaxf(fabsf(val), max)`; fmaxf returns the other operand when one is NaN. An all-NaN or
    empty tensor therefore has amax 0.
    """
    a = _abs_nan_as_zero(x)
    if a.numel() == 0:
        return torch.zeros((), dtype=a.dtype, device=a.device)
    return a.amax() if dim is None else a.amax(dim=dim, keepdim=keepdim)


def _abs_nan_as_zero(x: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isnan(x), torch.zeros_like(x), x.abs())


def round_to_format(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """Nearest FP8 value (ties to even), saturating at +-max; returned as float32."""
    spec = _format(fmt)
    xf = x.float()
    return xf.clamp(-spec.max, spec.max).to(spec.torch_dtype).float()


def quantize(x: torch.Tensor, fmt: str, scale, *, count: bool = True, amax: torch.Tensor | None = None) -> QuantResult:
    """Scale, clamp to +-max, cast to FP8; dequantize with the reciprocal scale as TE does.

    `scale` is a float or a tensor broadcastable to `x` (per-block scales). `amax`, when the
    caller already has it, saves a pass over the tensor.
    """
    spec = _format(fmt)
    xf = x.float()
    scale_t = torch.as_tensor(scale, dtype=torch.float32, device=xf.device)
    scaled = xf * scale_t
    # The explicit clamp is the whole overflow policy: never let the cast decide.
    data = scaled.clamp(-spec.max, spec.max).to(spec.torch_dtype)
    dequant = data.float() * torch.reciprocal(scale_t)
    amin = None
    if amax is None:
        a = _abs_nan_as_zero(xf)
        if not a.numel():
            amax = torch.zeros((), dtype=a.dtype, device=a.device)
        else:
            amax = a.amax()
            if count:
                # min |x| lets most calls skip the flush count; on the CPU amax and amin as two reductions
                # take two thirds of the time of one `aminmax`.
                amin = a.amin()
    clipped: torch.Tensor | int | None = None
    flushed: torch.Tensor | int | None = None
    host = None
    if count and xf.device.type == "cpu":
        clipped, flushed, host = _host_counts(xf, scaled, dequant, scale_t, amax, amin, spec)
    elif count:
        clipped, flushed = _clipped_count(scaled, spec), _flushed_count(xf, dequant)
    return QuantResult(dequant, data, scale_t, amax, clipped, flushed, host)


# What the counts mean; `_host_counts` reaches the same numbers with fewer passes on the CPU.
def _clipped_count(scaled: torch.Tensor, spec: Fp8Format) -> torch.Tensor:
    return (scaled.abs() > spec.clip_threshold).sum()


def _flushed_count(xf: torch.Tensor, dequant: torch.Tensor) -> torch.Tensor:
    # inf saturates and NaN stays NaN, so only finite nonzero inputs can come back as 0.
    return ((dequant == 0) & (xf != 0)).sum()


# Scales inside [2**-126, FLT_MAX] keep 1/scale finite and no nonzero FP8 value dequantizes to 0
# (min_subnormal / FLT_MAX > 2**-149), so "dequant == 0" is "the FP8 byte is +-0".
_MIN_NORMAL_F32 = 2.0**-126


def _host_counts(
    xf: torch.Tensor,
    scaled: torch.Tensor,
    dequant: torch.Tensor,
    scale_t: torch.Tensor,
    amax: torch.Tensor,
    amin: torch.Tensor | None,
    spec: Fp8Format,
) -> tuple[int, int, tuple[float, float] | None]:
    """`_clipped_count` and `_flushed_count`, exactly, with full passes only where something may count;
    also max amax and min scale as read on the way (None where they were not read).

    A product of two FP32 values is exact in float64, and FP32 multiplication rounds monotonically, so
    every |x * s| lies within [fl(min|x| * min s), fl(max|x| * max s)]: if amax * max s is within the
    clip threshold nothing clipped, and if min|x| * min s is at least `flush_bound` nothing was zero and
    nothing flushed. Otherwise the count runs: flushed = zeros out - zeros in (an input 0 stays 0, and
    with the scale in range a dequantized 0 is a +-0 FP8 byte). On the fp8-step default about a quarter
    of the calls count flushes (tensors with tiny values or exact zeros) and a few count clips. Anything
    outside these assumptions takes the reference formulas. The common path reads three numbers and
    runs no kernel: its Python is kept short because it runs for every tensor of every step.
    """
    n = xf.numel()
    if n == 0:
        return 0, 0, None
    if scale_t.dim() == 0:
        s_lo = s_hi = scale_t.item()
    else:
        s_lo, s_hi = scale_t.min().item(), scale_t.max().item()
    if not (_MIN_NORMAL_F32 <= s_lo and s_hi <= FLT_MAX):  # NaN fails both
        return int(_clipped_count(scaled, spec)), int(_flushed_count(xf, dequant)), None
    a_hi = amax.item() if amax.dim() == 0 else amax.max().item()  # a caller's amax may be per block
    clipped = 0
    if not a_hi * s_hi <= spec.clip_threshold:  # written so that a NaN product counts too
        # _clipped_count's comparison; count_nonzero reads the mask faster than summing it as integers.
        clipped = int(torch.count_nonzero(scaled.abs() > spec.clip_threshold))
    lo = amin.item() if amin is not None else xf.abs().amin().item()  # NaN when x holds NaN: no shortcut
    if lo * s_lo >= spec.flush_bound:
        return clipped, 0, (a_hi, s_lo)
    # count_nonzero straight over FP32 (no mask tensor): -0.0 is zero, NaN and inf are not.
    zeros_out = n - int(torch.count_nonzero(dequant))
    if zeros_out == 0 or lo > 0:  # an input 0 gives a 0 out, so zeros_out == 0 means no zero came in
        return clipped, zeros_out, (a_hi, s_lo)
    return clipped, zeros_out - (n - int(torch.count_nonzero(xf))), (a_hi, s_lo)


# --------------------------------------------------------------------------- scales


def compute_scale(amax, fmt: str, margin: int = 0, prev_scale=1.0):
    """Delayed-scaling scale as TE's fused update computes it: (fp8_max * 2**-margin) / amax, in FP32.

    amax 0, inf or NaN keeps `prev_scale`; a scale that overflows FP32 becomes FLT_MAX
    (`kernel_bulk` in transformer_engine/common/recipe/delayed_scaling.cu, v2.0 to main; the unfused
    Python path divides first, (fp8_max / amax) / 2**margin, which differs only when fp8_max / amax
    itself overflows). Returns a float for float input and a tensor for tensor input.
    """
    as_tensor = torch.is_tensor(amax)
    a = torch.as_tensor(amax, dtype=torch.float32)
    prev = torch.as_tensor(prev_scale, dtype=torch.float32, device=a.device)
    scaled_max = torch.tensor(_format(fmt).max * 2.0**-margin, dtype=torch.float32, device=a.device)
    sf = scaled_max / a
    sf = torch.where(a > 0.0, sf, prev)
    sf = torch.where(torch.isfinite(a), sf, prev)
    sf = torch.where(torch.isinf(sf), torch.full_like(sf, FLT_MAX), sf)
    return sf if as_tensor else float(sf)


def current_scale(amax, fmt: str, eps: float = 0.0):
    """Current-scaling scale from the tensor being quantized, TE's `compute_scale_from_amax`.

    transformer_engine/common/recipe/recipe_common.cuh (v2.9, main): the epsilon floor comes first
    (amax < eps -> eps, so with eps > 0 an all-zero tensor gets fp8_max / eps), then amax 0, inf or
    NaN gives 1, else fp8_max / amax, and a quotient that overflows FP32 becomes FLT_MAX.
    """
    as_tensor = torch.is_tensor(amax)
    a = torch.as_tensor(amax, dtype=torch.float32)
    fp8_max = torch.tensor(_format(fmt).max, dtype=torch.float32, device=a.device)
    a = torch.where(a < eps, torch.full_like(a, eps), a)  # NaN < eps is false: NaN stays NaN
    bad = (a == 0) | ~torch.isfinite(a)
    sf = torch.where(bad, torch.ones_like(a), fp8_max / torch.where(bad, torch.ones_like(a), a))
    sf = torch.where(torch.isinf(sf), torch.full_like(sf, FLT_MAX), sf)
    return sf if as_tensor else float(sf)


def _pow2_floor(x: torch.Tensor) -> torch.Tensor:
    """Largest power of two <= x (x > 0, finite): keep the exponent, drop the mantissa."""
    _, e = torch.frexp(x)  # x = m * 2**e with m in [0.5, 1)
    return torch.ldexp(torch.ones_like(x), e - 1)


def _pow2_ceil_exponent(x: torch.Tensor) -> torch.Tensor:
    """ceil(log2(x)) for x > 0, exact for powers of two."""
    m, e = torch.frexp(x)
    return torch.where(m == 0.5, e - 1, e)


# --------------------------------------------------------------------------- block formats


def _as_2d(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(1, -1) if x.dim() < 2 else x.reshape(-1, x.shape[-1])


def _quantize_blocks(x: torch.Tensor, fmt: str, block: tuple[int, int], scale_from_amax, count: bool) -> QuantResult:
    """Quantize a 2-D view of `x` in (bm, bk) tiles, each with scale_from_amax(tile amax)."""
    shape = x.shape
    x2 = _as_2d(x.float())  # (M, K)
    m, k = x2.shape
    bm, bk = block
    pm, pk = (-m) % bm, (-k) % bk
    # Zero padding cannot raise a tile's amax and is never counted as clipped or flushed.
    xp = F.pad(x2, (0, pk, 0, pm))  # (M', K')
    tiles = xp.reshape((m + pm) // bm, bm, (k + pk) // bk, bk)  # (Mb, bm, Kb, bk)
    amax = absmax(tiles, dim=(1, 3), keepdim=True)  # (Mb, 1, Kb, 1), NaN ignored as in TE
    scale = scale_from_amax(amax)
    res = quantize(tiles, fmt, scale, count=count)
    deq = res.dequant.reshape(m + pm, k + pk)[:m, :k].reshape(shape)
    data = res.data.reshape(m + pm, k + pk)[:m, :k].reshape(shape)
    return QuantResult(
        deq, data, scale.reshape(amax.shape[0], amax.shape[2]), amax.amax(), res.clipped_t, res.flushed_t
    )


def quantize_blockwise(
    x: torch.Tensor, fmt: str = "e4m3", block: tuple[int, int] = (1, 128), pow2: bool = True, *, count: bool = True
) -> QuantResult:
    """Block scaling: one scale per (bm, bk) tile of the 2-D view (leading dims flattened).

    (1, 128) is TE's tile for activations and gradients, (128, 128) for weights. With
    pow2=True the scale fp8_max/amax is rounded *down* to a power of two, so scaling is exact
    in binary and the tile's largest value still fits.
    """
    _format(fmt)

    def scale_from_amax(amax: torch.Tensor) -> torch.Tensor:
        sf = current_scale(amax, fmt)
        return _pow2_floor(sf) if pow2 else sf

    return _quantize_blocks(x, fmt, block, scale_from_amax, count)


def quantize_mx(
    x: torch.Tensor, block: int = 32, fmt: str = "e4m3", dim: int = -1, *, count: bool = True
) -> QuantResult:
    """MXFP8: each run of `block` values along `dim` shares an E8M0 (power-of-two) scale.

    The shared scale is 2**e with e = float_to_e8m0(amax * (1 / fp8_max)): the FP32 product's exponent, rounded up
    when its mantissa is not zero, clamped to E8M0's [-127, 127], exactly as Transformer Engine computes it
    (transformer_engine/common/util/ptx.cuh @ v2.9 `float_to_e8m0`, ptx_arch_spec.cuh @ main d0067d0, called with
    `amax * Quantized_Limits<OType>::max_norm_rcp` in cast/mxfp8/quantize_mxfp8.cuh). So amax / 2**e <= fp8_max and
    nothing clips, except where the FP32 reciprocal rounds the product down onto a power of two just below
    amax / fp8_max: there TE keeps that exponent and the block's largest values saturate at fp8_max, and so does
    this emulation (the explicit clamp counts them as clipped). `scale` in the result is the multiplier 2**-e, for
    symmetry with the other recipes (1 for an all-zero or non-finite block).
    """
    fp8_max = _format(fmt).max

    def scale_from_amax(amax: torch.Tensor) -> torch.Tensor:
        ok = (amax > 0) & torch.isfinite(amax)
        # FP32 times the FP32 reciprocal, as TE's kernel multiplies by max_norm_rcp (a float constant).
        rcp = torch.tensor(1.0 / fp8_max, dtype=torch.float32)
        ratio = torch.where(ok, amax.float() * rcp, torch.ones_like(amax))
        e = _pow2_ceil_exponent(ratio).clamp(-127, 127)
        return torch.where(ok, torch.ldexp(torch.ones_like(amax), -e), torch.ones_like(amax))

    if x.dim() < 2:
        return _quantize_blocks(x, fmt, (1, block), scale_from_amax, count)
    moved = x.movedim(dim, -1)
    res = _quantize_blocks(moved, fmt, (1, block), scale_from_amax, count)
    res.dequant = res.dequant.movedim(-1, dim)
    res.data = res.data.movedim(-1, dim)
    return res


# --------------------------------------------------------------------------- accumulation & int8


def accumulate(values: Iterable[float], fmt: str, promote_every: int | None = None) -> float:
    """Sum `values` with the running sum rounded to `fmt` after every addition.

    With promote_every=N the narrow partial sum is added into an FP32 accumulator and reset
    every N terms, the way FP8 GEMMs promote tensor-core partial sums.
    """
    narrow = torch.zeros((), dtype=torch.float32)
    wide = torch.zeros((), dtype=torch.float32)
    for i, v in enumerate(values, start=1):
        narrow = round_to_format(narrow + float(v), fmt)
        if promote_every and i % promote_every == 0:
            wide = wide + narrow
            narrow = torch.zeros((), dtype=torch.float32)
    return float(wide + narrow)


@dataclass
class IntQuant:
    q: torch.Tensor  # integer codes (stored as int32 to allow any bit width <= 16)
    scale: torch.Tensor  # grid step: x ~= q * scale (per tensor or per block)
    dequant: torch.Tensor


def absmax_quantize(x: torch.Tensor, bits: int = 8, block: int | None = None) -> IntQuant:
    """Symmetric absmax quantization: step = max|x| / (2**(bits-1) - 1), q = round(x / step).

    With `block`, the flattened tensor is cut into runs of `block` values, each with its own
    step, so an outlier only coarsens its own block.
    """
    if not 2 <= bits <= 16:
        raise ValueError(f"bits: got {bits}, expected 2..16")
    qmax = 2 ** (bits - 1) - 1
    xf = x.float().reshape(-1)
    n = xf.numel()
    size = block or max(n, 1)
    pad = (-n) % size
    blocks = F.pad(xf, (0, pad)).reshape(-1, size)  # (nblocks, size)
    step = blocks.abs().amax(dim=1, keepdim=True) / qmax
    step = torch.where(step > 0, step, torch.ones_like(step))  # an all-zero block stays 0
    q = torch.round(blocks / step).clamp(-qmax, qmax)
    deq = (q * step).reshape(-1)[:n].reshape(x.shape)
    return IntQuant(q.reshape(-1)[:n].reshape(x.shape).to(torch.int32), step.reshape(-1), deq)


# --------------------------------------------------------------------------- recipes


@dataclass(frozen=True)
class Fp8Recipe:
    """What an FP8 run uses; field defaults mirror TE's DelayedScaling defaults."""

    kind: RecipeKind = "delayed"  # delayed | current | block | mxfp8
    fp8_format: Literal["hybrid", "e4m3"] = "hybrid"  # hybrid: E4M3 forward, E5M2 gradients
    margin: int = 0  # delayed only: scale divided by 2**margin as headroom
    amax_history_len: int = 1024  # delayed only: steps of amax kept
    amax_compute_algo: Literal["max", "most_recent"] = "max"  # delayed only
    amax_epsilon: float = 0.0  # current only: floor on amax before dividing
    delayed_update: Literal["fused", "unfused"] = (
        "fused"  # delayed only: TE's kernel_bulk, or NVTE_UNFUSED_FP8_UPDATE=1
    )

    def __post_init__(self):
        if self.kind not in ("delayed", "current", "block", "mxfp8"):
            raise ValueError(f"recipe kind: got {self.kind!r}, expected delayed, current, block or mxfp8")
        if self.fp8_format not in ("hybrid", "e4m3"):
            raise ValueError(f"fp8_format: got {self.fp8_format!r}, expected hybrid or e4m3")
        if self.amax_history_len < 1:
            raise ValueError(f"amax_history_len: got {self.amax_history_len}, expected >= 1")
        if self.amax_compute_algo not in ("max", "most_recent"):
            raise ValueError(f"amax_compute_algo: got {self.amax_compute_algo!r}, expected max or most_recent")
        if self.delayed_update not in ("fused", "unfused"):
            raise ValueError(f"delayed_update: got {self.delayed_update!r}, expected fused or unfused")

    def format_for(self, role: str) -> str:
        return "e5m2" if (role == "grad_output" and self.fp8_format == "hybrid") else "e4m3"

    def block_for(self, role: str) -> tuple[int, int]:
        """Tile along the last dim of the 2-D operand (the GEMM's reduction dim)."""
        if self.kind == "mxfp8":
            return (1, 32)
        return (128, 128) if role == "weight" else (1, 128)


__all__ = [
    "FLT_MAX",
    "FORMATS",
    "FP8_MAX",
    "Fp8Format",
    "Fp8Recipe",
    "IntQuant",
    "QuantResult",
    "absmax",
    "absmax_quantize",
    "accumulate",
    "compute_scale",
    "current_scale",
    "quantize",
    "quantize_blockwise",
    "quantize_mx",
    "round_to_format",
]
