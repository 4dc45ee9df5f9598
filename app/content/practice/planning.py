"""Problem families of lesson 08: memory per GPU, training budgets, FSDP and HSDP traffic, MoE sizes and
serving. Parameters are in the units a learner reads (billions of parameters, GB/s, TFLOP/s, MB); every
solver converts and calls app/content/calc."""

from __future__ import annotations

from labs.api import count

from .. import calc
from .family import Generator
from .numerics import NO_ADAM, ONE_PHASE, WEIGHTS_ONLY, no_own_share, stage_mistakes


def _state(p):
    dp, tp, pp, zero = int(p["dp"]), int(p["tp"]), int(p["pp"]), int(p["zero"])
    r = calc.model_state(p["params"] * 1e9, dp, tp, pp, zero)
    mistakes = [(r["weights_gb"], WEIGHTS_ONLY), (r["weights_gb"] + r["grads_gb"], NO_ADAM)]
    if tp * pp > 1:
        mistakes.append(
            (
                calc.model_state(p["params"] * 1e9, dp, 1, 1, zero)["state_gb"],
                f"That leaves the model whole. TP = {tp} and PP = {pp} cut it into {tp * pp} shards first; ZeRO then "
                "shards each shard's state over its data-parallel copies.",
            )
        )
    if dp > 1:
        mistakes += stage_mistakes(lambda k: calc.model_state(p["params"] * 1e9, dp, tp, pp, k)["state_gb"], zero)
    return {
        "answer": r["state_gb"],
        "bytes_per_param": r["bytes_per_param"],
        "shard_b": r["shard_params"] / 1e9,
        "mistakes": mistakes,
    }


def _activations(p):
    args = {
        "layers": int(p["layers"]),
        "hidden": int(p["hidden"]),
        "heads": int(p["heads"]),
        "seq": int(p["seq"]),
        "micro_batch": int(p["micro_batch"]),
        "tp": int(p["tp"]),
        "sequence_parallel": bool(p["sequence_parallel"]),
        "recompute": str(p["recompute"]),
    }
    r = calc.activations(**args)
    mistakes = [
        (r["per_layer_gb"], f"That is one layer. Every one of the {args['layers']} layers keeps its own activations."),
    ]
    other = {"none": "selective", "selective": "none", "full": "selective"}[args["recompute"]]
    why = {
        "none": "Without recomputation the attention scores (the 5·a·s/h term) are kept too.",
        "selective": "Selective recomputation drops the attention scores (the 5·a·s/h term) and recomputes them.",
        "full": "Full recomputation keeps only each layer's input, 2·s·b·h bytes, and recomputes the rest.",
    }[args["recompute"]]
    mistakes.append((calc.activations(**{**args, "recompute": other})["gb"], f"That is recompute “{other}”. {why}"))
    if args["tp"] > 1:
        mistakes.append(
            (
                calc.activations(**{**args, "tp": 1, "sequence_parallel": False})["gb"],
                f"That leaves out tensor parallelism: TP = {args['tp']} splits the activations inside each layer"
                + (" and sequence parallelism the rest." if args["sequence_parallel"] else "."),
            )
        )
    return {"answer": r["gb"], "per_layer_gb": r["per_layer_gb"], "mistakes": mistakes}


def _tokens(p):
    r = calc.train_budget(p["params"] * 1e9, tokens_per_param=p["tokens_per_param"])
    billions = r["tokens"] / 1e9
    ratio = p["tokens_per_param"]
    mistakes = [
        (p["params"] / ratio, f"That divides. Compute-optimal is about {ratio:g} tokens *per parameter*: multiply."),
        (
            6 * billions,
            f"That multiplies by 6 as well. The 6 belongs to the compute, 6·N·D FLOPs; the tokens are {ratio:g} × N.",
        ),
    ]
    slips = [(r["tokens"], "That is the count of tokens itself. The question asks in billions: divide by 10⁹.")]
    return {"answer": billions, "mistakes": mistakes, "slips": slips}


