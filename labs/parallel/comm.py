"""The communication model the lessons' calculators and the labs' predictions share (torch-free).

    bus_factor("all-reduce", 8)                                   # 1.75: bytes per rank's link per byte of S
    alpha_beta("all-reduce", 8, 2**30, alpha_s=5e-6, bandwidth=450e9).seconds
    node_egress_bytes(2**30, "all-gather", ranks=32, nodes=4, algorithm="hierarchical")
    egress_seconds(nbytes, nics_per_node=8, nic_bytes_per_s=50e9)
    all_to_all_split(2**30, nodes=4, gpus_per_node=8)             # (off-node bytes, in-node bytes) per GPU

Every number here is for one collective over `ranks` ranks on an array of S bytes, S being the whole array
(nccl-tests' convention: for an all-gather the gathered output, for a reduce-scatter its input).

Inside a node (NVLink, one link per GPU of bandwidth B):
    t = hops x α + bus_factor x S / B
The bus factor is nccl-tests' correction from algorithm to bus bandwidth (NVIDIA/nccl-tests doc/PERFORMANCE.md):
the bytes that must cross each rank's link per byte of S, 2(N-1)/N for an all-reduce (a reduce-scatter, then an
all-gather), (N-1)/N for a reduce-scatter, all-gather or all-to-all, 1 for a broadcast or reduce, whose root
sends or receives all of S. PERFORMANCE.md defines it "independent of the algorithm used (ring, tree, or
other)", so a tree pays the same bandwidth term as a ring. What the algorithm changes is the hops that each pay
α: a ring takes N-1 steps per phase, a tree about log2 N (How to Scale Your Model, "How to Think About GPUs",
intra-node collectives: "log(N) hops instead of N - 1, although the total cost is still the same"; NCCL's
double binary trees, NVIDIA's "Massively Scale Your Deep Learning Training with NCCL 2.4", reduce up one tree
and broadcast down it: 2 log2 N for an all-reduce).

Across nodes (How to Scale Your Model, "How to Think About GPUs", cross-node collectives): NCCL runs one ring
per rail, one per NIC index, so all of a node's NICs carry a ring collective at once, and the time is the bytes
that leave a node over its egress, NICs x per-NIC bandwidth, or the NVLink hops inside the node if those are
slower. How many bytes leave a node depends on the algorithm, and a number must say which it assumes:
    flat ring over all N ranks, a node's ranks adjacent    bus_factor(N) x S    flat_ring_node_egress
    hierarchical: in-node reduce-scatter, then one ring     bus_factor(k) x S    hierarchical_node_egress
      per rail across the k nodes, then in-node all-gather
      (HSDP's replica all-reduce is this cross-node ring)
An all-to-all is not hierarchical: each GPU's off-node bytes leave through its own NIC, which no other NIC can
carry for it, so the per-GPU NIC, not the node's egress, bounds it (`all_to_all_split`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

CrossNode = Literal["flat-ring", "hierarchical"]

# Bytes through each rank's link per byte of S, exactly (nccl-tests doc/PERFORMANCE.md, "Summary").
_RATIO = {
    "all-reduce": lambda n: Fraction(2 * (n - 1), n),
    "reduce-scatter": lambda n: Fraction(n - 1, n),
    "all-gather": lambda n: Fraction(n - 1, n),
    "all-to-all": lambda n: Fraction(n - 1, n),
    "broadcast": lambda n: Fraction(1),
    "reduce": lambda n: Fraction(1),
}
COLLECTIVES: tuple[str, ...] = tuple(_RATIO)
# The collectives a ring per rail carries across nodes; an all-to-all is priced by all_to_all_split instead.
RING_COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather")
# Ring hops: one phase of N-1 steps, two for an all-reduce; a chain broadcast or reduce also takes N-1.
_RING_HOPS = {c: (lambda n: 2 * (n - 1)) if c == "all-reduce" else (lambda n: n - 1) for c in COLLECTIVES}
# NCCL's tree algorithm is an all-reduce only.
_TREE_HOPS = {"all-reduce": lambda n: 2 * (n - 1).bit_length()}  # (n - 1).bit_length() = ceil(log2 n)
ALGORITHMS = ("ring", "tree")
CROSS_NODE = ("flat-ring", "hierarchical")


def _ranks(name: str, n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{name}: {n!r}, expected a whole number >= 1")
    return n


def bus_ratio(collective: str, ranks: int) -> Fraction:
    """The bus factor as an exact fraction, for byte counts that must stay whole and derivations in which it
    cancels: 2(N-1)/N for an all-reduce, (N-1)/N for a reduce-scatter, all-gather or all-to-all, 1 for a
    broadcast or reduce (nccl-tests doc/PERFORMANCE.md)."""
    n = _ranks("ranks", ranks)
    try:
        return _RATIO[collective](n)
    except KeyError:
        raise ValueError(f"collective: {collective!r}, expected one of {', '.join(COLLECTIVES)}") from None


def bus_factor(collective: str, ranks: int) -> float:
    """Bytes each rank's link carries per byte of S: bus bandwidth = bus_factor x S / t (nccl-tests)."""
    return float(bus_ratio(collective, ranks))


def bus_bytes(collective: str, ranks: int, size: float) -> float:
    """Bytes through each rank's link for one collective on S = `size` bytes. For data parallelism's gradient
    all-reduce this is the 2(N-1)/N x Ψ whose limit the ZeRO paper (Rajbhandari et al. 2020, section 7, the
    communication analysis of ZeRO-DP) counts as DP's 2Ψ."""
    return bus_factor(collective, ranks) * size


