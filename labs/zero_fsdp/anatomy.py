"""Lesson 08's memory anatomy and the ZeRO paper's traffic, for this lab's model (torch-free).

The arithmetic is app/content/calc/memory.py `zero_memory` (the lesson's calculator), reproduced here because
labs/ imports nothing from app: bytes per parameter for weights, gradients and optimizer state, with the
optimizer state divided over N ranks from ZeRO stage 1, gradients from stage 2 and weights from stage 3 (FSDP).
The lesson's defaults are mixed precision (2 + 2 + 12 bytes); this lab trains in FP32 with AdamW, so 4 + 4 + 8
(two FP32 moments; no separate master copy, the FP32 weights are the master).
"""

from __future__ import annotations

from labs.parallel import comm

BYTES_WEIGHT, BYTES_GRAD, BYTES_OPTIM = 4, 4, 8  # FP32 weights and gradients, AdamW's exp_avg + exp_avg_sq

# Which ZeRO stage each strategy is in lesson 08's table.
STAGE = {"ddp": 0, "zero1": 1, "fsdp2": 3, "fsdp2-no-reshard": 3}


def block_params(hidden: int) -> int:
    """One pre-norm block: two LayerNorms (2d each), qkv (3d² + 3d), attention out (d² + d), MLP 4d (8d² + 5d)."""
    d = hidden
    return 12 * d * d + 13 * d


def param_count(*, layers: int, hidden: int, vocab: int, seq: int) -> int:
    """Token and position embeddings, the blocks, the final LayerNorm and an untied, bias-free output head."""
    d = hidden
    return vocab * d + seq * d + layers * block_params(d) + 2 * d + vocab * d


def zero_memory(params: int, gpus: int, stage: int) -> dict:
    """Bytes per rank of weights, gradients and optimizer state at ZeRO `stage` (as calc/memory.py zero_memory)."""
    w = BYTES_WEIGHT * params / (gpus if stage >= 3 else 1)
    g = BYTES_GRAD * params / (gpus if stage >= 2 else 1)
    o = BYTES_OPTIM * params / (gpus if stage >= 1 else 1)
    return {"param_bytes": w, "grad_bytes": g, "optim_bytes": o, "total_bytes": w + g + o}


def predicted_traffic(strategy: str, *, params: int) -> dict[str, float]:
    """Buffer bytes per step by collective kind (each collective's full buffer, summed), FP32.

    ddp: one all-reduce of every gradient. zero1 (as torch's ZeroRedundancyOptimizer does it): the same
    all-reduce, then each rank broadcasts the weights it updated; the paper's ZeRO-1 reduce-scatters instead and
    all-gathers, for DDP's 2Ψ in all. fsdp2: every unit's weights all-gathered in forward and again in backward,
    every gradient reduce-scattered (the ZeRO paper's 3Ψ). fsdp2-no-reshard: weights stay gathered from forward
    to backward, so one all-gather fewer (2Ψ, for weights held longer).
    """
    b = BYTES_WEIGHT * params
    if strategy == "ddp":
        return {"all-reduce": b}
    if strategy == "zero1":
        return {"all-reduce": b, "broadcast": b}
    if strategy == "fsdp2":
        return {"all-gather": 2 * b, "reduce-scatter": b}
    return {"all-gather": b, "reduce-scatter": b}


def predicted_bus_bytes(traffic: dict[str, float], ranks: int) -> float:
    """What each rank sends on a ring for `traffic`: each buffer x its collective's bus factor."""
    return sum(comm.bus_bytes(k, ranks, v) for k, v in traffic.items())
