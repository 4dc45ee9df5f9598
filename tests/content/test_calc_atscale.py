"""Lesson 09's readings: the node's fabric, how real systems hide communication, block-scaled formats.

The calculations are checked against what they model: DDP's bucket defaults and bucket assignment come from
the installed torch (2.13) itself, async TP's closed form against a step-by-step schedule of its copies and
pieces, and the block formats against the bit counts their specifications give.
"""

import math

import pytest

from app.content import calc
from app.content.loader import load_course

from .conftest import LESSONS

# ---------------------------------------------------------------- the node's fabric


def test_node_fabric_is_the_hgx_h100_datasheet():
    f = calc.node_fabric()
    assert (f["nvlink_gbs"], f["nic_gbit"], f["egress_gbs"]) == (450, 400, 400)
    assert f["nvlink_over_nic"] == 9 and f["nvlink_over_egress"] == pytest.approx(1.125)


@pytest.mark.parametrize("nodes", [2, 4, 16])
def test_a_ring_is_priced_by_egress_and_an_all_to_all_by_the_nic(nodes):
    size, per_node, nic = 8e9, 8, 50e9
    ring = calc.network_collective(size, nodes, per_node, nic, kind="all-gather")
    # NCCL's flat ring over N = 8k GPUs: (N-1)/N of the array leaves each node, through all its NICs at once
    gpus = nodes * per_node
    assert ring["network_ms"] == pytest.approx(1e3 * size * (gpus - 1) / gpus / (per_node * nic))
    # the hierarchical floor beside it: what a node lacks, (k-1)/k
    assert ring["hier_network_ms"] == pytest.approx(1e3 * size * (nodes - 1) / nodes / (per_node * nic))
    a2a = calc.cross_node_all_to_all(size, nodes, per_node, nic)
    # an all-to-all: each GPU's own off-node bytes through its own NIC; egress would be the NIC count too fast
    assert a2a["network_ms"] == pytest.approx(per_node * a2a["egress_ms"])
    assert a2a["off_node_share"] == pytest.approx(1 - 1 / nodes)


# ---------------------------------------------------------------- DDP's buckets, read against torch


def test_bucket_defaults_are_torchs():
    import torch.distributed as dist
    from torch.nn.parallel import distributed

    defaults = calc.ddp_buckets.__defaults__
    assert defaults == (distributed._DEFAULT_BUCKET_CAP_MB, dist._DEFAULT_FIRST_BUCKET_BYTES / 2**20) == (25, 1)


@pytest.mark.parametrize(("count", "mib_each", "first", "cap"), [(40, 0.25, 1, 3), (10, 1, 1, 3), (64, 0.5, 1, 25)])
def test_bucket_count_is_torchs_for_small_parameters(count, mib_each, first, cap):
    import torch
    import torch.distributed as dist

    tensors = [torch.empty(int(mib_each * 2**20 / 4)) for _ in range(count)]  # FP32
    buckets, _ = dist._compute_bucket_assignment_by_size(tensors, [first * 2**20, cap * 2**20])
    assert calc.ddp_buckets(count * mib_each * 2**20, cap, first)["buckets"] == len(buckets)


def test_the_lab_models_buckets_are_the_lessons():
    """The reading says the zero-fsdp lab's default model fills this many buckets: DDP's own assignment agrees."""
    import torch.distributed as dist

    from labs.zero_fsdp import model
    from labs.zero_fsdp.params import Params

    p = Params()
    params = list(reversed(list(model.build(p, 0).parameters())))  # DDP buckets in reverse registration order
    cap = int(p.ddp_bucket_mb * 2**20)
    buckets, _ = dist._compute_bucket_assignment_by_size(params, [cap, cap])
    grads = sum(t.numel() * t.element_size() for t in params)
    lesson = load_course(LESSONS).lesson("parallelism-measured")
    assert (
        lesson.values["ov-lab-buckets"]["buckets"]
        == len(buckets)
        == calc.ddp_buckets(grads, p.ddp_bucket_mb, p.ddp_bucket_mb)["buckets"]
    )


