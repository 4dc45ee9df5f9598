"""The network a node sits on: its NVLink domain, one NIC per GPU (a rail each), and what prices which collective.

An HGX H100 node joins its 8 GPUs through NVSwitch at 900 GB/s per GPU counted both ways (450 GB/s each way),
and gives each GPU its own 400 Gb/s (50 GB/s) NIC on its own rail of the scale-out fabric. NCCL runs one ring
per rail, so a ring collective across nodes crosses the network on all of a node's NICs at once (bytes ÷ node
egress: `network_collective` in parallel.py), while an all-to-all sends each GPU's own bytes through its own
NIC, which no other NIC can carry for it: `cross_node_all_to_all` here.
"""

from __future__ import annotations

from labs.api import comm

from ._base import positive, whole


def node_fabric(gpus_per_node: int = 8, nvlink_bidirectional_gbs: float = 900, nic_gbs: float = 50) -> dict:
    """A node's two bandwidths in the units the lesson quotes: NVLink per GPU (both ways, each way), NIC per GPU,
    and node egress (NICs × per-NIC), with how many times faster NVLink is than the way out of the node. The
    datasheet figures are inputs in GB/s, so a lesson may type them; what follows from them is computed."""
    per_node = whole("gpus_per_node", gpus_per_node)
    bidir = positive("nvlink_bidirectional_gbs", nvlink_bidirectional_gbs) * 1e9
    nic = positive("nic_gbs", nic_gbs) * 1e9
    each_way = bidir / 2
    return {
        "gpus": per_node,
        "nvlink_bidir_gbs": bidir / 1e9,
        "nvlink_gbs": each_way / 1e9,
        "nic_gbs": nic / 1e9,
        "nic_gbit": 8 * nic / 1e9,
        "egress_gbs": comm.node_egress_bandwidth(per_node, nic) / 1e9,
        "nvlink_over_nic": each_way / nic,
        "nvlink_over_egress": each_way / comm.node_egress_bandwidth(per_node, nic),
    }


def cross_node_all_to_all(
    size: float,
    nodes: int,
    gpus_per_node: int = 8,
    nic_bandwidth: float = 50e9,
    nvlink_bandwidth: float = 450e9,
) -> dict:
    """Seconds for an all-to-all in which every GPU sends `size` bytes spread evenly over all GPUs (itself included).

    Of each GPU's bytes, (N − g)/N go to other nodes, through its own NIC; (g − 1)/N go over NVLink to the other
    GPUs of its node. Every GPU of the node sends its own share at the same time, so the node's egress is no
    help: the NIC per GPU bounds the time. `egress_ms` is the mistaken price, one GPU's off-node bytes through
    the whole node's egress.
    """
    size = positive("size", size)
    nodes = whole("nodes", nodes, least=2)
    per_node = whole("gpus_per_node", gpus_per_node)
    nic, nvlink = positive("nic_bandwidth", nic_bandwidth), positive("nvlink_bandwidth", nvlink_bandwidth)
    off_node, in_node = comm.all_to_all_split(size, nodes, per_node)
    network_s, nvlink_s = off_node / nic, in_node / nvlink
    seconds = max(network_s, nvlink_s)
    return {
        "off_node_gb": off_node / 1e9,
        "off_node_share": comm.all_to_all_split(1.0, nodes, per_node)[0],
        "in_node_gb": in_node / 1e9,
        "network_ms": 1e3 * network_s,
        "nvlink_ms": 1e3 * nvlink_s,
        "seconds": seconds,
        "ms": 1e3 * seconds,
        "egress_ms": 1e3 * off_node / comm.node_egress_bandwidth(per_node, nic),
    }
