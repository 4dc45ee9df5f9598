"""What a block-scaled low-precision tensor costs in bits: each element's own bits plus its share of the scales.

Recipes, as their sources define them: DeepSeek-V3 (arXiv 2412.19437, §3.3) scales activations per 1×128 tile
and weights per 128×128 block with FP32 scales; MXFP8 (OCP MX v1.0; Transformer Engine's mxfp8 docs) gives every
32 consecutive elements one 8-bit E8M0 scale; NVFP4 (Transformer Engine's nvfp4 docs) gives every 16 elements
an E4M3 scale and the whole tensor one FP32 scale.
"""

from __future__ import annotations

from ._base import CalcError, at_least, positive, whole

# name: (element bits, elements per scale, scale bits, per-tensor scale bits)
RECIPES = {
    "deepseek-activation": (8, 128, 32, 0),
    "deepseek-weight": (8, 128 * 128, 32, 0),
    "mxfp8": (8, 32, 8, 0),
    "nvfp4": (4, 16, 8, 32),
}


def scaled_format(
    element_bits: float,
    block: int,
    scale_bits: float,
    tensor_scale_bits: float = 0.0,
    elements: float = 0.0,
    copies: int = 1,
) -> dict:
    """Bits per element of a block-scaled tensor: element_bits + scale_bits/block (+ a per-tensor scale spread
    over `elements`, when given), times `copies` (a rowwise and a columnwise copy are 2)."""
    element_bits = positive("element_bits", element_bits)
    block = whole("block", block)
    scale_bits = at_least("scale_bits", scale_bits)
    tensor_scale_bits = at_least("tensor_scale_bits", tensor_scale_bits)
    elements = at_least("elements", elements)
    copies = whole("copies", copies)
    if tensor_scale_bits and not elements:
        raise CalcError(
            "elements must be > 0 when tensor_scale_bits is given (the per-tensor scale is spread over them)"
        )
    per_tensor = tensor_scale_bits / elements if elements else 0.0
    bits = element_bits + scale_bits / block + per_tensor
    return {
        "bits": bits,
        "scale_bits_per_element": scale_bits / block + per_tensor,
        "overhead_pct": 100 * (bits - element_bits) / element_bits,
        "total_bits": copies * bits,
        "vs_bf16": copies * bits / 16,
        "saving_vs_bf16_pct": 100 * (1 - copies * bits / 16),
        "megabytes": copies * bits * elements / 8 / 1e6 if elements else 0.0,
    }


def recipe_bits(recipe: str, elements: float = 0.0, copies: int = 1) -> dict:
    """`scaled_format` for one of the named recipes: deepseek-activation, deepseek-weight, mxfp8, nvfp4."""
    if recipe not in RECIPES:
        raise CalcError(f"recipe must be one of {', '.join(RECIPES)}, got {recipe!r}")
    bits, block, scale, tensor = RECIPES[recipe]
    if tensor and not elements:
        tensor = 0  # a per-tensor scale over an unstated, large tensor: negligible
    out = scaled_format(bits, block, scale, tensor, elements, copies)
    return {**out, "element_bits": bits, "block": block, "scale_bits": scale}


def promotions(k: int, interval: int = 128, mma_k: int = 32) -> dict:
    """FP32 promotions per output element of a GEMM with inner dimension `k` when the tensor cores' partial sum is
    moved to an FP32 register every `interval` elements of K; `mma_k` is the K of one tensor-core instruction
    (32 for an FP8 WGMMA on Hopper), so each promotion follows interval/mma_k instructions."""
    k, interval, mma_k = whole("k", k), whole("interval", interval), whole("mma_k", mma_k)
    if interval % mma_k:
        raise CalcError(f"interval ({interval}) must be a multiple of mma_k ({mma_k})")
    return {"promotions": -(-k // interval), "mmas_per_promotion": interval // mma_k, "k": k}