def _budget(p):
    return calc.train_budget(
        p["params"] * 1e9, tokens=p["tokens"] * 1e9, flops=p["flops"] * 1e12, mfu=p["mfu"], gpus=int(p["gpus"])
    )


def _compute_mistakes(answer: float, mfu: float) -> list[tuple[float, str]]:
    """Known wrong ideas about training compute (grading.py: each is a try, its feedback names the idea)."""
    return [
        (
            answer / 3,
            "That counts 2·N·D, the forward pass alone. Training also runs the backward pass, about twice the "
            "forward's work: 6·N·D.",
        ),
        (
            answer * mfu,
            f"That assumes the GPUs run at their peak. At {mfu * 100:.4g}% MFU they deliver {mfu * 100:.4g}% of it, so "
            f"the work takes 1/{mfu:g} = {1 / mfu:.3g} times as long.",
        ),
    ]


def _hours(p):
    r = _budget(p)
    mistakes = _compute_mistakes(r["hours"], p["mfu"])
    if int(p["gpus"]) > 1:
        mistakes.append(
            (
                r["gpu_hours"],
                f"That is GPU-hours: the whole run on one GPU. On {int(p['gpus']):,} GPUs the wall clock runs "
                f"1/{int(p['gpus']):,} of that.",
            )
        )
    return {
        "answer": r["hours"],
        "days": r["days"],
        "flop": r["flop"],
        "gpu_hours": r["gpu_hours"],
        "mistakes": mistakes,
    }


def _gpu_hours(p):
    r = _budget(p)
    slips = [(r["gpu_hours"] * 3600, "That looks like GPU-seconds. The question asks for GPU-hours: divide by 3,600.")]
    return {
        "answer": r["gpu_hours"],
        "flop": r["flop"],
        "slips": slips,
        "mistakes": _compute_mistakes(r["gpu_hours"], p["mfu"]),
    }


def _step_compute(p):
    r = calc.train_compute(p["params"] * 1e9, p["tokens"], p["flops"] * 1e12, p["mfu"])
    return {"answer": r["seconds"], "flop": r["flop"], "mistakes": _compute_mistakes(r["seconds"], p["mfu"])}


def _fsdp_step(p):
    gpus = int(p["gpus"])
    state = calc.model_state(p["params"] * 1e9, dp=gpus, zero=3)["state_gb"]
    if state > p["memory"]:  # a draw the learner could not run: make_variant draws again
        raise calc.CalcError(f"FSDP of {p['params']}B over {gpus} GPUs keeps {state:.0f} GB per GPU > {p['memory']} GB")
    return calc.fsdp_step(
        p["params"] * 1e9, gpus, p["bandwidth"] * 1e9, p["tokens"], p["flops"] * 1e12, p["mfu"],
        int(p["collectives"]), gpus_per_node=int(p["gpus_per_node"]), nic_bandwidth=p["nic"] * 1e9,
    )  # fmt: skip


PER_GPU_NIC = (
    "That pushes each GPU's (N−1)/N of the weights through its own {nic:g} GB/s NIC. NCCL runs one ring per "
    "rail, so all {per_node} NICs of a node carry the collective at once: the (N−1)/N of the weights the ring "
    "sends out of each node crosses the node's {egress:g} GB/s of egress."
)
HIERARCHICAL_FLOOR = (
    "That prices only what a node lacks, (nodes−1)/nodes of the weights: the floor of a hierarchical algorithm "
    "that first works inside the node. NCCL's ring runs flat over all N GPUs, and its hop out of each node "
    "carries (N−1)/N of the weights."
)


