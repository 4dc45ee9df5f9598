"""The communication model on its own: nccl-tests' bus factors, ring and tree hops, the α-β line, the two
cross-node cases and the all-to-all split, each against the formula its docstring cites."""

from fractions import Fraction

import pytest

from labs.parallel import comm

RANKS = [1, 2, 3, 4, 5, 7, 8, 12, 16, 64, 1000]
SIZES = [1.0, 3e6, 2.0**30, 7.3e9]


@pytest.mark.parametrize("n", RANKS)
def test_bus_factors_are_nccl_tests_corrections(n):
    # nccl-tests doc/PERFORMANCE.md, "Summary": the factor from algorithm bandwidth to bus bandwidth.
    assert comm.bus_factor("all-reduce", n) == 2 * (n - 1) / n
    for name in ("reduce-scatter", "all-gather", "all-to-all"):
        assert comm.bus_factor(name, n) == (n - 1) / n
    assert comm.bus_factor("broadcast", n) == comm.bus_factor("reduce", n) == 1
    assert comm.bus_ratio("all-reduce", n) == Fraction(2 * (n - 1), n)


def test_an_all_reduce_is_a_reduce_scatter_then_an_all_gather():
    for n in RANKS:
        for s in SIZES:
            assert comm.bus_bytes("all-reduce", n, s) == pytest.approx(
                comm.bus_bytes("reduce-scatter", n, s) + comm.bus_bytes("all-gather", n, s), rel=1e-15
            )


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 13])
def test_whole_bytes_round_down_exactly(n):
    for nbytes in (0, 1, 4095, 4096, 3 * 2**20 + 7, 2**40 + 1):
        assert comm.whole_bus_bytes("all-to-all", n, nbytes) == nbytes * (n - 1) // n
        assert comm.whole_bus_bytes("all-reduce", n, nbytes) == nbytes * 2 * (n - 1) // n


def test_ring_and_tree_hops():
    assert [comm.hops("all-reduce", n) for n in (1, 2, 8)] == [0, 2, 14]
    assert [comm.hops(c, 8) for c in ("reduce-scatter", "all-gather", "all-to-all", "broadcast")] == [7] * 4
    # A tree reduces up and broadcasts down: 2 ceil(log2 N), far fewer than the ring's 2(N-1) at scale.
    assert [comm.hops("all-reduce", n, "tree") for n in (1, 2, 3, 8, 9, 1024)] == [0, 2, 4, 6, 8, 20]
    with pytest.raises(ValueError, match="no tree algorithm; tree runs all-reduce"):
        comm.hops("all-gather", 8, "tree")
    with pytest.raises(ValueError, match="algorithm: 'mesh', expected one of ring, tree"):
        comm.hops("all-reduce", 8, "mesh")


def test_alpha_beta_per_hop_and_per_collective():
    n, s, alpha, bw = 8, 2.0**30, 5e-6, 450e9
    t = comm.alpha_beta("all-reduce", n, s, alpha_s=alpha, bandwidth=bw)
    assert t.latency_s == 14 * alpha
    assert t.transfer_s == 2 * 7 / 8 * s / bw
    assert t.seconds == t.latency_s + t.transfer_s
    once = comm.alpha_beta("all-reduce", n, s, alpha_s=alpha, bandwidth=bw, alpha_per="collective")
    assert once.latency_s == alpha and once.transfer_s == t.transfer_s
    tree = comm.alpha_beta("all-reduce", 1024, s, alpha_s=alpha, bandwidth=bw, algorithm="tree")
    ring = comm.alpha_beta("all-reduce", 1024, s, alpha_s=alpha, bandwidth=bw)
    assert tree.transfer_s == ring.transfer_s and tree.latency_s == 20 * alpha < ring.latency_s
    # One rank runs no collective: nothing to pay, whichever way α is counted.
    for per in ("hop", "collective"):
        assert comm.alpha_beta("all-reduce", 1, s, alpha_s=alpha, bandwidth=bw, alpha_per=per).seconds == 0.0
    with pytest.raises(ValueError, match="alpha_per"):
        comm.alpha_beta("all-reduce", 2, s, alpha_s=alpha, bandwidth=bw, alpha_per="step")  # type: ignore[arg-type]


@pytest.mark.parametrize("gpus_per_node", [1, 4, 8])
@pytest.mark.parametrize("nodes", [1, 2, 4, 64])
def test_flat_ring_against_hierarchical_node_egress(nodes, gpus_per_node):
    ranks, s = nodes * gpus_per_node, 2.0**30
    for c in comm.RING_COLLECTIVES:
        flat = comm.node_egress_bytes(s, c, ranks=ranks, nodes=nodes, algorithm="flat-ring")
        hier = comm.node_egress_bytes(s, c, ranks=ranks, nodes=nodes, algorithm="hierarchical")
        assert flat == comm.flat_ring_node_egress(s, c, ranks, nodes)
        assert hier == comm.hierarchical_node_egress(s, c, nodes)
        if nodes == 1:
            assert flat == hier == 0.0
            continue
        assert flat == comm.bus_factor(c, ranks) * s  # every rank's bytes, on the ring's one hop out
        assert hier == comm.bus_factor(c, nodes) * s  # (k-1)/k per phase, whatever the GPUs per node
        assert hier <= flat
        assert (hier == flat) == (gpus_per_node == 1)


def test_node_egress_refuses_what_it_does_not_model():
    with pytest.raises(ValueError, match="all-to-all.*each GPU's NIC: all_to_all_split"):
        comm.node_egress_bytes(1.0, "all-to-all", ranks=16, nodes=2, algorithm="flat-ring")
    with pytest.raises(ValueError, match="algorithm: 'tree', expected one of flat-ring, hierarchical"):
        comm.node_egress_bytes(1.0, "all-reduce", ranks=16, nodes=2, algorithm="tree")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="collective: 'gather', expected one of all-reduce"):
        comm.bus_factor("gather", 4)
    with pytest.raises(ValueError, match="ranks: 0, expected a whole number >= 1"):
        comm.bus_factor("all-reduce", 0)


def test_egress_is_every_nic_at_once():
    assert comm.node_egress_bandwidth(8, 50e9) == 400e9  # 8 NICs of 400 Gbit/s
    assert comm.egress_seconds(8e9, 8, 50e9) == pytest.approx(0.02)


@pytest.mark.parametrize("nodes,g", [(1, 8), (2, 8), (4, 8), (16, 4)])
def test_all_to_all_split_sends_what_the_bus_factor_says(nodes, g):
    off, on = comm.all_to_all_split(2.0**30, nodes, g)
    n = nodes * g
    assert off + on == pytest.approx(comm.bus_bytes("all-to-all", n, 2.0**30), rel=1e-15)
    assert off == 2.0**30 * (n - g) / n and on == 2.0**30 * (g - 1) / n
    assert (off == 0) == (nodes == 1)
