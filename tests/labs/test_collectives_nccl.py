"""Which NCCL_ALGO each GPU launch of the collectives lab sets and what each launch runs (labs/collectives/nccl.py),
and NCCL's tuning log read back, on NCCL's own log lines. Torch-free: the rules come from NCCL's sources, and a
launch that broke them would fail on the GPU with ncclInvalidUsage."""

from __future__ import annotations

import pytest

from labs.collectives import nccl

NEW, OLD = (2, 27, 3), (2, 23, 4)


def test_ring_forces_every_function_and_auto_leaves_nccl_algo_unset():
    assert nccl.nccl_algo("ring", NEW) == "Ring" == nccl.nccl_algo("ring", OLD)
    assert nccl.nccl_algo("auto", NEW) is None


def test_tree_is_forced_on_the_all_reduce_alone_where_nccl_takes_per_function_entries():
    assert nccl.nccl_algo("tree", NEW) == "allreduce:Tree"
    assert nccl.nccl_algo("tree", (2, 24, 3)) == "allreduce:Tree"
    # Before 2.24 "allreduce:Tree" would be an unknown token, enabling nothing: Tree goes on every function.
    assert nccl.nccl_algo("tree", OLD) == "Tree" and nccl.nccl_algo("tree", None) == "Tree"
    with pytest.raises(ValueError, match="algorithm: 'nvls'"):
        nccl.nccl_algo("nvls", NEW)


def test_a_tree_launch_sweeps_only_the_all_reduce_and_the_comparisons_run_where_every_collective_can():
    colls = ["all-reduce", "all-gather", "reduce-scatter"]
    auto, ring, tree = nccl.plan_launches(["auto", "ring", "tree"], colls, NEW)
    assert (auto.nccl_algo, auto.collectives, auto.comparisons) == (None, tuple(colls), True)
    assert (ring.nccl_algo, ring.collectives, ring.comparisons) == ("Ring", tuple(colls), False)
    assert (tree.nccl_algo, tree.collectives, tree.comparisons) == ("allreduce:Tree", ("all-reduce",), False)


def test_tree_alone_runs_the_comparisons_itself_on_new_nccl_and_in_one_more_unset_launch_on_old():
    (tree,) = nccl.plan_launches(["tree"], ["all-gather"], NEW)
    assert tree.comparisons and tree.nccl_algo == "allreduce:Tree"  # reduce-scatter/all-gather keep NCCL's choice
    tree_old, extra = nccl.plan_launches(["tree"], ["all-gather"], OLD)
    assert tree_old.nccl_algo == "Tree" and not tree_old.comparisons
    assert (extra.nccl_algo, extra.collectives, extra.comparisons) == (None, (), True)
    assert "before 2.24" in extra.note


def test_no_launch_ever_forces_tree_on_a_collective_that_has_none():
    # NCCL's src/graph/tuning.cc: Tree runs only the all-reduce; a forced Tree elsewhere is ncclInvalidUsage.
    for version in (NEW, OLD, None):
        for algorithms in (["auto", "ring", "tree"], ["tree"], ["ring", "tree"]):
            for launch in nccl.plan_launches(algorithms, ["all-reduce", "all-gather", "broadcast"], version):
                swept = set(launch.collectives) | (set(nccl.COMPARISON_COLLECTIVES) if launch.comparisons else set())
                if launch.nccl_algo == "Tree":
                    assert swept == {"all-reduce"}, (version, algorithms, launch)


def test_every_launch_logs_nccls_choice_to_its_own_files():
    (launch,) = nccl.plan_launches(["ring"], ["all-reduce"], NEW)
    env = nccl.launch_env(launch, "/tmp/logs")
    assert env == {
        "NCCL_ALGO": "Ring",
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "TUNING",
        "NCCL_DEBUG_FILE": "/tmp/logs/nccl-ring.%h.%p.log",
    }


# NCCL's own INFO lines (src/enqueue.cc): names from 2.25, numbers in 2.23-2.24, no function in 2.21-2.22.
LOG = """\
h100:1234:1240 [0] NCCL INFO AllReduce: 4194304 Bytes -> Algo NVLS proto Simple channel{Lo..Hi}={0..15}
h100:1234:1240 [0] NCCL INFO AllReduce: 4194304 Bytes -> Algo NVLS proto Simple channel{Lo..Hi}={0..15}
h100:1234:1240 [0] NCCL INFO AllReduce: 4194304 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..7}
h100:1234:1240 [0] NCCL INFO AllGather: 524288 Bytes -> Algo 1 proto 2 time 12.500000
h100:1234:1240 [0] NCCL INFO 4096 Bytes -> Algo 0 proto 0 time 8.000000
h100:1234:1240 [0] NCCL INFO Init COMPLETE comm 0x5 rank 0 nranks 8
"""


def test_the_tuning_log_gives_the_most_frequent_choice_per_call():
    chosen = nccl.chosen_algorithms(LOG)
    assert chosen[("AllReduce", 4194304)] == "NVLS/Simple"  # 2 of 3 calls
    assert chosen[("AllGather", 524288)] == "Ring/Simple"  # numbered algorithm and protocol, named
    assert chosen[(None, 4096)] == "Tree/LL"


def test_a_sweep_row_finds_its_line_by_the_bytes_nccl_counts():
    chosen = nccl.chosen_algorithms(LOG)
    assert nccl.algorithm_for(chosen, "all-reduce", 4194304, 8) == "NVLS/Simple"
    # An all-gather's line counts one rank's part: S = 8 x 512 KiB.
    assert nccl.algorithm_for(chosen, "all-gather", 8 * 524288, 8) == "Ring/Simple"
    assert nccl.algorithm_for(chosen, "all-reduce", 4096, 8) == "Tree/LL"  # a line without its function
    assert nccl.algorithm_for(chosen, "all-to-all", 4194304, 8) is None  # send/receive: no algorithm
    assert nccl.algorithm_for(chosen, "broadcast", 123, 8) is None
