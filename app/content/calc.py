"""Named calculations behind every worked number in the lessons.

Authors never type a derived number. `lesson.yaml` declares it:

    computed:
      worked-scale: {calc: fp8_scale, args: {amax: 240, fmt: E4M3}, format: ".2f"}

and any Markdown field of the lesson writes `{{calc:worked-scale.scale}}` (or `{{calc:worked-scale.scale|.3f}}`
to override the format). The loader evaluates each entry once, checks every placeholder, and substitutes
the numbers, so the page, the tests and the practice engine all read the same arithmetic.

Each calculation returns a flat dict of named numbers (bools render as yes/no). FP8 rules follow
Transformer Engine (shared/DESIGN.md) in one arithmetic, written here in plain Python so that the web tier
never imports torch: scale = (fp8_max / amax) / 2**margin computed in FP32; quantize = multiply in FP32,
clamp to ±fp8_max explicitly, round to the nearest FP8 value (ties to even). labs/fp8.py runs the same
rules with torch; tests/content/test_calc.py checks that both give the same bits over the worked numbers
and random cases.
"""

from __future__ import annotations

import inspect
import math
import struct
from collections.abc import Callable
from typing import Any

#: Largest finite magnitude of each FP8 format (Transformer Engine's FP8 formats).
FP8_MAX = {"E4M3": 448.0, "E5M2": 57344.0}
#: (mantissa bits, smallest normal exponent) of each format, for round-to-nearest-even.
FP8_BITS = {"E4M3": (3, -6), "E5M2": (2, -14)}
FLT_MAX = 3.4028234663852886e38
# Half an ulp above FLT_MAX: from here on, rounding to FP32 gives inf (FLT_MAX's mantissa is odd, so a tie
# rounds up too).
_F32_OVERFLOW = FLT_MAX + 2.0**103


class CalcError(ValueError):
    """A calculation got arguments it cannot use; the message names the argument and the allowed values."""


def _fmt(fmt: str) -> str:
    key = str(fmt).upper()
    if key not in FP8_MAX:
        raise CalcError(f"fmt must be one of {sorted(FP8_MAX)}, got {fmt!r}")
    return key