def test_buckets_leave_only_the_last_one_exposed():
    # one bucket: the whole all-reduce starts when backward ends
    one = calc.bucketed_allreduce(1e9, 8, 450e9, 0.2, bucket_mb=2000, first_bucket_mb=2000)
    assert one["buckets"] == 1 and one["exposed_ms"] == pytest.approx(one["serial_ms"])
    many = calc.bucketed_allreduce(1e9, 8, 450e9, 0.2)
    assert many["exposed_ms"] == pytest.approx(many["last_bucket_ms"]) and many["exposed_ms"] < one["exposed_ms"] / 50
    slow = calc.bucketed_allreduce(1e9, 8, 1e9, 0.2)  # the link cannot keep up with backward: buckets queue
    assert slow["exposed_ms"] > slow["serial_ms"] - 200


# ---------------------------------------------------------------- prefetch and async TP


@pytest.mark.parametrize(("gather", "compute"), [(2, 3), (3, 2), (0, 1)])
def test_prefetch_hides_gathers_up_to_the_compute_beside_them(gather, compute):
    r = calc.layer_prefetch(32, gather, compute)
    assert max(32 * compute, 32 * gather) <= r["prefetched"] <= r["serial"]
    assert r["exposed"] == pytest.approx(gather + 31 * max(gather - compute, 0))


def _async_tp_schedule(gemm: float, comm: float, n: int) -> float:
    """Copies back to back on the link; piece k waits for its copy and for piece k-1 (torch's
    _pipelined_multi_all_gather_and_consume, local shard first)."""
    piece, copy = gemm / n, comm / (n - 1)
    end = piece  # the local shard needs no copy
    for k in range(1, n):
        end = max(end, k * copy) + piece
    return end


@pytest.mark.parametrize(("gemm", "comm", "n"), [(8, 4.5, 4), (4, 7.5, 4), (6, 6, 2), (12, 3, 8)])
def test_async_tp_matches_its_schedule(gemm, comm, n):
    r = calc.async_tp(gemm, comm, n)
    assert r["overlapped"] == pytest.approx(_async_tp_schedule(gemm, comm, n))
    assert max(gemm, comm) <= r["overlapped"] <= r["serial"]


# ---------------------------------------------------------------- block-scaled formats


def test_bits_per_element_are_the_specifications():
    assert calc.recipe_bits("mxfp8")["bits"] == 8 + 8 / 32  # OCP MX v1.0: 32 elements share an E8M0 scale
    assert calc.recipe_bits("nvfp4")["bits"] == 4 + 8 / 16  # E2M1, an E4M3 scale per 16
    assert calc.recipe_bits("deepseek-activation")["bits"] == 8 + 32 / 128  # FP32 scale per 1x128 tile
    assert calc.recipe_bits("deepseek-weight")["bits"] == 8 + 32 / 128**2  # per 128x128 block
    both = calc.recipe_bits("mxfp8", copies=2)
    assert both["total_bits"] > 16 and both["vs_bf16"] == pytest.approx(16.5 / 16)
    tensor = calc.recipe_bits("nvfp4", elements=4096 * 4096)  # the FP32 tensor scale spread over the tensor
    assert 0 < tensor["bits"] - 4.5 < 1e-5


def test_promotion_every_128_is_four_fp8_wgmmas():
    r = calc.promotions(4096)
    assert (r["promotions"], r["mmas_per_promotion"]) == (32, 4)
    assert calc.promotions(4000)["promotions"] == math.ceil(4000 / 128)


@pytest.mark.parametrize(
    ("name", "args", "needle"),
    [
        ("scaled_format", {"element_bits": 4, "block": 16, "scale_bits": 8, "tensor_scale_bits": 32}, "elements"),
        ("recipe_bits", {"recipe": "mxfp4"}, "recipe must be one of"),
        ("promotions", {"k": 4096, "interval": 100}, "multiple of mma_k"),
        ("cross_node_all_to_all", {"size": 1e9, "nodes": 1}, "nodes must be an integer >= 2"),
    ],
)
def test_bad_arguments_name_the_argument(name, args, needle):
    with pytest.raises(calc.CalcError, match=needle):
        calc.evaluate(name, args)