def _fsdp(p):
    r = _fsdp_step(p)
    gpus, collectives = int(p["gpus"]), int(p["collectives"])
    mistakes = [] if r["cross_node"] else no_own_share(r["comm_ms"], gpus)
    if collectives == 3:
        mistakes.append(
            (
                r["comm_ms"] * 2 / 3,
                "That counts two collectives. FSDP gathers the weights for the forward pass, gathers them again "
                "for the backward (it freed them in between), and reduce-scatters the gradients: three.",
            )
        )
    if r["cross_node"]:
        words = PER_GPU_NIC.format(nic=p["nic"], per_node=int(p["gpus_per_node"]), egress=r["egress_gbs"])
        mistakes.append((r["per_gpu_nic_ms"], words))
        mistakes.append((r["hier_comm_ms"], HIERARCHICAL_FLOOR))
    nodes = gpus // int(p["gpus_per_node"])
    return {
        "answer": r["comm_ms"],
        "one_ms": r["one_ms"],
        "moved_gb": r["moved_gb"],
        "node_out_gb": r["node_out_gb"] / collectives,
        "egress": r["egress_gbs"],
        "nodes": nodes,
        "hier_ms": r["hier_comm_ms"],
        "where": (
            f"{nodes} nodes, NCCL's flat ring over {gpus} GPUs sends (N−1)/N × {r['size_gb']:g} GB = "
            f"{r['node_out_gb'] / collectives:.4g} GB out of each node per collective, through its "
            f"{int(p['gpus_per_node'])} NICs at once ({r['egress_gbs']:g} GB/s)"
            if r["cross_node"]
            else f"one node, (N−1)/N × {r['size_gb']:g} GB = {r['moved_gb']:.3g} GB crosses each GPU's NVLink "
            f"({p['bandwidth']:g} GB/s)"
        ),
        "mistakes": mistakes,
    }


def _share(p):
    r = _fsdp_step(p)
    collectives = int(p["collectives"])
    mistakes = [
        (
            100 * r["compute_s"] / (r["comm_ms"] / 1e3),
            "That divides compute by communication. The share is communication ÷ compute.",
        ),
        (
            r["share"] * p["mfu"],
            f"That divides by the compute at the GPU's peak. At {p['mfu'] * 100:.4g}% MFU the compute takes "
            f"1/{p['mfu']:g} times as long, so the share is smaller than that.",
        ),
    ]
    if collectives == 3:
        mistakes.append(
            (r["share"] * 2 / 3, "That counts two collectives. FSDP gathers twice and reduce-scatters: three.")
        )
    if r["cross_node"]:
        mistakes.append((100 * r["hier_comm_ms"] / 1e3 / r["compute_s"], HIERARCHICAL_FLOOR))
    return {"answer": r["share"], "comm_s": r["comm_ms"] / 1e3, "compute_s": r["compute_s"], "mistakes": mistakes}


def _hsdp(p):
    per_node = int(p["gpus_per_node"])
    state = calc.model_state(p["params"] * 1e9, dp=per_node, zero=3)["state_gb"]
    if state > p["memory"]:  # HSDP shards only inside a node: a draw that cannot run is drawn again
        raise calc.CalcError(
            f"HSDP of {p['params']}B over {per_node} GPUs keeps {state:.0f} GB per GPU > {p['memory']} GB"
        )
    r = calc.hsdp_step(p["params"] * 1e9, per_node, int(p["nodes"]), p["bandwidth"] * 1e9)
    mistakes = [
        (r["ms"] / 2, ONE_PHASE),
        (
            r["ms"] * per_node,
            f"That all-reduces the whole model's gradients. Under HSDP each GPU owns 1/{per_node} of them and "
            "all-reduces only that shard, with the GPUs holding the same shard in the other nodes.",
        ),
    ]
    return {"answer": r["ms"], "shard_gb": r["shard_gb"], "mistakes": mistakes}