def _positive(name: str, value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise CalcError(f"{name} must be a number > 0, got {value!r}")
    return float(value)


def _count(name: str, value: Any, least: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise CalcError(f"{name} must be an integer >= {least}, got {value!r}")
    return value


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
    values beyond it count as clipped; labs/fp8.py counts clips the same way.
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


# ---------------------------------------------------------------- FP8 scaling


def fp8_scale(amax: float, fmt: str = "E4M3", margin: int = 0) -> dict:
    """Scale that maps amax onto the format's largest value: (fp8_max / amax) / 2**margin, in FP32.

    An amax so small that the quotient overflows FP32 gives FLT_MAX, as in Transformer Engine.
    """
    fmt = _fmt(fmt)
    amax = _positive("amax", amax)
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
    s = fp8_scale(amax, fmt)["scale"] if amax is not None else f32(_positive("scale", scale))
    scaled = f32(f32(float(value)) * s)
    limit = FP8_MAX[fmt]
    clipped = abs(scaled) > clip_threshold(fmt)
    stored = round_fp8(scaled, fmt)  # clamps explicitly before rounding
    return {
        "scaled": scaled,
        "stored": stored,
        "clipped": clipped,
        "fp8_max": limit,
        "lost": abs(scaled) - limit if clipped else 0.0,
        "dequantized": f32(stored * f32(1.0 / s)),
        "scale": s,
    }


# ---------------------------------------------------------------- timing and collectives


def step_time(compute: float, comm: float, overlap: float) -> dict:
    """Step time when `overlap` of the communication hides under compute: compute + comm − overlap."""
    for name, v in (("compute", compute), ("comm", comm), ("overlap", overlap)):
        if not isinstance(v, (int, float)) or v < 0:
            raise CalcError(f"{name} must be a number >= 0, got {v!r}")
    if overlap > min(compute, comm):
        raise CalcError(f"overlap ({overlap}) cannot exceed min(compute, comm) = {min(compute, comm)}")
    exposed = comm - overlap
    total = compute + exposed
    return {
        "total": total,
        "exposed": exposed,
        "hidden": overlap,
        "overlap_ratio": overlap / comm if comm else 1.0,
        "serial": compute + comm,
    }


def ring_allreduce(size: float, gpus: int) -> dict:
    """Bytes each GPU sends in a ring all-reduce of `size`: reduce-scatter + all-gather = 2(N−1)/N · size."""
    size = _positive("size", size)
    if not isinstance(gpus, int) or gpus < 2:
        raise CalcError(f"gpus must be an integer >= 2, got {gpus!r}")
    factor = 2 * (gpus - 1) / gpus
    return {"factor": factor, "per_gpu": factor * size, "half": factor / 2 * size}


def collective_time(size: float, gpus: int, bandwidth: float, kind: str = "all-gather") -> dict:
    """Seconds for one collective: (N−1)/N · size through each GPU, twice that for an all-reduce."""
    size = _positive("size", size)
    bandwidth = _positive("bandwidth", bandwidth)
    kinds = {"all-gather": 1, "reduce-scatter": 1, "all-reduce": 2}
    if kind not in kinds:
        raise CalcError(f"kind must be one of {sorted(kinds)}, got {kind!r}")
    moved = kinds[kind] * (gpus - 1) / gpus * size
    return {"moved": moved, "seconds": moved / bandwidth, "ms": 1e3 * moved / bandwidth}


def zero_memory(params: float, gpus: int, stage: int, weights: float = 2, grads: float = 2, optim: float = 12) -> dict:
    """Bytes per parameter and total per GPU for DDP (stage 0) and ZeRO stages 1–3 (mixed precision, Adam)."""
    params = _positive("params", params)
    if stage not in (0, 1, 2, 3):
        raise CalcError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    if not isinstance(gpus, int) or gpus < 1:
        raise CalcError(f"gpus must be an integer >= 1, got {gpus!r}")
    w = weights / gpus if stage >= 3 else weights
    g = grads / gpus if stage >= 2 else grads
    o = optim / gpus if stage >= 1 else optim
    per_param = w + g + o
    return {"bytes_per_param": per_param, "bytes": per_param * params, "gb": per_param * params / 1e9}


def pipeline_bubble(stages: int, microbatches: int) -> dict:
    """Idle fraction of a GPipe/1F1B pipeline: (p − 1) / (m + p − 1)."""
    if not isinstance(stages, int) or stages < 1:
        raise CalcError(f"stages must be an integer >= 1, got {stages!r}")
    if not isinstance(microbatches, int) or microbatches < 1:
        raise CalcError(f"microbatches must be an integer >= 1, got {microbatches!r}")
    frac = (stages - 1) / (microbatches + stages - 1)
    return {"fraction": frac, "percent": 100 * frac}


def tp_threshold(flops: float, bandwidth: float) -> dict:
    """Inner dimension D above which a 2-way TP matmul computes longer than it all-reduces: D > 2·P / W."""
    flops = _positive("flops", flops)
    bandwidth = _positive("bandwidth", bandwidth)
    return {"d_min": 2 * flops / bandwidth}


def train_compute(params: float, tokens: float, flops: float, mfu: float) -> dict:
    """Training compute 6·N·D FLOPs and its duration at a sustained fraction (MFU) of peak FLOP/s."""
    params, tokens, flops = _positive("params", params), _positive("tokens", tokens), _positive("flops", flops)
    if not 0 < mfu <= 1:
        raise CalcError(f"mfu must be in (0, 1], got {mfu!r}")
    total = 6 * params * tokens
    seconds = total / (flops * mfu)
    return {"flop": total, "seconds": seconds, "hours": seconds / 3600}


# ---------------------------------------------------------------- integer and block quantization


def absmax_quant(values: list[float], bits: int = 8) -> dict:
    """Symmetric absmax quantization: step = max|x| / (2^(b−1) − 1), q = round(x / step)."""
    if not values:
        raise CalcError("values must be a non-empty list of numbers")
    if not isinstance(bits, int) or not 2 <= bits <= 16:
        raise CalcError(f"bits must be an integer in 2..16, got {bits!r}")
    qmax = 2 ** (bits - 1) - 1
    amax = max(abs(float(v)) for v in values)
    if amax == 0:
        raise CalcError("values must not all be zero")
    step = amax / qmax
    q = [int(round(float(v) / step)) for v in values]
    out = {"step": step, "qmax": qmax, "amax": amax}
    for i, (qi, v) in enumerate(zip(q, values)):
        out[f"q{i}"] = qi
        out[f"x{i}"] = qi * step
        out[f"err{i}"] = abs(qi * step - float(v))
    out["levels_used"] = len(set(q))
    return out


def block_quant(values: list[float], block: int, bits: int = 8) -> dict:
    """Absmax per block of `block` consecutive values: an outlier only coarsens its own block."""
    if not isinstance(block, int) or block < 1:
        raise CalcError(f"block must be an integer >= 1, got {block!r}")
    out: dict = {}
    for start in range(0, len(values), block):
        part = absmax_quant(values[start : start + block], bits)
        out[f"step_b{start // block}"] = part["step"]
        for j in range(len(values[start : start + block])):
            out[f"q{start + j}"] = part[f"q{j}"]
            out[f"x{start + j}"] = part[f"x{j}"]
    return out


def accumulate_fp8(addend: float, count: int, promote_every: int = 0, fmt: str = "E4M3") -> dict:
    """Sum `count` copies of `addend`, rounding the running sum to FP8 after every add.

    promote_every = k > 0 flushes the FP8 partial sum into an FP32 total every k terms, the fix
    DeepSeek-V3 describes; 0 means never promote. `stuck_after` is the last add that still changed the
    unpromoted sum (0 when it never stops moving, or when promoting).
    """
    fmt = _fmt(fmt)
    count = _count("count", count)
    promote_every = _count("promote_every", promote_every, least=0)
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


# ---------------------------------------------------------------- registry

REGISTRY: dict[str, Callable[..., dict]] = {
    "fp8_scale": fp8_scale,
    "fp8_map": fp8_map,
    "step_time": step_time,
    "ring_allreduce": ring_allreduce,
    "collective_time": collective_time,
    "zero_memory": zero_memory,
    "pipeline_bubble": pipeline_bubble,
    "tp_threshold": tp_threshold,
    "train_compute": train_compute,
    "absmax_quant": absmax_quant,
    "block_quant": block_quant,
    "accumulate_fp8": accumulate_fp8,
}


def evaluate(name: str, args: dict) -> dict:
    """Run one registered calculation; CalcError names the unknown calculation or argument."""
    fn = REGISTRY.get(name)
    if fn is None:
        raise CalcError(f"unknown calculation {name!r}; known: {', '.join(sorted(REGISTRY))}")
    accepted = inspect.signature(fn).parameters
    unknown = sorted(set(args) - set(accepted))
    if unknown:
        raise CalcError(f"{name} does not take {unknown}; it takes {list(accepted)}")
    try:
        return fn(**args)
    except CalcError:
        raise
    except TypeError as exc:  # e.g. a missing required argument
        raise CalcError(f"{name}: {exc}") from None


def format_value(value, spec: str) -> str:
    """Render one computed value: bools as yes/no, numbers with a Python format spec."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    try:
        return format(value, spec)
    except (TypeError, ValueError) as exc:
        raise CalcError(f"format {spec!r} does not apply to {value!r}: {exc}") from None
