"""Integer absmax quantization, per tensor and per block (the worked int8 examples)."""

from __future__ import annotations

from ._base import CalcError


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