def _moe(p):
    r = calc.moe_params(
        int(p["layers"]),
        int(p["hidden"]),
        int(p["ffn"]),
        int(p["routed"]),
        int(p["shared"]),
        int(p["top_k"]),
        int(p["ep"]),
    )
    which = str(p["which"])
    if which not in ("total", "active", "per_gpu"):
        raise calc.CalcError(f"which must be total, active or per_gpu, got {which!r}")
    words = {"total": "in the whole model", "active": "active per token", "per_gpu": "held by each GPU"}[which]
    layers, expert, attention = int(p["layers"]), r["expert"], r["attention"]
    two_matrix = (
        calc.moe_params(
            layers, int(p["hidden"]), int(p["ffn"]), int(p["routed"]), int(p["shared"]), int(p["top_k"]), int(p["ep"])
        )[which]
        - layers * _experts(p, which) * expert / 3
    )
    mistakes = [
        (
            two_matrix / 1e9,
            "That counts an expert as 2·D·F, an MLP of two matrices. A SwiGLU expert has three (gate, up, down): "
            "3·D·F.",
        ),
        (
            (r[which] - layers * attention) / 1e9,
            "That leaves out attention, 4·D² per layer, which every token and every GPU of the expert-parallel "
            "group has too.",
        ),
    ]
    shared = int(p["shared"])
    if which == "active" and shared:
        mistakes.append(
            (
                (r["active"] - layers * shared * expert) / 1e9,
                f"That leaves out the {shared} shared experts: every token runs them as well.",
            )  # fmt: skip
        )
    if which == "per_gpu":
        mistakes.append(
            (
                r["total"] / int(p["ep"]) / 1e9,
                "That divides everything by EP. Only the routed experts are split across the group; the shared "
                "experts and attention are copied on every GPU.",
            )
        )
    return {
        "mistakes": mistakes,
        "answer": r[which] / 1e9,
        "expert_m": r["expert"] / 1e6,
        "attention_m": r["attention"] / 1e6,
        "asked": words,
    }


def _experts(p, which: str) -> int:
    """Experts a layer counts for `which`: every one in the model, those a token runs, those a GPU holds."""
    shared = int(p["shared"])
    return {
        "total": int(p["routed"]) + shared,
        "active": int(p["top_k"]) + shared,
        "per_gpu": int(p["routed"]) // int(p["ep"]) + shared,
    }[which]


def _all_to_all(p):
    gpus, top_k = int(p["gpus"]), int(p["top_k"])
    r = calc.moe_all_to_all(p["tokens"], top_k, int(p["hidden"]), gpus, p["bandwidth"] * 1e9)
    mistakes = [
        (
            r["ms"] / 2,
            "That is the dispatch alone. The experts' outputs come back in a second all-to-all, the combine.",
        ),
        *no_own_share(r["ms"], gpus),
    ]
    if top_k > 1:
        mistakes.append(
            (r["ms"] / top_k, f"That sends each token once. Routed top-{top_k}, it goes to {top_k} experts.")
        )
    return {
        "answer": r["ms"],
        "dispatch_mb": r["dispatch_bytes"] / 1e6,
        "remote_mb": r["remote_bytes"] / 1e6,
        "mistakes": mistakes,
    }


def _kv(p):
    r = calc.kv_cache(int(p["layers"]), int(p["kv_heads"]), int(p["head_dim"]), p["tokens"], int(p["batch"]))
    mib = "That looks like MiB (2²⁰ bytes). The question asks for MB (10⁶ bytes): multiply by 1.048576."
    mistakes = [
        (r["mb"] / 2, "That counts one tensor per token and layer. The cache keeps a key and a value for each: ×2."),
        (r["mb"] * 2, "That stores 4 bytes per value. The cache here is BF16: 2 bytes."),
    ]
    return {
        "answer": r["mb"],
        "per_token_kib": r["per_token_kib"],
        "slips": [(r["bytes"] / 2**20, mib)],
        "mistakes": mistakes,
    }


