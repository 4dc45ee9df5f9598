"""Budgets: training compute (6·N·D), compute-optimal token counts, MoE sizes, serving arithmetic."""

from __future__ import annotations

import math

from labs.api import comm

from ._base import CalcError, at_least, fraction, positive, whole

#: Chinchilla's compute-optimal ratio (Hoffmann et al. 2022): about 20 training tokens per parameter.
CHINCHILLA_TOKENS_PER_PARAM = 20


def train_compute(params: float, tokens: float, flops: float, mfu: float) -> dict:
    """Training compute 6·N·D FLOPs and its duration at a sustained fraction (MFU) of peak FLOP/s."""
    params, tokens, flops = positive("params", params), positive("tokens", tokens), positive("flops", flops)
    mfu = fraction("mfu", mfu)
    total = 6 * params * tokens
    seconds = total / (flops * mfu)
    return {"flop": total, "seconds": seconds, "hours": seconds / 3600}


def train_budget(
    params: float,
    tokens: float | None = None,
    tokens_per_param: float = CHINCHILLA_TOKENS_PER_PARAM,
    flops: float = 989e12,
    mfu: float = 0.4,
    gpus: int = 1,
) -> dict:
    """A training run's size and duration: tokens (given, or `tokens_per_param` × N), 6·N·D FLOPs,
    GPU-hours at `mfu` of `flops` per GPU, and wall-clock hours and days on `gpus` GPUs.

    `over_optimal` says how many times more tokens per parameter than Chinchilla's ~20 the run uses.
    """
    params = positive("params", params)
    d = positive("tokens", tokens) if tokens is not None else params * positive("tokens_per_param", tokens_per_param)
    gpus = whole("gpus", gpus)
    run = train_compute(params, d, flops, mfu)
    gpu_hours = run["hours"]
    return {
        "tokens": d,
        "tokens_per_param": d / params,
        "over_optimal": d / params / CHINCHILLA_TOKENS_PER_PARAM,
        "flop": run["flop"],
        "gpu_hours": gpu_hours,
        "hours": gpu_hours / gpus,
        "days": gpu_hours / gpus / 24,
    }


def forward_time(
    params: float, tokens: float, flops: float, mfu: float = 1.0, layers: int = 0, hidden: int = 0
) -> dict:
    """A forward pass over `tokens` tokens: 2·N·T FLOPs for the weights, plus causal attention.

    With `layers` and `hidden` given, attention adds 2·L·T²·H (QKᵀ and A·V over a causal mask, i.e. for a
    prefill of T tokens from an empty cache); leave them 0 for a batch of independent tokens.
    """
    params, tokens, flops = positive("params", params), positive("tokens", tokens), positive("flops", flops)
    mfu = fraction("mfu", mfu)
    attention = 2 * whole("layers", layers, least=0) * tokens**2 * whole("hidden", hidden, least=0)
    total = 2 * params * tokens + attention
    seconds = total / (flops * mfu)
    return {"flop": total, "attention_flop": attention, "seconds": seconds, "ms": 1e3 * seconds}


