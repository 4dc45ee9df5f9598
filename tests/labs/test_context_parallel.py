"""context-parallel: ring attention (zig-zag, contiguous, without overlap) and an all-to-all over heads on 4 gloo
ranks, one real run shared by every assert, plus the split and byte arithmetic on its own."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from labs.context_parallel import work
from labs.context_parallel.params import Params, estimate_seconds, limits, resources
from labs.context_parallel.run import TOL
from labs.runtime import validate_result
from tests.labs import runs

# Four ranks so the contiguous causal split is 7 to 1; 256 tokens in 8 chunks of 32: a few ms of attention a pass.
SMALL = {"ranks": 4, "seq_len": 256, "heads": 4, "head_dim": 16, "steps": 2, "warmup": 1}
N = SMALL["ranks"]


@pytest.fixture(scope="module")
def run():
    return runs.run("context-parallel", SMALL)


@pytest.fixture(scope="module")
def res(run):
    return run.result["results"]


def test_the_run_validates_and_draws_every_method(run, res):
    assert validate_result(run.result) == []
    assert list(res["variants"]) == ["ring-zigzag", "ring-contiguous", "ring-serial", "ulysses"]
    for name, v in res["variants"].items():
        assert [r["rank"] for r in v["ranks"]] == list(range(N)), name
        ET.fromstring((run.out / v["artifacts"]["timeline"]).read_text())
    assert run.result["environment"]["emulated"] is True
    assert res["answer"].startswith("Causal mask: contiguous ranks' work differs 7x, zig-zag 1x")
    assert len(res["answer"].split()) <= 30


def test_every_method_computes_full_attention_within_the_tolerance(res):
    for name, v in res["variants"].items():
        assert v["max_abs_err"] <= TOL, name
    # the backward: K/V gradients summed at their owners after the p2p return trip
    back = res["backward"]
    assert back["split"] == "zigzag"
    for k in ("max_rel_err_dq", "max_rel_err_dk", "max_rel_err_dv"):
        assert back[k] <= back["tolerance"] == 1e-4, k
    # PyTorch's own ring loop, handed the CPU flash op, computes the same
    assert res["torch_context_parallel"]["ring_error"] is None
    assert res["torch_context_parallel"]["ring_max_abs_err"] <= TOL


def test_context_parallel_does_not_dispatch_the_cpu_attention_kernel(res):
    # torch 2.13 _context_parallel/_attention.py handles the CUDA SDPA ops only: why the lab builds its own ring
    err = res["torch_context_parallel"]["context_parallel_error"]
    assert err.startswith("NotImplementedError") and "_scaled_dot_product_flash_attention_for_cpu" in err


def test_zigzag_balances_causal_work_and_contiguous_does_not(res):
    z, c = res["variants"]["ring-zigzag"], res["variants"]["ring-contiguous"]
    assert z["work_imbalance"] == 1.0 and z["model_work_imbalance"] == 1.0
    assert c["work_imbalance"] == c["model_work_imbalance"] == 2 * N - 1
    for split, v in (("zigzag", z), ("contiguous", c)):
        for r in v["ranks"]:
            want = work.rank_work(split, r["rank"], N, causal=True)
            assert (r["blocks_computed"], r["blocks_needed"]) == (want["computed"], want["needed"])
            assert r["chunks"] == work.chunks(split, r["rank"], N)
    # the measured attention time follows the work: the last contiguous rank's thread time exceeds the first's
    cpu = [r["compute_cpu_ms"] for r in c["ranks"]]
    assert cpu[-1] > cpu[0]


def test_bytes_sent_equal_the_formulas(res):
    S, H, d = SMALL["seq_len"], SMALL["heads"], SMALL["head_dim"]
    ring = (N - 1) * 2 * (S // N) * H * d * 4
    a2a = 4 * (S // N) * H * d * 4 * (N - 1) // N
    for name, v in res["variants"].items():
        want = a2a if name == "ulysses" else ring
        assert v["formula_bytes_per_rank"] == want, name
        assert [r["send_bytes"] for r in v["ranks"]] == [want] * N, name
    assert ring / a2a == N / 2


def test_the_ring_overlaps_its_transfers_and_the_serial_ring_does_not(run, res):
    z, s = res["variants"]["ring-zigzag"], res["variants"]["ring-serial"]
    for r in z["ranks"]:
        assert r["overlap_ratio"] > 0 and r["compute_ms"] > 0
    for r in s["ranks"]:
        assert r["overlap_ratio"] == 0.0
        assert r["exposed_communication_ms"] == pytest.approx(r["communication_ms"])
    trace = json.loads((run.out / z["artifacts"]["trace"]).read_text())
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    # every rank: N compute spans (one per ring step) and N-1 transfers of its K/V, each naming its bytes, per pass
    for rank in range(N):
        mine = [e for e in spans if e["pid"] == rank and e["args"]["step"] == 0]
        assert len([e for e in mine if e["cat"] == "compute"]) == N
        comm = [e for e in mine if e["cat"] == "communication"]
        assert len(comm) == N - 1
        assert sum(e["args"]["bytes"] for e in comm) == z["formula_bytes_per_rank"]


@pytest.mark.gpu
def test_ring_and_all_to_all_on_two_gpus_over_nccl():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs: NCCL p2p between two context-parallel ranks")
    done = runs.run("context-parallel", {"ranks": 2, "seq_len": 4096, "heads": 4, "head_dim": 64}, backend="torch-cuda")
    res = done.result["results"]
    assert res["timing"]["kind"] == "cuda-stream-sync"
    for name, v in res["variants"].items():
        # FP32 matmuls and the memory-efficient SDPA kernel sum in other orders than the CPU: looser than 1e-4
        assert v["max_abs_err"] <= 1e-3, name
        assert v["send_bytes_per_rank"] == v["formula_bytes_per_rank"], name
    assert res["variants"]["ring-contiguous"]["work_imbalance"] == 3.0
    assert res["torch_context_parallel"]["ring_error"] is None  # its ring loop with the CUDA efficient-attention op
    assert max(res["backward"][k] for k in ("max_rel_err_dq", "max_rel_err_dk", "max_rel_err_dv")) <= 1e-3


# ---- the arithmetic on its own ------------------------------------------------------------------


@pytest.mark.parametrize("world", [2, 3, 4, 8])
@pytest.mark.parametrize("split", work.SPLITS)
def test_each_split_holds_every_chunk_once(world, split):
    held = sorted(c for r in range(world) for c in work.chunks(split, r, world))
    assert held == list(range(2 * world))


@pytest.mark.parametrize("world", [2, 4, 8])
def test_causal_work_per_rank(world):
    zig = [work.rank_work("zigzag", r, world, True)["needed"] for r in range(world)]
    con = [work.rank_work("contiguous", r, world, True)["needed"] for r in range(world)]
    assert zig == [2.0 * world] * world  # 2N - 1 full pairs and two half diagonals
    assert con == [4.0 * r + 2 for r in range(world)]
    assert work.imbalance(con) == 2 * world - 1
    assert sum(zig) == sum(con) == (2 * world) ** 2 / 2  # the triangle, however it is split
    assert work.ulysses_work(world, True)["needed"] == 2.0 * world
    full = [work.rank_work("contiguous", r, world, False)["needed"] for r in range(world)]
    assert full == [4.0 * world] * world


def test_imbalance_of_an_idle_rank_is_unbounded():
    assert work.imbalance([0.0, 3.0]) is None and work.imbalance([2.0, 3.0]) == 1.5


def test_limits_name_the_field_and_the_arithmetic():
    p = Params.model_validate({"ranks": 4, "seq_len": 100, "heads": 6})
    got = {pr.field: pr.message for pr in limits(p, "cpu")}
    assert got["seq_len"].startswith("seq_len: 100 tokens must split into 2 x ranks = 8 equal chunks; seq_len % 8 = 4")
    assert "heads(6) % ranks(4) = 2" in got["heads"]
    assert limits(Params(), "cpu") == []


def test_resources_and_estimate_grow_with_the_sequence():
    small, big = Params(), Params.model_validate({"seq_len": 8192})
    assert resources(big, "cpu").memory_bytes > resources(small, "cpu").memory_bytes
    assert resources(small, "torch-cuda").gpus == 4 and resources(small, "cpu").cpus == 4
    assert estimate_seconds(big, "cpu") > estimate_seconds(small, "cpu") > 5


def test_errors_in_summary_notes_wrap_on_a_phone():
    from labs.context_parallel.report import _words

    cpu = (
        "NotImplementedError: Operator aten._scaled_dot_product_flash_attention_for_cpu.default does not have a "
        "sharding strategy registered."
    )
    assert max(len(w) for w in _words(cpu).split()) <= 32 and "CUDA attention kernels" in _words(cpu)
    other = _words("RuntimeError: " + "x" * 60 + " failed")
    assert other == "RuntimeError: " + "x" * 30 + "… failed"
