"""Memory per GPU: training state under DP and ZeRO, model-parallel shards, activations."""

from __future__ import annotations

from ._base import CalcError, positive, whole


def zero_memory(params: float, gpus: int, stage: int, weights: float = 2, grads: float = 2, optim: float = 12) -> dict:
    """Bytes per parameter and total per GPU for DDP (stage 0) and ZeRO stages 1–3 (mixed precision, Adam)."""
    params = positive("params", params)
    if stage not in (0, 1, 2, 3):
        raise CalcError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    if not isinstance(gpus, int) or gpus < 1:
        raise CalcError(f"gpus must be an integer >= 1, got {gpus!r}")
    w = weights / gpus if stage >= 3 else weights
    g = grads / gpus if stage >= 2 else grads
    o = optim / gpus if stage >= 1 else optim
    per_param = w + g + o
    return {"bytes_per_param": per_param, "bytes": per_param * params, "gb": per_param * params / 1e9}


def model_state(
    params: float,
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    zero: int = 0,
    weights: float = 2,
    grads: float = 2,
    optim: float = 12,
) -> dict:
    """Training state per GPU: weights, gradients and optimizer state of this GPU's model-parallel shard.

    TP and PP cut the model into tp·pp shards; ZeRO then shards (some of) each shard's state over the dp
    ranks that hold copies of it: stage 1 the optimizer state, 2 also the gradients, 3 also the weights
    (FSDP is stage 3). Bytes per parameter default to mixed precision with Adam: 2 + 2 + 12.
    """
    params = positive("params", params)
    dp, tp, pp = whole("dp", dp), whole("tp", tp), whole("pp", pp)
    if zero not in (0, 1, 2, 3):
        raise CalcError(f"zero must be 0, 1, 2 or 3, got {zero!r}")
    shard = params / (tp * pp)
    w = shard * weights / (dp if zero >= 3 else 1)
    g = shard * grads / (dp if zero >= 2 else 1)
    o = shard * optim / (dp if zero >= 1 else 1)
    return {
        "shard_params": shard,
        "weights_gb": w / 1e9,
        "grads_gb": g / 1e9,
        "optim_gb": o / 1e9,
        "state_gb": (w + g + o) / 1e9,
        "bytes_per_param": (w + g + o) / shard,
        "gpus": dp * tp * pp,
    }


RECOMPUTE = ("none", "selective", "full")


def activations(
    layers: int,
    hidden: int,
    heads: int,
    seq: int,
    micro_batch: int = 1,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    pp: int = 1,
) -> dict:
    """Activation memory per GPU kept for the backward pass (Korthikanti et al. 2022, GPT-style layer).

    One layer keeps s·b·h·(34 + 5·a·s/h) bytes: 16-bit activations and 1-byte dropout masks, 34·s·b·h
    for the linear parts and 5·a·s²·b for the attention scores. Tensor parallelism shares 24 of the 34
    (the parts inside the column/row-parallel pairs) and the scores; sequence parallelism shares the
    remaining 10 as well. 'selective' recomputes the attention scores (what FlashAttention does anyway),
    'full' keeps only each layer's 2·s·b·h-byte input. With 1F1B pipelining the first stage holds p
    microbatches of L/p layers, the same as all L layers of one microbatch, so PP does not shrink this.
    Embeddings, the final norm and the output layer are left out.
    """
    layers, hidden, heads = whole("layers", layers), whole("hidden", hidden), whole("heads", heads)
    seq, b = whole("seq", seq), whole("micro_batch", micro_batch)
    tp, pp = whole("tp", tp), whole("pp", pp)
    if recompute not in RECOMPUTE:
        raise CalcError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    sbh = seq * b * hidden
    scores = 0.0 if recompute == "selective" else 5 * heads * seq / hidden
    if recompute == "full":
        per_layer = 2 * sbh / (tp if sequence_parallel else 1)
    elif sequence_parallel:
        per_layer = sbh * (34 + scores) / tp
    else:
        per_layer = sbh * (10 + (24 + scores) / tp)
    total = per_layer * layers  # 1F1B: p microbatches in flight × L/p layers on the first stage
    return {
        "per_layer_bytes": per_layer,
        "per_layer_gb": per_layer / 1e9,
        "bytes": total,
        "gb": total / 1e9,
        "gib": total / 2**30,
        "layers_per_gpu": layers / pp,
        "in_flight": pp,
    }


def memory_per_gpu(
    params: float,
    layers: int,
    hidden: int,
    heads: int,
    seq: int,
    micro_batch: int = 1,
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    zero: int = 0,
    sequence_parallel: bool = False,
    recompute: str = "none",
    hbm_gb: float = 80,
) -> dict:
    """Training state plus activations on one GPU, and whether it fits in `hbm_gb` (80 GB for an H100)."""
    state = model_state(params, dp=dp, tp=tp, pp=pp, zero=zero)
    act = activations(layers, hidden, heads, seq, micro_batch, tp, sequence_parallel, recompute, pp)
    total = state["state_gb"] + act["gb"]
    return {
        "weights_gb": state["weights_gb"],
        "grads_gb": state["grads_gb"],
        "optim_gb": state["optim_gb"],
        "state_gb": state["state_gb"],
        "activations_gb": act["gb"],
        "total_gb": total,
        "fits": total <= positive("hbm_gb", hbm_gb),
        "headroom_gb": hbm_gb - total,
    }
