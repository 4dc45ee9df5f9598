"""PREDICTED times for a tensor-parallel MLP block on a named GPU node: roofline GEMMs + alpha-beta collectives.

Nothing here is measured. Every number it returns is a prediction and the labs label it so.

GEMM (roofline):   t = max(2·m·n·k / (peak · GEMM_EFFICIENCY),  bytes moved / HBM bandwidth)
collective (alpha-beta, ring over NVLink, labs/parallel/comm.py with one alpha per collective):
    all-reduce     t = alpha + 2·(p-1)/p · bytes / link bandwidth

The block is the one the lab runs: column-parallel fc1 (hidden -> ffn/p), gelu, row-parallel fc2
(ffn/p -> hidden), one all-reduce of (tokens, hidden) forward and one backward. Like the lab's code,
the collectives are synchronous, so the predicted exposed communication is all of it. (Megatron can
hide the backward all-reduce behind fc1's weight-gradient GEMM; `hideable_ms` says how much.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from labs.parallel import comm

# Large GEMMs reach roughly this fraction of the datasheet dense peak; small ones fall to the
# memory roofline on their own, so one constant covers the regime this block lives in.
GEMM_EFFICIENCY = 0.7
# Activations cross NVLink in bf16 in both the bf16 and the fp8 recipes (FP8 applies to GEMM inputs).
COMM_BYTES_PER_ELEMENT = 2


@dataclass(frozen=True)
class Node:
    name: str
    gpus: int
    peak_bf16_flops: float  # dense, per GPU
    peak_fp8_flops: float  # dense, per GPU
    hbm_bytes_per_s: float
    link_bytes_per_s: float  # NVLink, per GPU, one direction
    collective_latency_s: float  # per collective: launch + synchronisation, the alpha term
    source: str

    def describe(self) -> dict:
        return asdict(self)


NODES = {
    "H100-SXM": Node(
        name="8x H100 SXM, NVLink 4 + NVSwitch",
        gpus=8,
        peak_bf16_flops=989e12,
        peak_fp8_flops=1979e12,
        hbm_bytes_per_s=3.35e12,
        link_bytes_per_s=450e9,
        collective_latency_s=10e-6,
        source="NVIDIA H100 SXM datasheet (dense tensor-core peaks, HBM3); NVLink 900 GB/s total = 450 GB/s each way; ~10 us per collective launch",
    ),
    "H200": Node(
        name="8x H200 SXM, NVLink 4 + NVSwitch",
        gpus=8,
        peak_bf16_flops=989e12,
        peak_fp8_flops=1979e12,
        hbm_bytes_per_s=4.8e12,
        link_bytes_per_s=450e9,
        collective_latency_s=10e-6,
        source="NVIDIA H200 datasheet (same Hopper tensor cores as H100, HBM3e 4.8 TB/s); NVLink 450 GB/s each way; ~10 us per collective launch",
    ),
}


def gemm_s(m: int, n: int, k: int, node: Node, precision: str) -> float:
    """(m, k) @ (k, n): compute- or memory-bound, whichever is slower."""
    fp8 = precision == "fp8"
    peak = node.peak_fp8_flops if fp8 else node.peak_bf16_flops
    in_bytes = 1 if fp8 else 2
    flops = 2.0 * m * n * k
    bytes_moved = (m * k + k * n) * in_bytes + m * n * 2  # inputs in, bf16 output out
    return max(flops / (peak * GEMM_EFFICIENCY), bytes_moved / node.hbm_bytes_per_s)


def all_reduce_s(nbytes: float, p: int, node: Node) -> float:
    return comm.alpha_beta(
        "all-reduce",
        p,
        nbytes,
        alpha_s=node.collective_latency_s,
        bandwidth=node.link_bytes_per_s,
        alpha_per="collective",
    ).seconds


def predict_mlp(tokens: int, hidden: int, ffn: int, degree: int, node: Node, precision: str = "bf16") -> dict:
    """Per-rank predicted times (ms) of one forward+backward of the TP MLP block at `degree`."""
    f = ffn // degree
    # forward: fc1 (T,H)x(H,f), fc2 (T,f)x(f,H); backward: dX and dW for each.
    gemms = {
        "fc1 fwd": gemm_s(tokens, f, hidden, node, precision),
        "fc2 fwd": gemm_s(tokens, hidden, f, node, precision),
        "fc2 dX": gemm_s(tokens, f, hidden, node, precision),
        "fc2 dW": gemm_s(hidden, f, tokens, node, precision),
        "fc1 dX": gemm_s(tokens, hidden, f, node, precision),
        "fc1 dW": gemm_s(f, hidden, tokens, node, precision),
    }
    # gelu forward + backward is elementwise: read and write (T, f) a few times, memory-bound.
    elementwise = 4 * tokens * f * 2 / node.hbm_bytes_per_s
    ar_bytes = tokens * hidden * COMM_BYTES_PER_ELEMENT
    comm = 2 * all_reduce_s(ar_bytes, degree, node)  # fwd output + bwd input gradient
    gemm = sum(gemms.values())
    return {
        "degree": degree,
        "local_gemm_ms": gemm * 1e3,
        "elementwise_ms": elementwise * 1e3,
        "collective_ms": comm * 1e3,
        "collective_bytes": 2 * ar_bytes if degree > 1 else 0,
        "exposed_comm_ms": comm * 1e3,
        "step_ms": (gemm + elementwise + comm) * 1e3,
        "hideable_ms": min(comm / 2, gemms["fc1 dW"]) * 1e3,
        "comm_fraction": comm / (gemm + elementwise + comm),
    }


def predict_sweep(tokens: int, hidden: int, ffn: int, degrees: list[int], node_key: str, precision: str) -> dict:
    """Predictions for every degree plus where over-sharding begins (labs.tp_sweep.result.Prediction)."""
    node = NODES[node_key]
    rows = [predict_mlp(tokens, hidden, ffn, d, node, precision) for d in sorted(set(degrees))]
    # Over-sharding: the first degree whose step is no faster than the previous degree's, or whose
    # communication outweighs its own GEMMs; past it, more ranks buy less than they cost.
    slower_from = next((b["degree"] for a, b in zip(rows, rows[1:]) if b["step_ms"] >= a["step_ms"]), None)
    comm_from = next((r["degree"] for r in rows if r["degree"] > 1 and r["collective_ms"] >= r["local_gemm_ms"]), None)
    candidates = [d for d in (slower_from, comm_from) if d is not None]
    best = min(rows, key=lambda r: r["step_ms"])
    return {
        "label": "predicted",
        "node": node_key,
        "node_spec": node.describe(),
        "precision": precision,
        "shape": {"tokens": tokens, "hidden": hidden, "ffn": ffn},
        "gemm_efficiency": GEMM_EFFICIENCY,
        "per_degree": rows,
        "best_degree": best["degree"],
        "oversharding_from": min(candidates) if candidates else None,
        "step_stops_improving_from": slower_from,
        "comm_exceeds_gemm_from": comm_from,
    }
