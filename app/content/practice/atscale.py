"""Problem families of lesson 09's readings: the network a node sits on, how real systems hide communication,
and what block-scaled low-precision formats cost in bits. Every solver calls app/content/calc."""

from __future__ import annotations

import math

from labs.api import comm

from .. import calc
from .family import Generator

ONE_NIC = (
    "That pushes the GPU's whole (N−1)/N share through its own NIC. NCCL runs a ring per rail, so all of a node's "
    "NICs carry the collective at once: the (N−1)/N of the array the ring sends out of each node crosses the "
    "node's egress."
)
HIERARCHICAL_FLOOR = (
    "That sends only what a node lacks, (k−1)/k of the array: the floor of a hierarchical algorithm that gathers "
    "inside the node first. NCCL's flat ring over all N GPUs sends (N−1)/N of it out of each node, on its one hop "
    "that leaves the node."
)
NVLINK_PART = "That is NVLink's time for the hops inside the node. The question asks for the network's part."
SHARED_EGRESS = (
    "That sends one GPU's off-node bytes through the whole node's egress. In an all-to-all every GPU of the node "
    "has its own bytes to send at the same time, so no NIC is free to help another: each GPU's NIC carries its own."
)


def _rail_all_gather(p):
    nodes, per_node = int(p["nodes"]), int(p["gpus_per_node"])
    r = calc.network_collective(
        p["size"] * 1e9, nodes, per_node, p["nic"] * 1e9, p["nvlink"] * 1e9, "all-gather", algorithm="flat-ring"
    )
    return {
        "answer": r["network_ms"],
        "gpus": nodes * per_node,
        "node_out_gb": r["node_out_gb"],
        "egress_gbs": r["egress_gbs"],
        "nvlink_ms": r["nvlink_ms"],
        "hier_gb": r["hier_node_out_gb"],
        "hier_ms": r["hier_network_ms"],
        "bound": "the network" if r["network_bound"] else "NVLink",
        "mistakes": [
            (r["per_gpu_nic_ms"], ONE_NIC),
            (r["hier_network_ms"], HIERARCHICAL_FLOOR),
            (r["nvlink_ms"], NVLINK_PART),
        ],
    }


def _all_to_all(p):
    nodes, per_node = int(p["nodes"]), int(p["gpus_per_node"])
    r = calc.cross_node_all_to_all(p["size"] * 1e9, nodes, per_node, p["nic"] * 1e9, p["nvlink"] * 1e9)
    gpus = nodes * per_node
    mistakes = [
        (r["egress_ms"], SHARED_EGRESS),
        (
            p["size"] / p["nic"] * 1e3,
            "That sends all of each GPU's bytes over the network. The share bound for GPUs of its own node goes over "
            "NVLink, and its own share stays put: only (N − g)/N leaves the node.",
        ),
        (
            comm.bus_bytes("all-to-all", gpus, p["size"]) / p["nic"] * 1e3,
            "That sends everything but the GPU's own share over the network. The share for the other GPUs of its "
            "node travels on NVLink: only (N − g)/N leaves the node.",
        ),
    ]
    return {
        "answer": r["network_ms"],
        "gpus": gpus,
        "off_node_gb": r["off_node_gb"],
        "off_node_share": r["off_node_share"],
        "mistakes": mistakes,
    }


