"""Integer quantization: symmetric absmax per tensor and per block, and affine (zero-point) per tensor."""

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


def affine_quant(values: list[float], bits: int = 8) -> dict:
    """Affine (asymmetric) quantization: the grid spans [min, max] instead of [−max|x|, max|x|].

    step = (max − min) / (2^b − 1); the zero point z = round(−min / step) is the code that stands for 0.0;
    q = clamp(round(x / step) + z, 0, 2^b − 1) and x ≈ (q − z) · step. For values that are mostly of one
    sign (after a GELU), the symmetric grid leaves half its codes unused and the affine one does not.
    """
    if not values:
        raise CalcError("values must be a non-empty list of numbers")
    if not isinstance(bits, int) or not 2 <= bits <= 16:
        raise CalcError(f"bits must be an integer in 2..16, got {bits!r}")
    lo, hi = min(0.0, *map(float, values)), max(0.0, *map(float, values))  # 0.0 stays exactly representable
    if hi == lo:
        raise CalcError("values must not all be zero")
    qmax = 2**bits - 1
    step = (hi - lo) / qmax
    zero = int(round(-lo / step))
    out: dict = {"step": step, "zero_point": zero, "qmax": qmax, "symmetric_step": absmax_quant(values, bits)["step"]}
    out["finer"] = out["symmetric_step"] / step
    for i, v in enumerate(values):
        q = min(max(int(round(float(v) / step)) + zero, 0), qmax)
        out[f"q{i}"] = q
        out[f"x{i}"] = (q - zero) * step
    return out
