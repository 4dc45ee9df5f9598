"""The α-β model of a collective and its least-squares fit (torch-free).

The course's model (app/content/calc/parallel.py, `ring_time` and `collective_time`): a ring collective over
N ranks takes `steps` hops, each paying a latency α, and pushes `factor x S` bytes through each rank's link
of bandwidth B:

    t(S) = steps x α + factor x S / B            (β = 1/B, seconds per byte)

`factor` is nccl-tests' bus-bandwidth correction (NVIDIA/nccl-tests doc/PERFORMANCE.md, commit 03a204a1):
2(N-1)/N for all-reduce, (N-1)/N for reduce-scatter, all-gather and all-to-all, 1 for broadcast; so
busbw = factor x S / t is the B this model would need, comparable across N. `steps` is the ring's hop count:
2(N-1) for all-reduce, N-1 for the others (a chain broadcast also takes N-1 hops).

A straight line t = a + b S fitted to the measured (S, t) gives α = a / steps and B = factor / b. The fit
weights each point by 1/t (it minimises relative error) so the small, latency-bound messages count as much as
the large ones; an unweighted fit would let the largest size set α too.
"""

from __future__ import annotations

import math

FACTOR = {
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}
STEPS = {
    "all-reduce": lambda n: 2 * (n - 1),
    "reduce-scatter": lambda n: n - 1,
    "all-gather": lambda n: n - 1,
    "all-to-all": lambda n: n - 1,
    "broadcast": lambda n: n - 1,
}


def busbw_factor(collective: str, n: int) -> float:
    if n < 1:
        raise ValueError(f"n: {n} ranks, expected >= 1")
    try:
        return FACTOR[collective](n)
    except KeyError:
        raise ValueError(f"collective: {collective!r}, expected one of {', '.join(FACTOR)}") from None


def steps(collective: str, n: int) -> int:
    if collective not in STEPS:
        raise ValueError(f"collective: {collective!r}, expected one of {', '.join(STEPS)}")
    return max(1, STEPS[collective](n))


def predict_s(collective: str, n: int, size: float, alpha_s: float, bandwidth: float) -> float:
    """Seconds the model gives for one collective of `size` bytes over `n` ranks."""
    return steps(collective, n) * alpha_s + busbw_factor(collective, n) * size / bandwidth


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(a, b) minimising sum(((y - a - b x) / y)^2): least squares with weights 1/y^2."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"points: need at least 2 (x, y) pairs, got {len(xs)} x and {len(ys)} y")
    if any(y <= 0 for y in ys):
        raise ValueError("times: every measured time must be > 0")
    w = [1 / y**2 for y in ys]
    sw = sum(w)
    sx = sum(wi * x for wi, x in zip(w, xs))
    sy = sum(wi * y for wi, y in zip(w, ys))
    sxx = sum(wi * x * x for wi, x in zip(w, xs))
    sxy = sum(wi * x * y for wi, x, y in zip(w, xs, ys))
    det = sw * sxx - sx * sx
    if det <= 0:
        raise ValueError("sizes: need at least two different message sizes to fit a slope")
    b = (sw * sxy - sx * sy) / det
    a = (sy - b * sx) / sw
    return a, b


def fit(collective: str, n: int, sizes: list[int], times_s: list[float]) -> dict:
    """The α-β fit of one collective's sweep: α, β, B and each point's residual."""
    a, b = fit_line([float(s) for s in sizes], times_s)
    st, f = steps(collective, n), busbw_factor(collective, n)
    pred = [a + b * s for s in sizes]
    rel = [(t - p) / t for t, p in zip(times_s, pred)]
    bandwidth = f / b if b > 0 else None  # bytes/s; a flat or falling line has no bandwidth term
    return {
        "intercept_ms": 1e3 * a,
        "slope_ms_per_mib": 1e3 * b * 2**20,
        "steps": st,
        "busbw_factor": f,
        "alpha_us": 1e6 * a / st,
        "beta_ns_per_byte": 1e9 / bandwidth if bandwidth else None,
        "bandwidth_gbs": bandwidth / 1e9 if bandwidth else None,
        "predicted_ms": [1e3 * p for p in pred],
        "residuals": rel,
        "rms_residual": math.sqrt(sum(r * r for r in rel) / len(rel)),
        "max_abs_residual": max(abs(r) for r in rel),
    }


def ring_node_egress(size: float, ranks: int, nodes: int) -> float:
    """Bytes one node sends out per flat ring all-reduce with its ranks adjacent in the ring: only the ring's
    one hop leaving the node crosses, carrying the sender's 2(N-1)/N x S."""
    return 2 * (ranks - 1) / ranks * size if nodes > 1 else 0.0


def hierarchical_node_egress(size: float, ranks: int, nodes: int) -> float:
    """Bytes one node sends out per hierarchical all-reduce: each of its g = ranks/nodes ranks all-reduces a
    1/g shard across the nodes, 2(k-1)/k x S/g each: 2(k-1)/k x S per node, whatever g is."""
    return 2 * (nodes - 1) / nodes * size if nodes > 1 else 0.0


def egress_seconds(egress_bytes: float, nics_per_node: int, nic_bytes_per_s: float) -> float:
    """Lesson 08's node-egress physics: the bytes a node must send over the bandwidth of all its NICs."""
    return egress_bytes / (nics_per_node * nic_bytes_per_s)