def _ddp_buckets(p):
    grads = p["params"] * 1e6 * p["bytes"]
    r = calc.ddp_buckets(grads, p["bucket_mb"], p["first_mb"])
    without_first = calc.ddp_buckets(grads, p["bucket_mb"], p["bucket_mb"])["buckets"]
    in_mb = calc.ddp_buckets(grads * 2**20 / 1e6, p["bucket_mb"], p["first_mb"])["buckets"]  # MB read as MiB
    rest_mib = r["grads_mib"] - p["first_mb"]
    mistakes = [
        (
            without_first,
            "That cuts every bucket at the cap. DDP's first bucket, the one whose gradients are ready first, is "
            f"only {p['first_mb']:g} MiB when the cap is left at its default, so its all-reduce starts early.",
        ),
        (
            1 + math.floor(rest_mib / p["bucket_mb"]),
            "That leaves out the last, partly filled bucket. Its gradients are all-reduced too, once backward "
            "reaches the first layers.",
        ),
        (
            calc.ddp_buckets(p["params"] * 1e6, p["bucket_mb"], p["first_mb"])["buckets"],
            f"That counts one byte per parameter. Each gradient takes {p['bytes']:g} bytes: "
            f"{r['grads_mib']:.1f} MiB in all.",
        ),
    ]
    slips = []
    if in_mb != r["buckets"]:
        slips.append((in_mb, "bucket_cap_mb is in MiB (2²⁰ bytes), not MB: 25 MiB is 26.2 MB."))
    return {
        "answer": r["buckets"],
        "grads_mib": r["grads_mib"],
        "last_mib": r["last_mib"],
        "mistakes": mistakes,
        "slips": slips,
    }


def _prefetch(p):
    r = calc.layer_prefetch(int(p["layers"]), p["gather"], p["compute"])
    mistakes = [
        (r["serial"], "That waits for every unit's gather before its compute: no prefetch at all."),
        (
            int(p["layers"]) * p["compute"],
            "That hides every gather. The first unit's gather has nothing to hide under, and a gather longer than "
            "the compute it runs under shows for the difference.",
        ),
        (
            r["prefetched"] - p["compute"],
            "That stops at the last gather. The last unit still computes after its weights arrive, with no gather "
            "left to hide under it.",
        ),
    ]
    return {"answer": r["prefetched"], "exposed": r["exposed"], "serial": r["serial"], "mistakes": mistakes}


def _async_tp(p):
    r = calc.async_tp(p["gemm"], p["comm"], int(p["degree"]))
    degree = int(p["degree"])
    mistakes = [
        (r["serial"], "That runs the whole all-gather before the matmul: the synchronous TP layer async TP replaces."),
        (
            max(p["gemm"], p["comm"]),
            "That overlaps everything. The local shard's piece has no copy to hide, and each remote piece can start "
            "only when its shard has landed.",
        ),
        (
            r["overlapped"] - r["piece"],
            f"That leaves out the local piece. The rank computes on its own shard first ({r['piece']:.3g} ms), then "
            f"the {degree - 1} remote pieces one by one as their copies land.",
        ),
    ]
    return {
        "answer": r["overlapped"],
        "piece": r["piece"],
        "copy": r["copy"],
        "serial": r["serial"],
        "mistakes": mistakes,
    }


RECIPE_WORDS = {
    "mxfp8": "MXFP8: E4M3 elements, one 8-bit E8M0 scale per 32 consecutive elements",
    "nvfp4": "NVFP4: 4-bit E2M1 elements, one E4M3 scale per 16 elements (leave out the single FP32 tensor scale)",
    "deepseek-activation": "DeepSeek-V3 activations: E4M3 elements, one FP32 scale per 1×128 tile",
    "deepseek-weight": "DeepSeek-V3 weights: E4M3 elements, one FP32 scale per 128×128 block",
}


def _bits(p):
    copies = int(p["copies"])
    r = calc.recipe_bits(p["recipe"], copies=copies)
    mistakes = [
        (
            copies * r["element_bits"],
            "That leaves out the scales. Each block stores one, so every element carries scale bits ÷ block size.",
        ),
        (
            copies * (r["element_bits"] + r["scale_bits"]),
            f"That gives every element a whole {r['scale_bits']}-bit scale. One scale serves a block of "
            f"{r['block']}: each element carries {r['scale_bits']} ÷ {r['block']} bits of it.",
        ),
    ]
    if copies > 1:
        mistakes.append((r["bits"], "That counts one copy. The question keeps a rowwise and a columnwise copy."))
    return {
        "answer": r["total_bits"],
        "described": RECIPE_WORDS[p["recipe"]],
        "scale_share": r["scale_bits_per_element"],
        "element_bits": r["element_bits"],
        "block": r["block"],
        "scale_bits": r["scale_bits"],
        "bits": r["bits"],
        "vs_bf16": r["vs_bf16"],
        "mistakes": mistakes,
    }