def _decode(p):
    kv = calc.kv_cache(int(p["layers"]), int(p["kv_heads"]), int(p["head_dim"]), p["context"], int(p["batch"]))
    r = calc.decode_step(
        p["params"] * 1e9, kv["bytes"], p["hbm"] * 1e12, int(p["gpus"]), int(p["layers"]), 1e-6 * p["alpha_us"]
    )
    gpus, batch = int(p["gpus"]), int(p["batch"])
    kv_ms = r["read_ms"] - r["weights_ms"] / gpus
    mistakes = [
        (
            r["ms"] + (batch - 1) * r["weights_ms"] / gpus,
            f"That reads the weights once per sequence. The {batch} sequences of a batch share one read of them: "
            "that is why batching pays.",
        ),
        (
            r["ms"] - kv_ms + kv_ms / batch,
            f"That reads one sequence's cache. Each of the {batch} sequences has its own keys and values to read.",
        ),
        (
            r["weights_ms"] / gpus + r["comm_ms"],
            f"That reads only the weights. Every step also reads the whole KV cache once: {kv['bytes'] / 1e9:.3g} GB.",
        ),
        (
            r["ms"] - kv_ms / 2,
            "That reads half the cache: the keys alone. Attention reads each cached token's key and its value.",
        ),
    ]
    if gpus > 1:
        mistakes += [
            (
                r["read_ms"],
                f"That leaves out the all-reduces. With tensor parallelism every layer all-reduces twice per step, "
                f"and at decode sizes each costs its latency: {r['comm_ms']:.2f} ms in all.",
            ),
            (
                r["read_ms"] * gpus + r["comm_ms"],
                f"That reads everything on one GPU. With {gpus}-way tensor parallelism each GPU reads 1/{gpus} of "
                "the weights and of the cache, at the same time as the others.",
            ),
        ]
    return {
        "answer": r["ms"],
        "mistakes": mistakes,
        "kv_gb": kv["bytes"] / 1e9,
        "weights_ms": r["weights_ms"],
        "comm_ms": r["comm_ms"],
        "gpus_text": count(int(p["gpus"]), "GPU"),  # "1 GPU", "8 GPUs": the prompt's words for the draw
    }


def _ffn_min(p):
    r = calc.tp_mlp_intensity(1.0, int(p["degree"]), p["mfu"], flops=p["flops"] * 1e12, bandwidth=p["bandwidth"] * 1e9)
    return {"answer": r["ffn_min"], "ridge": r["ridge"]}


def _tokens_per_step(p):
    dp, micro, seq, acc = int(p["dp"]), int(p["micro_batch"]), int(p["seq"]), int(p["accumulation"])
    tokens = dp * micro * seq * acc
    mistakes = [
        (micro * seq * acc / 1e6, f"That is one GPU's share. All {dp} data-parallel ranks feed the same step."),
        (
            dp * micro * acc / 1e6,
            f"That counts sequences. Each holds {seq:,} tokens: multiply by the sequence length.",
        ),
    ]
    if acc > 1:
        mistakes.append((tokens / acc / 1e6, f"That leaves out the {acc} accumulated micro-batches per step."))
    slips = [(tokens, "That is the count of tokens itself. The question asks in millions: divide by 10⁶.")]
    return {"answer": tokens / 1e6, "sequences": dp * micro * acc, "mistakes": mistakes, "slips": slips}


MODEL_7B = {"layers": 32, "hidden": 4096, "heads": 32}
# H100 nodes: NVLink per GPU, one NIC per GPU (rail-optimised), 80 GB per GPU for FSDP's sharded state.
FSDP_DEFAULTS = {
    "params": 7,
    "gpus": 8,
    "bandwidth": 450,
    "nic": 50,
    "gpus_per_node": 8,
    "memory": 80,
    "collectives": 3,
    "tokens": 16384,
    "flops": 989,
    "mfu": 0.4,
}