def whole_bus_bytes(collective: str, ranks: int, nbytes: int) -> int:
    """bus_bytes in whole bytes, rounded down: what a rank sends of an `nbytes` buffer it splits N ways."""
    r = bus_ratio(collective, ranks)
    return nbytes * r.numerator // r.denominator


def hops(collective: str, ranks: int, algorithm: str = "ring") -> int:
    """Steps that each pay the latency α: 2(N-1) for a ring all-reduce, N-1 for the other ring collectives,
    2 ceil(log2 N) for a tree all-reduce (up the tree, then down)."""
    n = _ranks("ranks", ranks)
    table = {"ring": _RING_HOPS, "tree": _TREE_HOPS}.get(algorithm)
    if table is None:
        raise ValueError(f"algorithm: {algorithm!r}, expected one of {', '.join(ALGORITHMS)}")
    if collective not in table:
        raise ValueError(
            f"collective: {collective!r} has no {algorithm} algorithm; {algorithm} runs {', '.join(table)}"
        )
    return table[collective](n)


@dataclass(frozen=True)
class CollectiveTime:
    """One collective's α-β time, its two terms apart."""

    latency_s: float  # hops x α
    transfer_s: float  # bus_factor x S / B

    @property
    def seconds(self) -> float:
        return self.latency_s + self.transfer_s


def alpha_beta(
    collective: str,
    ranks: int,
    size: float,
    *,
    alpha_s: float,
    bandwidth: float,
    algorithm: str = "ring",
    alpha_per: Literal["hop", "collective"] = "hop",
) -> CollectiveTime:
    """t = latency + bus_factor x S / B (β = 1/B seconds per byte, B in bytes/s per rank's link).

    `alpha_per="hop"`: α is one step's latency, paid `hops(collective, ranks, algorithm)` times, the model whose
    latency term grows with the ring. `alpha_per="collective"`: α is a whole collective's fixed cost (launch and
    synchronisation), paid once, nothing when one rank runs no collective. nccl-tests' "time is roughly equal
    to overhead + size / bw" is the same line either way (doc/PERFORMANCE.md, "Time").
    """
    if alpha_per == "hop":
        latency = hops(collective, ranks, algorithm) * alpha_s
    elif alpha_per == "collective":
        latency = alpha_s if _ranks("ranks", ranks) > 1 else 0.0
    else:
        raise ValueError(f"alpha_per: {alpha_per!r}, expected hop or collective")
    return CollectiveTime(latency, bus_bytes(collective, ranks, size) / bandwidth)


def _ring_collective(collective: str) -> str:
    if collective not in RING_COLLECTIVES:
        raise ValueError(
            f"collective: {collective!r} has no node-egress rule; one ring per rail carries "
            f"{', '.join(RING_COLLECTIVES)} (an all-to-all is bounded by each GPU's NIC: all_to_all_split)"
        )
    return collective


def flat_ring_node_egress(size: float, collective: str, ranks: int, nodes: int) -> float:
    """Bytes one node sends out per collective when ONE FLAT RING runs over all N = `ranks` ranks with each
    node's ranks adjacent: only the ring's hop leaving the node crosses the network, carrying what every rank
    sends, bus_factor(N) x S: 2(N-1)/N x S for an all-reduce. No bytes leave a single node."""
    _ranks("nodes", nodes)
    return bus_bytes(_ring_collective(collective), _ranks("ranks", ranks), size) if nodes > 1 else 0.0


def hierarchical_node_egress(size: float, collective: str, nodes: int) -> float:
    """Bytes one node sends out per collective with a HIERARCHICAL algorithm: the collective runs inside the
    node, then each of the node's g ranks takes its 1/g shard through a ring across the k = `nodes` nodes in its
    rail, bus_factor(k) x S/g each: bus_factor(k) x S per node, whatever g is (2(k-1)/k x S for an all-reduce).
    HSDP's all-reduce of the gradient shards across replicas sends exactly this."""
    return bus_bytes(_ring_collective(collective), _ranks("nodes", nodes), size)


def node_egress_bytes(size: float, collective: str, *, ranks: int, nodes: int, algorithm: CrossNode) -> float:
    """Bytes one node sends out per collective under the named cross-node `algorithm`: "flat-ring"
    (flat_ring_node_egress) or "hierarchical" (hierarchical_node_egress). `ranks` is every rank of the
    collective, all nodes together."""
    if algorithm == "flat-ring":
        return flat_ring_node_egress(size, collective, ranks, nodes)
    if algorithm == "hierarchical":
        return hierarchical_node_egress(size, collective, nodes)
    raise ValueError(f"algorithm: {algorithm!r}, expected one of {', '.join(CROSS_NODE)}")


def node_egress_bandwidth(nics_per_node: int, nic_bytes_per_s: float) -> float:
    """A node's way out: every NIC at once, one ring per rail (bytes/s)."""
    return nics_per_node * nic_bytes_per_s


def egress_seconds(egress_bytes: float, nics_per_node: int, nic_bytes_per_s: float) -> float:
    """Seconds for the bytes a node must send, over the bandwidth of all its NICs."""
    return egress_bytes / node_egress_bandwidth(nics_per_node, nic_bytes_per_s)


def all_to_all_split(size: float, nodes: int, gpus_per_node: int) -> tuple[float, float]:
    """(off-node, in-node) bytes of one GPU's all-to-all of `size` bytes spread evenly over all N = nodes x g GPUs
    (itself included): (N-g)/N of them to other nodes, through its own NIC; (g-1)/N over NVLink. Every GPU
    sends its own share at once, so the node's egress is no help: time = max(off-node / NIC, in-node / NVLink)."""
    g = _ranks("gpus_per_node", gpus_per_node)
    gpus = _ranks("nodes", nodes) * g
    return size * (gpus - g) / gpus, size * (g - 1) / gpus
