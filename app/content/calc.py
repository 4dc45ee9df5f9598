"""Named calculations behind every worked number in the lessons.

Authors never type a derived number. `lesson.yaml` declares it:

    computed:
      worked-scale: {calc: fp8_scale, args: {amax: 240, fmt: E4M3}, format: ".2f"}

and any Markdown field of the lesson writes `{{calc:worked-scale.scale}}` (or `{{calc:worked-scale.scale|.3f}}`
to override the format). The loader evaluates each entry once, checks every placeholder, and substitutes
the numbers, so the page, the tests and the practice engine all read the same arithmetic.

Each calculation returns a flat dict of named numbers (bools render as yes/no). FP8 rules follow
Transformer Engine (docs in shared/DESIGN.md): scale = (fp8_max / amax) / 2**margin, quantize = multiply,
clamp to ±fp8_max explicitly, then round. When the labs package provides `labs.fp8`, its functions are
used so the lesson and the lab agree bit for bit; otherwise the same rules run in plain Python here
(tests/content/test_calc.py checks that both paths give the same numbers).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

_UNSET = object()
_labs_fp8: object = _UNSET  # imported on first use: labs.fp8 pulls in torch (~1.5 s), not needed to import app


def _labs():
    """labs.fp8 when the standalone lab package is importable, else None (plain-Python arithmetic)."""
    global _labs_fp8
    if _labs_fp8 is _UNSET:
        try:
            from labs.numerics import fp8 as module
        except Exception:  # ImportError, or a half-written module during development
            module = None
        _labs_fp8 = module
    return _labs_fp8


#: Largest finite magnitude of each FP8 format (Transformer Engine's FP8 formats).
FP8_MAX = {"E4M3": 448.0, "E5M2": 57344.0}
#: (mantissa bits, smallest normal exponent) of each format, for round-to-nearest-even.
_FP8_BITS = {"E4M3": (3, -6), "E5M2": (2, -14)}
FLT_MAX = 3.4028234663852886e38


class CalcError(ValueError):
    """A calculation got arguments it cannot use; the message names the argument and the allowed values."""


def _fmt(fmt: str) -> str:
    key = str(fmt).upper()
    if key not in FP8_MAX:
        raise CalcError(f"fmt must be one of {sorted(FP8_MAX)}, got {fmt!r}")
    return key


def _positive(name: str, value: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise CalcError(f"{name} must be a number > 0, got {value!r}")
    return float(value)


def round_fp8(x: float, fmt: str = "E4M3") -> float:
    """Round one value to the nearest representable FP8 value (ties to even), clamping at ±fp8_max."""
    fmt = _fmt(fmt)
    if x == 0 or math.isnan(x):
        return x
    mant, emin = _FP8_BITS[fmt]
    a = min(abs(x), FP8_MAX[fmt])
    _, e = math.frexp(a)  # a = m * 2**e with m in [0.5, 1): floor(log2 a) = e - 1
    step = 2.0 ** (max(e - 1, emin) - mant)
    q = min(round(a / step) * step, FP8_MAX[fmt])  # round() is half-to-even
    return math.copysign(q, x)


# ---------------------------------------------------------------- FP8 scaling


def fp8_scale(amax: float, fmt: str = "E4M3", margin: int = 0) -> dict:
    """Scale that maps amax onto the format's largest value: (fp8_max / amax) / 2**margin."""
    fmt = _fmt(fmt)
    amax = _positive("amax", amax)
    if _labs() is not None:  # FP32 arithmetic, as the lab and Transformer Engine do it
        scale = float(_labs().compute_scale(amax, fmt.lower(), margin=margin))
    else:
        scale = min((FP8_MAX[fmt] / amax) / 2.0**margin, FLT_MAX)
    return {"scale": scale, "fp8_max": FP8_MAX[fmt], "amax": amax}


def fp8_map(value: float, scale: float | None = None, fmt: str = "E4M3", amax: float | None = None) -> dict:
    """Where one value lands after scaling: the scaled value, what is stored after the clamp, and clipping.

    Give the `scale`, or the `amax` it is derived from (then scale = fp8_scale(amax, fmt)).
    """
    fmt = _fmt(fmt)
    if (scale is None) == (amax is None):
        raise CalcError("give exactly one of scale or amax")
    scale = fp8_scale(amax, fmt)["scale"] if amax is not None else _positive("scale", scale)
    scaled = float(value) * scale
    limit = FP8_MAX[fmt]
    clipped = abs(scaled) > limit
    stored = round_fp8(scaled, fmt)  # clamps explicitly before rounding
    if _labs() is not None:  # the lab's quantizer: same clamp, its own clip threshold and FP32 math
        import torch

        res = _labs().quantize(torch.tensor([float(value)]), fmt.lower(), scale)
        stored, clipped = float(res.data.float()[0]), res.clipped > 0
    return {
        "scaled": scaled,
        "stored": stored,
        "clipped": clipped,
        "fp8_max": limit,
        "lost": abs(scaled) - limit if clipped else 0.0,
        "dequantized": stored / scale,
        "scale": scale,
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
    DeepSeek-V3 describes; 0 means never promote.
    """
    fmt = _fmt(fmt)
    if not isinstance(count, int) or count < 1:
        raise CalcError(f"count must be an integer >= 1, got {count!r}")
    total, stuck = _accumulate(addend, count, promote_every, fmt)
    if _labs() is not None:
        total = float(_labs().accumulate([addend] * count, fmt.lower(), promote_every=promote_every or None))
    exact = addend * count
    return {"total": total, "exact": exact, "error": exact - total, "stuck_after": stuck}


def _accumulate(addend: float, count: int, promote_every: int, fmt: str) -> tuple[float, int]:
    total, partial, stuck_after, prev = 0.0, 0.0, 0, None
    for i in range(1, count + 1):
        partial = round_fp8(partial + addend, fmt)
        if prev is not None and partial == prev and not stuck_after and not promote_every:
            stuck_after = i - 1  # the last add that still changed the sum
        prev = partial
        if promote_every and i % promote_every == 0:
            total += partial  # FP32 (here: Python float) total
            partial, prev = 0.0, None
    return total + partial, stuck_after


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


def using_labs_fp8() -> bool:
    """True when FP8 numbers come from labs.fp8 rather than this module's own arithmetic."""
    return _labs() is not None