FABRIC = {"gpus_per_node": 8, "nic": 50, "nvlink": 450}

FAMILIES: list[Generator] = [
    Generator(
        "rail_all_gather",
        {"size": 8, "nodes": 4, **FABRIC},
        "ms",
        "An all-gather of {{size}} GB over {{nodes}} nodes of {{gpus_per_node}} GPUs, one {{nic}} GB/s NIC per GPU: "
        "milliseconds on the network, from the node's egress?",
        "NCCL's flat ring over all {{gpus}} GPUs sends (N−1)/N of the array out of each node: {{node_out_gb|.4g}} GB "
        "crosses its {{egress_gbs|.0f}} GB/s of egress in {{answer|.3g}} ms. NVLink inside the node needs "
        "{{nvlink_ms|.3g}} ms for its hops at the same time, so {{bound}} sets the pace. A hierarchical algorithm "
        "would send only the (k−1)/k a node lacks, {{hier_gb|.3g}} GB in {{hier_ms|.3g}} ms.",
        _rail_all_gather,
    ),
    Generator(
        "cross_node_all_to_all",
        {"size": 1, "nodes": 4, **FABRIC},
        "ms",
        "An all-to-all: each GPU sends {{size}} GB spread evenly over {{nodes}} nodes of {{gpus_per_node}} GPUs, "
        "one {{nic}} GB/s NIC per GPU. Milliseconds on the network?",
        "{{off_node_share|%}} of each GPU's bytes go to other nodes: {{off_node_gb|.3g}} GB through its own "
        "{{nic}} GB/s NIC, {{answer|.3g}} ms.",
        _all_to_all,
    ),
    Generator(
        "ddp_bucket_count",
        {"params": 125, "bytes": 2, "bucket_mb": 25, "first_mb": 1},
        "",
        "DDP with its default buckets, {{params}} million small parameters with {{bytes}}-byte gradients: how many "
        "buckets?",
        "{{grads_mib|.1f}} MiB of gradients: a first bucket of {{first_mb}} MiB, then buckets of {{bucket_mb}} MiB, "
        "the last holding {{last_mib|.1f}} MiB: {{answer}} buckets, each all-reduced as soon as it fills (DDP closes "
        "a bucket once it reaches the cap, so large parameters make fewer, larger ones).",
        _ddp_buckets,
    ),
    Generator(
        "fsdp_prefetch",
        {"layers": 32, "gather": 3, "compute": 2},
        "ms",
        "{{layers}} FSDP units, each all-gathering for {{gather}} ms and computing for {{compute}} ms, the next "
        "unit's gather prefetched: forward time?",
        "First gather {{gather}} ms, then each later unit costs max(gather, compute), then the last compute: "
        "{{answer|.4g}} ms against {{serial|.4g}} ms without prefetch; {{exposed|.4g}} ms of gathers stay exposed.",
        _prefetch,
    ),
    Generator(
        "async_tp",
        {"gemm": 8, "comm": 6, "degree": 4},
        "ms",
        "A {{degree}}-way TP all-gather of {{comm}} ms before a {{gemm}} ms matmul, decomposed as async TP does: "
        "time of the pair?",
        "Pieces of {{piece|.3g}} ms, copies of {{copy|.3g}} ms: the local piece, then {{degree}} − 1 steps of "
        "max(piece, copy) = {{answer|.3g}} ms against {{serial|.3g}} ms in series.",
        _async_tp,
    ),
    Generator(
        "scaled_bits",
        {"recipe": "mxfp8", "copies": 1},
        "",
        "{{described}}; {{copies}} quantized copies kept (2: rowwise and columnwise). Bits per element, scales "
        "included?",
        "{{element_bits}} bits + {{scale_bits}} ÷ {{block}} = {{bits|.4g}} bits per copy; {{copies}} copies take "
        "{{answer|.4g}} bits, {{vs_bf16|.3g}}× BF16's 16.",
        _bits,
    ),
]