FAMILIES: list[Generator] = [
    Generator(
        "model_state",
        {"params": 7, "dp": 4, "tp": 1, "pp": 1, "zero": 1},
        "GB",
        "{{params}}B parameters, Adam in mixed precision, DP={{dp}}, TP={{tp}}, PP={{pp}}, ZeRO-{{zero}}: "
        "GB of training state per GPU?",
        "TP·PP = {{tp}}·{{pp}} leaves {{shard_b|.3g}}B parameters per GPU; with ZeRO-{{zero}} over {{dp}} data-parallel "
        "ranks that is {{bytes_per_param|.3g}} bytes each, {{answer|.1f}} GB.",
        _state,
    ),
    Generator(
        "activations",
        {**MODEL_7B, "seq": 4096, "micro_batch": 1, "tp": 1, "sequence_parallel": 0, "recompute": "selective"},
        "GB",
        "Activations kept for backward: {{layers}} layers, H = {{hidden}}, {{heads}} heads, {{seq}} tokens, "
        "micro-batch {{micro_batch}}, TP={{tp}}, recompute {{recompute}}. GB per GPU?",
        "Per layer {{per_layer_gb|.3g}} GB (s·b·h·34 bytes, plus 5·a·s²·b for the attention scores unless they "
        "are recomputed, divided as TP and SP allow); × {{layers}} layers = {{answer|.1f}} GB.",
        _activations,
    ),
    Generator(
        "train_tokens",
        {"params": 7, "tokens_per_param": 20},
        "",
        "A compute-optimal run for {{params}}B parameters uses about {{tokens_per_param}} tokens per parameter. "
        "How many billion tokens?",
        "{{tokens_per_param}} × {{params}}B = {{answer|,.0f}}B tokens.",
        _tokens,
    ),
    Generator(
        "train_hours",
        {"params": 7, "tokens": 140, "gpus": 8, "flops": 989, "mfu": 0.4},
        "h",
        "{{params}}B parameters on {{tokens}}B tokens, {{gpus}} GPUs at {{flops}} TFLOP/s and {{mfu|%}} MFU: "
        "how many hours of wall-clock time?",
        "6 · N · D = {{flop|.3g}} FLOPs; ÷ ({{gpus}} × {{flops}}·10¹² × {{mfu}}) = {{answer|,.1f}} h "
        "({{days|.1f}} days, {{gpu_hours|,.0f}} GPU-hours).",
        _hours,
    ),
    Generator(
        "gpu_hours",
        {"params": 1, "tokens": 20, "gpus": 1, "flops": 989, "mfu": 0.4},
        "",
        "{{params}}B parameters on {{tokens}}B tokens at {{flops}} TFLOP/s and {{mfu|%}} MFU: how many GPU-hours?",
        "6 · N · D = {{flop|.3g}} FLOPs ÷ ({{flops}}·10¹² × {{mfu}}) = {{answer|,.0f}} GPU-hours.",
        _gpu_hours,
    ),
    Generator(
        "step_compute",
        {"params": 7, "tokens": 16384, "flops": 989, "mfu": 0.4},
        "s",
        "{{params}}B parameters, {{tokens}} tokens per GPU per step, {{flops}} TFLOP/s at {{mfu|%}} MFU: seconds "
        "of compute per step?",
        "6 · N · tokens = {{flop|.3g}} FLOPs ÷ ({{flops}}·10¹² × {{mfu}}) = {{answer|.2f}} s.",
        _step_compute,
    ),
    Generator(
        "fsdp_comm",
        FSDP_DEFAULTS,
        "ms",
        "FSDP over {{gpus}} GPUs ({{gpus_per_node}} per node, NVLink {{bandwidth}} GB/s, one {{nic}} GB/s NIC per "
        "GPU), {{params}}B BF16 parameters, {{collectives}} collectives per pass: milliseconds of communication?",
        "In {{where}}: {{one_ms|.1f}} ms each; × {{collectives}} = {{answer|.0f}} ms.",
        _fsdp,
    ),
    Generator(
        "comm_share",
        FSDP_DEFAULTS,
        "%",
        "FSDP's communication ({{gpus}} GPUs, {{bandwidth}} GB/s) as a percentage of the step's compute?",
        "{{comm_s|.3g}} s of communication ÷ {{compute_s|.3g}} s of compute = {{answer|.1f}}%.",
        _share,
    ),
    Generator(
        "hsdp_comm",
        {"params": 7, "gpus_per_node": 8, "nodes": 64, "bandwidth": 50, "memory": 80},
        "ms",
        "HSDP: state sharded over the {{gpus_per_node}} GPUs of a node, replicated over {{nodes}} nodes at "
        "{{bandwidth}} GB/s. Milliseconds for the cross-node gradient all-reduce?",
        "Each GPU all-reduces its shard, {{params}}·2 GB ÷ {{gpus_per_node}} = {{shard_gb|.3g}} GB, with its peers "
        "in the other nodes: 2 × (N−1)/N × {{shard_gb|.3g}} GB ÷ {{bandwidth}} GB/s = {{answer|.0f}} ms.",
        _hsdp,
    ),
    Generator(
        "moe_params",
        {"layers": 24, "hidden": 2048, "ffn": 1024, "routed": 64, "shared": 2, "top_k": 6, "ep": 8, "which": "total"},
        "",
        "MoE: {{layers}} layers, D = {{hidden}}, expert F = {{ffn}}, {{routed}} routed + {{shared}} shared "
        "experts, top-{{top_k}}, EP = {{ep}}. Billions of parameters {{asked}}?",
        "An expert is 3·D·F = {{expert_m|.3g}}M parameters, attention 4·D² = {{attention_m|.3g}}M per layer: "
        "{{answer|.3g}}B {{asked}}.",
        _moe,
    ),
    Generator(
        "all_to_all",
        {"tokens": 8192, "top_k": 6, "hidden": 2048, "gpus": 8, "bandwidth": 450},
        "ms",
        "{{tokens}} tokens per GPU, top-{{top_k}}, D = {{hidden}}, {{gpus}} GPUs at {{bandwidth}} GB/s: "
        "milliseconds of all-to-all per MoE layer in the forward pass?",
        "Dispatch {{tokens}} × {{top_k}} × {{hidden}} × 2 bytes = {{dispatch_mb|.0f}} MB, the same to combine; "
        "(N−1)/N of it leaves the GPU: {{remote_mb|.0f}} MB ÷ {{bandwidth}} GB/s = {{answer|.2f}} ms.",
        _all_to_all,
    ),
    Generator(
        "kv_cache",
        {"layers": 32, "kv_heads": 8, "head_dim": 128, "tokens": 2000, "batch": 1},
        "MB",
        "KV cache in BF16: {{layers}} layers, {{kv_heads}} KV heads of dimension {{head_dim}}, {{tokens}} tokens, batch "
        "{{batch}}. How many MB?",
        "2 (K and V) × {{layers}} × {{kv_heads}} × {{head_dim}} × 2 bytes = {{per_token_kib|.0f}} KiB per token; "
        "× {{tokens}} × {{batch}} = {{answer|,.0f}} MB.",
        _kv,
    ),
    Generator(
        "decode_step",
        {
            "params": 8.03,
            "layers": 32,
            "kv_heads": 8,
            "head_dim": 128,
            "context": 2250,
            "batch": 32,
            "hbm": 3.35,
            "gpus": 1,
            "alpha_us": 10,
        },
        "ms",
        "Decode step of a {{params}}B model in BF16, batch {{batch}} at {{context}} tokens of context, "
        "{{hbm}} TB/s, {{gpus_text}}: milliseconds per step?",
        "Read the weights ({{weights_ms|.2f}} ms) and {{kv_gb|.3g}} GB of KV cache once, split over {{gpus_text}}, "
        "plus {{comm_ms|.2f}} ms of all-reduce latency: {{answer|.2f}} ms.",
        _decode,
    ),
    Generator(
        "tp_ffn_min",
        {"degree": 8, "flops": 989, "bandwidth": 450, "mfu": 0.5},
        "",
        "TP={{degree}} at {{flops}} TFLOP/s, {{mfu|%}} MFU, {{bandwidth}} GB/s: the smallest MLP width F whose "
        "GEMMs still outlast the all-reduce?",
        "F/(N−1) must reach P·MFU/W = {{ridge|,.0f}} FLOPs per byte: F > {{answer|,.0f}}.",
        _ffn_min,
    ),
    Generator(
        "tokens_per_step",
        {"dp": 512, "micro_batch": 1, "seq": 4096, "accumulation": 1},
        "",
        "{{dp}} data-parallel ranks, micro-batch {{micro_batch}} of {{seq}} tokens, {{accumulation}} accumulation "
        "steps: millions of tokens per optimizer step?",
        "{{sequences}} sequences × {{seq}} tokens = {{answer|.2f}} M tokens.",
        _tokens_per_step,
    ),
]
