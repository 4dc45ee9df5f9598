"""The collectives lab's α-β fit and its predicted node egress (torch-free); the model is labs/parallel/comm.py.

A ring collective over N ranks takes `hops` steps, each paying a latency α, and pushes `bus_factor x S` bytes
through each rank's link of bandwidth B (comm.alpha_beta):

    t(S) = hops x α + bus_factor x S / B            (β = 1/B, seconds per byte)

so busbw = bus_factor x S / t is the B this model would need, comparable across N (nccl-tests'
doc/PERFORMANCE.md). A straight line t = a + b S fitted to the measured (S, t) gives α = a / hops and
B = bus_factor / b, hops being the algorithm's that ran (a tree all-reduce's 2 ceil(log2 N), not a ring's). The fit weights each point by 1/t (it minimises relative error) so the small, latency-bound
messages count as much as the large ones; an unweighted fit would let the largest size set α too.
"""

from __future__ import annotations

import math

from labs.parallel import comm


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


def fit(collective: str, n: int, sizes: list[int], times_s: list[float], algorithm: str | None = "ring") -> dict:
    """The α-β fit of one collective's sweep: α, β, B and each point's residual.

    `algorithm` ("ring" or "tree") says whose hops the intercept is divided by (comm.hops: 2(N-1) for a ring
    all-reduce, 2 ceil(log2 N) for a tree's); None, where NCCL chose the algorithm call by call, leaves α the whole
    intercept, a cost per collective (`steps` None)."""
    a, b = fit_line([float(s) for s in sizes], times_s)
    f = comm.bus_factor(collective, n)
    # One rank has no hops, and α is then the whole intercept.
    st = None if algorithm is None else max(1, comm.hops(collective, n, algorithm))
    pred = [a + b * s for s in sizes]
    rel = [(t - p) / t for t, p in zip(times_s, pred)]
    bandwidth = f / b if b > 0 else None  # bytes/s; a flat or falling line has no bandwidth term
    return {
        "intercept_ms": 1e3 * a,
        "slope_ms_per_mib": 1e3 * b * 2**20,
        "steps": st,
        "busbw_factor": f,
        "alpha_us": 1e6 * a / (st or 1),
        "beta_ns_per_byte": 1e9 / bandwidth if bandwidth else None,
        "bandwidth_gbs": bandwidth / 1e9 if bandwidth else None,
        "predicted_ms": [1e3 * p for p in pred],
        "residuals": rel,
        "rms_residual": math.sqrt(sum(r * r for r in rel) / len(rel)),
        "max_abs_residual": max(abs(r) for r in rel),
    }


def predicted_egress(nbytes: float, ranks: int, nodes: int, nic_bytes_per_s: float | None) -> dict:
    """What one node sends per all-reduce of `nbytes`, flat ring against hierarchical, and how long that takes
    through the emulated node's one rate-limited link (None where no link limit applies)."""
    flat = comm.node_egress_bytes(nbytes, "all-reduce", ranks=ranks, nodes=nodes, algorithm="flat-ring")
    hier = comm.node_egress_bytes(nbytes, "all-reduce", ranks=ranks, nodes=nodes, algorithm="hierarchical")

    def ms(egress: float) -> float | None:
        return 1e3 * comm.egress_seconds(egress, 1, nic_bytes_per_s) if nic_bytes_per_s else None

    return {
        "predicted_flat_bytes": flat,
        "predicted_hierarchical_bytes": hier,
        "nics_per_node": 1,
        "nic_bytes_per_s": nic_bytes_per_s,
        "predicted_flat_ms": ms(flat),
        "predicted_hierarchical_ms": ms(hier),
    }