def moe_params(
    layers: int,
    hidden: int,
    ffn: int,
    routed: int,
    shared: int,
    top_k: int,
    ep: int = 1,
    bytes_per_param: float = 2,
) -> dict:
    """Parameters of a mixture-of-experts stack: in total, active per token, and held per GPU under EP.

    An expert is a SwiGLU MLP of 3·D·F parameters; attention takes 4·D² per layer; embeddings are left
    out. A token runs `top_k` routed experts plus every shared one. Expert parallelism over `ep` GPUs
    gives each GPU routed/ep experts of every layer and a copy of the shared experts and attention.
    """
    layers, hidden, ffn = whole("layers", layers), whole("hidden", hidden), whole("ffn", ffn)
    routed, shared, top_k = whole("routed", routed), whole("shared", shared, least=0), whole("top_k", top_k)
    ep = whole("ep", ep)
    if top_k > routed:
        raise CalcError(f"top_k ({top_k}) cannot exceed routed ({routed})")
    if routed % ep:
        raise CalcError(f"routed ({routed}) must divide evenly over ep ({ep})")
    expert = 3 * hidden * ffn
    attention = 4 * hidden**2
    layer = (routed + shared) * expert + attention
    active_layer = (top_k + shared) * expert + attention
    gpu_layer = (routed // ep + shared) * expert + attention
    return {
        "expert": expert,
        "attention": attention,
        "layer": layer,
        "total": layers * layer,
        "active_layer": active_layer,
        "active": layers * active_layer,
        "per_gpu_layer": gpu_layer,
        "per_gpu": layers * gpu_layer,
        "per_gpu_gb": layers * gpu_layer * positive("bytes_per_param", bytes_per_param) / 1e9,
    }


def moe_all_to_all(tokens: float, top_k: int, hidden: int, gpus: int, bandwidth: float, bytes_per_value: float = 2):
    """One MoE layer's forward all-to-all: each token goes to `top_k` experts and comes back (dispatch +
    combine), (N−1)/N of it to other GPUs, at `bandwidth` bytes/s per GPU."""
    tokens, hidden = positive("tokens", tokens), whole("hidden", hidden)
    top_k, gpus = whole("top_k", top_k), whole("gpus", gpus)
    dispatch = tokens * top_k * hidden * positive("bytes_per_value", bytes_per_value)
    remote = comm.bus_bytes("all-to-all", gpus, 2 * dispatch)
    seconds = remote / positive("bandwidth", bandwidth)
    return {
        "dispatch_bytes": dispatch,
        "remote_bytes": remote,
        "dispatch_mb": dispatch / 1e6,
        "remote_mb": remote / 1e6,
        "seconds": seconds,
        "ms": 1e3 * seconds,
    }


def kv_cache(layers: int, kv_heads: int, head_dim: int, tokens: float, batch: int = 1, bytes_per_value: float = 2):
    """Bytes of K and V kept for `tokens` tokens of context in each of `batch` sequences."""
    layers, kv_heads, head_dim = whole("layers", layers), whole("kv_heads", kv_heads), whole("head_dim", head_dim)
    per_token = 2 * layers * kv_heads * head_dim * positive("bytes_per_value", bytes_per_value)
    total = per_token * positive("tokens", tokens) * whole("batch", batch)
    return {
        "per_token_bytes": per_token,
        "per_token_kib": per_token / 1024,
        "bytes": total,
        "mb": total / 1e6,
        "gb": total / 1e9,
    }


def decode_step(
    params: float,
    kv_bytes: float,
    hbm: float,
    gpus: int = 1,
    layers: int = 0,
    alpha: float = 0.0,
    bytes_per_param: float = 2,
    embedding: float = 0.0,
) -> dict:
    """One decode step is memory-bound: every weight and every cached K/V is read once.

    Every weight but the input embedding table: a step looks up one row of it per sequence. Give its
    size as `embedding` (parameters) to leave it out; an untied output head is read in full.

    With `gpus`-way tensor parallelism each GPU reads 1/gpus of both, and the step pays 2·`layers`
    all-reduces of a few hundred KiB, which at decode sizes cost their latency `alpha` each.
    """
    embedding = at_least("embedding", embedding)
    if embedding >= positive("params", params):
        raise CalcError(f"embedding ({embedding:g}) must be smaller than params ({params:g})")
    weight_bytes = (params - embedding) * positive("bytes_per_param", bytes_per_param)
    kv_bytes, hbm, gpus = positive("kv_bytes", kv_bytes), positive("hbm", hbm), whole("gpus", gpus)
    read = (weight_bytes + kv_bytes) / (hbm * gpus)
    comm_s = 2 * whole("layers", layers, least=0) * alpha if gpus > 1 else 0.0
    return {
        "read_ms": 1e3 * read,
        "comm_ms": 1e3 * comm_s,
        "ms": 1e3 * (read + comm_s),
        "weights_ms": 1e3 * weight_bytes / hbm,
        "weight_gb": weight_bytes / 1e9,
        "embedding_gb": embedding * bytes_per_param / 1e9,
    }


def serving_pools(prefill_ms: float, step_ms: float, batch: int, output_tokens: int) -> dict:
    """Requests per second one prefill GPU and one decode GPU sustain, and decode GPUs per prefill GPU."""
    prefill = 1e3 / positive("prefill_ms", prefill_ms)
    decode = whole("batch", batch) / (whole("output_tokens", output_tokens) * positive("step_ms", step_ms) / 1e3)
    return {
        "prefill_rps": prefill,
        "decode_rps": decode,
        "decode_per_prefill": prefill / decode,
        "prefill_in_steps": prefill_ms / step_ms,  # decode steps a batch stalls while one prefill runs
    }


def chinchilla_from_budget(
    compute: float, flops: float = 989e12, mfu: float = 0.4, gpu_hour_usd: float = 2.0, gpus: int = 1
) -> dict:
    """The compute-optimal model for a budget of `compute` FLOPs: C = 6·N·D with D = 20·N gives C = 120·N²,
    so N = √(C/120) and D = 20·N; then GPU-hours at `mfu` of `flops`, their price, and days on `gpus` GPUs."""
    compute = positive("compute", compute)
    params = math.sqrt(compute / (6 * CHINCHILLA_TOKENS_PER_PARAM))
    tokens = CHINCHILLA_TOKENS_PER_PARAM * params
    run = train_budget(params, tokens=tokens, flops=flops, mfu=mfu, gpus=gpus)
    usd = run["gpu_hours"] * positive("gpu_hour_usd", gpu_hour_usd)
    return {
        "params": params,
        "tokens": tokens,
        "gpu_hours": run["gpu_hours"],
        "usd": usd,
        "days": run["days"],
        "hours": run["hours"],
    }


def attention_flops(params: float, layers: int, hidden: int, seq: int) -> dict:
    """Training FLOPs per token beside 6·N: attention's QKᵀ and A·V, which 6·N·D leaves out.

    Forward, per token and layer, QKᵀ and A·V cost 2·s·H FLOPs each over all s keys (4·s·H); training
    triples it: 12·L·s·H per token (the term PaLM's MFU formula adds). A causal mask skips half of it, if
    the kernel skips masked blocks (FlashAttention does).
    """
    six_n = 6 * positive("params", params)
    full = 12 * whole("layers", layers) * whole("seq", seq) * whole("hidden", hidden)
    return {
        "six_n": six_n,
        "attention": full,
        "full_pct": 100 * full / six_n,
        "causal_pct": 50 * full / six_n,
    }


def logits_memory(seq: int, vocab: int, micro_batch: int = 1) -> dict:
    """Memory of the output logits for one micro-batch: the BF16 logits and the FP32 copy the cross-entropy
    computes in (its softmax kept for the backward), s·b·V values each. Korthikanti's per-layer formula does
    not count them; at a 128k vocabulary they outweigh several layers."""
    values = whole("seq", seq) * whole("micro_batch", micro_batch) * whole("vocab", vocab)
    bf16, fp32 = 2 * values, 4 * values
    return {"values": values, "bf16_gb": bf16 / 1e9, "fp32_gb": fp32 / 1e9, "gb": (bf16 + fp32) / 1e9}
