"""FP8 in one arithmetic: FP32 scales and products, round-to-nearest-even onto the FP8 grid.

The rules are Transformer Engine's, the same ones labs/numerics/fp8.py runs with torch (citing TE's source); this
module is plain Python so the web tier never imports torch. tests/content/test_calc.py checks the two
give the same bits.
"""

from __future__ import annotations

import math
import struct

from ._base import CalcError, positive, whole

#: Largest finite magnitude of each FP8 format (Transformer Engine's FP8 formats).
FP8_MAX = {"E4M3": 448.0, "E5M2": 57344.0}
#: (mantissa bits, smallest normal exponent) of each format, for round-to-nearest-even.
FP8_BITS = {"E4M3": (3, -6), "E5M2": (2, -14)}
FLT_MAX = 3.4028234663852886e38
# Half an ulp above FLT_MAX: from here on, rounding to FP32 gives inf (FLT_MAX's mantissa is odd, so a tie
# rounds up too).
_F32_OVERFLOW = FLT_MAX + 2.0**103


def _fmt(fmt: str) -> str:
    key = str(fmt).upper()
    if key not in FP8_MAX:
        raise CalcError(f"fmt must be one of {sorted(FP8_MAX)}, got {fmt!r}")
    return key


# ---------------------------------------------------------------- FP32 and FP8 rounding


def f32(x: float) -> float:
    """x rounded to the nearest FP32 value (ties to even), the way a float32 tensor holds it.

    Rounding the exact double result once to FP32 is the correctly rounded FP32 result of +, −, ×, ÷ on
    FP32 inputs (a double carries more than 2·24 + 2 bits), so `f32(f32(a) / f32(b))` is FP32 division.
    """
    if math.isnan(x) or math.isinf(x):
        return x
    if abs(x) >= _F32_OVERFLOW:
        return math.copysign(math.inf, x)
    if abs(x) > FLT_MAX:
        return math.copysign(FLT_MAX, x)
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def round_fp8(x: float, fmt: str = "E4M3") -> float:
    """Round one value to the nearest representable FP8 value (ties to even), clamping at ±fp8_max."""
    fmt = _fmt(fmt)
    if x == 0 or math.isnan(x):
        return x
    mant, emin = FP8_BITS[fmt]
    a = min(abs(x), FP8_MAX[fmt])
    _, e = math.frexp(a)  # a = m * 2**e with m in [0.5, 1): floor(log2 a) = e - 1
    step = 2.0 ** (max(e - 1, emin) - mant)
    q = min(round(a / step) * step, FP8_MAX[fmt])  # round() is half-to-even
    return math.copysign(q, x)


def clip_threshold(fmt: str) -> float:
    """Scaled magnitudes above this lose more than rounding to the clamp: fp8_max plus half its ulp.

    Up to there a value rounds to fp8_max anyway (ties go to fp8_max, whose mantissa is even), so only
    values beyond it count as clipped; labs/numerics/fp8.py counts clips the same way.
    """
    fmt = _fmt(fmt)
    mant, _ = FP8_BITS[fmt]
    top_ulp = 2.0 ** (math.floor(math.log2(FP8_MAX[fmt])) - mant)
    return FP8_MAX[fmt] + top_ulp / 2


def fp8_grid(fmt: str = "E4M3") -> list[float]:
    """Every non-negative finite value of the format, ascending (subnormals first, fp8_max last)."""
    fmt = _fmt(fmt)
    mant, emin = FP8_BITS[fmt]
    values = [k * 2.0 ** (emin - mant) for k in range(2**mant)]  # 0 and the subnormals
    e = emin
    while True:
        for k in range(2**mant):
            v = (1 + k / 2**mant) * 2.0**e
            if v > FP8_MAX[fmt]:
                return values
            values.append(v)
        e += 1


