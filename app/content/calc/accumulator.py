"""The tensor core's narrow accumulator in an FP8 GEMM, in plain Python: what DeepSeek-V3 measured and fixed.

No GPU keeps a running sum in FP8. An FP8 GEMM multiplies FP8 inputs and adds the products into an
accumulator that, on Hopper's fast path, keeps about 14 significant bits (DeepSeek-V3 Technical Report,
2024, §3.3.2: relative errors near 2% at K = 4096; promoting partial sums to FP32 every 128 elements of K
fixes it). This module is the same MODEL as labs/numerics/accumulate.py (the app may not import labs
beyond labs.api, and the web tier never imports torch): `group` products are summed exactly (one MMA
step), the sum joins a partial sum cut to `bits` explicit mantissa bits (toward zero by default, as Fasi,
Higham, Mikaitis and Pranesh measured on tensor cores in 2021), and every `promote_every` elements the
partial sum moves into an FP32 total. tests/content/test_calc_accumulator.py checks both agree.
"""

from __future__ import annotations

import math
import random

from ._base import CalcError, whole
from .fp8 import f32, round_fp8

ROUNDINGS = ("truncate", "nearest")


def _rounding(rounding: str) -> str:
    if rounding not in ROUNDINGS:
        raise CalcError(f"rounding must be one of {', '.join(ROUNDINGS)}, got {rounding!r}")
    return rounding


def round_mantissa(x: float, bits: int, rounding: str = "truncate") -> float:
    """x kept to `bits` explicit mantissa bits (bits + 1 significant): toward zero, or nearest with ties to even."""
    if x == 0 or not math.isfinite(x):
        return x
    m, e = math.frexp(x)  # x = m · 2**e, 0.5 <= |m| < 1
    scaled = math.ldexp(m, bits + 1)
    cut = math.trunc(scaled) if _rounding(rounding) == "truncate" else round(scaled)  # round(): half to even
    return math.ldexp(cut, e - (bits + 1))


def narrow_add(partial: float, addend: float, bits: int = 13, rounding: str = "truncate") -> dict:
    """One add into the narrow accumulator: partial + addend, kept to `bits` explicit mantissa bits.

    `spacing` is the gap between neighbouring values the accumulator holds around the sum, 2**(e − bits)
    for a sum in [2**e, 2**(e+1)); truncation drops whatever of the add lies below it.
    """
    bits = whole("bits", bits)
    if bits > 23:
        raise CalcError(f"bits must be at most 23 (FP32 keeps 23), got {bits}")
    exact = float(partial) + float(addend)
    stored = round_mantissa(exact, bits, rounding)
    e = math.frexp(exact)[1] - 1 if exact else 0
    return {
        "exact": exact,
        "stored": stored,
        "lost": exact - stored,
        "spacing": 2.0 ** (e - bits),
        "significant_bits": bits + 1,
        "nearest": round_mantissa(exact, bits, "nearest"),
    }


def e4m3_inputs(k: int, rows: int, seed: int = 0) -> tuple[list[list[float]], list[list[float]]]:
    """`rows` pairs of length-k vectors of values uniform in [0, 1) rounded to E4M3: the demonstration's inputs.

    Positive values make the partial sum grow steadily, the case where the narrow accumulator loses most
    (post-GELU activations times positive weights).
    """
    rng = random.Random(seed)
    a = [[round_fp8(rng.random()) for _ in range(k)] for _ in range(rows)]
    b = [[round_fp8(rng.random()) for _ in range(k)] for _ in range(rows)]
    return a, b


def dot_narrow(
    a: list[float], b: list[float], bits: int = 13, group: int = 32, promote_every: int = 0, rounding: str = "truncate"
) -> float:
    """One output element of the GEMM under the model: groups summed exactly, a narrow partial sum, FP32 promotion."""
    total, partial = 0.0, 0.0
    for k0 in range(0, len(a), group):
        step = f32(math.fsum(x * y for x, y in zip(a[k0 : k0 + group], b[k0 : k0 + group], strict=True)))
        partial = round_mantissa(f32(partial + step), bits, rounding)
        if promote_every and (k0 + group) % promote_every == 0:
            total, partial = f32(total + partial), 0.0
    return f32(total + partial)


def fast_accumulation(
    k: int = 4096,
    rows: int = 8,
    bits: int = 13,
    group: int = 32,
    promote_every: int = 128,
    rounding: str = "truncate",
    seed: int = 0,
) -> dict:
    """Relative error of `rows` E4M3 dot products of length k summed three ways, against the exact sum.

    fp32: the FP32 accumulator (the split accumulator, or what an emulation does); fast: the narrow
    accumulator over the whole K; promoted: the narrow accumulator flushed into FP32 every `promote_every`.
    Errors are ‖x − exact‖ / ‖exact‖ over the rows, as labs/numerics/accumulate.py reports them. MODELLED.
    """
    k, rows, group = whole("k", k), whole("rows", rows), whole("group", group)
    bits, promote_every = whole("bits", bits), whole("promote_every", promote_every, least=0)
    if k % group:
        raise CalcError(f"k ({k}) must be a multiple of group ({group})")
    if promote_every and promote_every % group:
        raise CalcError(f"promote_every ({promote_every}) must be a multiple of group ({group}), or 0 for never")
    _rounding(rounding)
    a, b = e4m3_inputs(k, rows, seed)
    exact = [math.fsum(x * y for x, y in zip(ra, rb, strict=True)) for ra, rb in zip(a, b, strict=True)]
    fp32 = [dot_narrow(ra, rb, 23, group, 0, "nearest") for ra, rb in zip(a, b, strict=True)]
    fast = [dot_narrow(ra, rb, bits, group, 0, rounding) for ra, rb in zip(a, b, strict=True)]
    promoted = [dot_narrow(ra, rb, bits, group, promote_every, rounding) for ra, rb in zip(a, b, strict=True)]
    norm = math.sqrt(math.fsum(x * x for x in exact))

    def err(xs: list[float]) -> float:
        return math.sqrt(math.fsum((x - y) ** 2 for x, y in zip(xs, exact, strict=True))) / norm

    fast_err, promoted_err = err(fast), err(promoted)
    return {
        "k": k,
        "significant_bits": bits + 1,
        "group": group,
        "promote_every": promote_every,
        "adds": k // group,
        "fp32_error": err(fp32),
        "fast_error": fast_err,
        "promoted_error": promoted_err,
        "fast_pct": 100 * fast_err,
        "promoted_pct": 100 * promoted_err,
        "gain": fast_err / promoted_err if promoted_err else math.inf,
    }