def fp8_spacing(value: float, fmt: str = "E4M3") -> dict:
    """The gap between neighbouring FP8 values around `value`, and the power-of-two range it holds in.

    Between 2**e and 2**(e+1) every normal value is 2**(e − mantissa bits) from the next; a sum that
    reaches `low` stops growing under additions smaller than half that gap.
    """
    fmt = _fmt(fmt)
    v = positive("value", value)
    if v > FP8_MAX[fmt]:
        raise CalcError(f"value must be at most {FP8_MAX[fmt]:g} for {fmt}, got {value!r}")
    mant, emin = FP8_BITS[fmt]
    e = max(math.frexp(v)[1] - 1, emin)
    gap = 2.0 ** (e - mant)
    return {"low": 2.0**e, "high": 2.0 ** (e + 1), "gap": gap, "half_gap": gap / 2}


# ---------------------------------------------------------------- FP8 scaling


def fp8_scale(amax: float, fmt: str = "E4M3", margin: int = 0) -> dict:
    """Scale that maps amax onto the format's largest value: (fp8_max / amax) / 2**margin, in FP32.

    An amax so small that the quotient overflows FP32 gives FLT_MAX, as in Transformer Engine.
    """
    fmt = _fmt(fmt)
    amax = positive("amax", amax)
    if not isinstance(margin, int) or isinstance(margin, bool) or margin < 0:
        raise CalcError(f"margin must be an integer >= 0, got {margin!r}")
    scale = f32(f32(FP8_MAX[fmt] / f32(amax)) / 2.0**margin)
    if math.isinf(scale):
        scale = FLT_MAX
    return {"scale": scale, "fp8_max": FP8_MAX[fmt], "amax": amax}


def fp8_map(value: float, scale: float | None = None, fmt: str = "E4M3", amax: float | None = None) -> dict:
    """Where one value lands after scaling: the scaled value, what is stored after the clamp, and clipping.

    Give the `scale`, or the `amax` it is derived from (then scale = fp8_scale(amax, fmt)). The product is
    taken in FP32; `dequantized` multiplies back by the FP32 reciprocal of the scale, as TE does.
    """
    fmt = _fmt(fmt)
    if (scale is None) == (amax is None):
        raise CalcError("give exactly one of scale or amax")
    s = fp8_scale(amax, fmt)["scale"] if amax is not None else f32(positive("scale", scale))
    scaled = f32(f32(float(value)) * s)
    limit = FP8_MAX[fmt]
    clipped = abs(scaled) > clip_threshold(fmt)
    stored = round_fp8(scaled, fmt)  # clamps explicitly before rounding
    return {
        "value": float(value),
        "scaled": scaled,
        "stored": stored,
        "clipped": clipped,
        "fp8_max": limit,
        "lost": abs(scaled) - limit if clipped else 0.0,
        "dequantized": f32(stored * f32(1.0 / s)),
        "scale": s,
    }


def accumulate_fp8(addend: float, count: int, promote_every: int = 0, fmt: str = "E4M3") -> dict:
    """Sum `count` copies of `addend`, rounding the running sum to FP8 after every add.

    promote_every = k > 0 flushes the FP8 partial sum into an FP32 total every k terms, the fix
    DeepSeek-V3 describes; 0 means never promote. `stuck_after` is the last add that still changed the
    unpromoted sum (0 when it never stops moving, or when promoting).
    """
    fmt = _fmt(fmt)
    count = whole("count", count)
    promote_every = whole("promote_every", promote_every, least=0)
    a = f32(float(addend))
    total, partial, stuck_after, prev = 0.0, 0.0, 0, None
    for i in range(1, count + 1):
        partial = round_fp8(f32(partial + a), fmt)  # the add runs in FP32, the sum is stored in FP8
        if prev is not None and partial == prev and not stuck_after and not promote_every:
            stuck_after = i - 1
        prev = partial
        if promote_every and i % promote_every == 0:
            total = f32(total + partial)  # the FP32 accumulator
            partial, prev = 0.0, None
    total = f32(total + partial)
    exact = float(addend) * count
    return {"total": total, "exact": exact, "error": exact - total, "stuck_after": stuck_after}
