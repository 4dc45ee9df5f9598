"""Overlap from a profiler trace's GPU kernels: the lab's own count, and Holistic Trace Analysis on the same file.

The traces are written here in the layout torch.profiler's Kineto export uses (a ProfilerStep cpu_op, runtime
launches with a correlation id, `kernel` events carrying device, stream and correlation), with kernel names
as CUDA and NCCL name them, so the HTA test runs HTA's real parser and analysis on them.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from labs.trace.kernels import (
    AGREEMENT_TOLERANCE,
    cross_check,
    kernel_intervals,
    kernel_overlap,
    kernel_waits,
    not_applicable,
)

HAS_HTA = importlib.util.find_spec("hta") is not None


def kineto_trace(rank: int, kernels: list[tuple[str, float, float]]) -> dict:
    ev = [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#0", "pid": 10, "tid": 10, "ts": 0.0, "dur": 5000.0}]
    for corr, (name, ts, dur) in enumerate(kernels, start=1):
        stream = 20 if name.startswith("nccl") else 7
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 10,
                "tid": 10,
                "ts": ts - 40,
                "dur": 5.0,
                "args": {"correlation": corr},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "pid": 0,
                "tid": stream,
                "ts": ts,
                "dur": dur,
                "args": {"device": 0, "stream": stream, "correlation": corr},
            }
        )
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank}, "traceEvents": ev}


# Rank 0: a GEMM covers half of the all-gather. Rank 1: the all-gather runs alone, then a Memcpy (not compute).
RANKS = {
    0: [("sm90_xmma_gemm_bf16bf16_bf16f32", 100.0, 400.0), ("ncclDevKernel_AllGather_RING_LL", 300.0, 400.0)],
    1: [
        ("ncclDevKernel_AllGather_RING_LL", 100.0, 400.0),
        ("Memcpy DtoD (Device -> Device)", 200.0, 300.0),
        ("elementwise_kernel", 600.0, 100.0),
    ],
}


@pytest.fixture
def traces(tmp_path):
    files = {}
    for rank, ks in RANKS.items():
        files[rank] = tmp_path / f"profile_rank{rank}.json"
        files[rank].write_text(json.dumps(kineto_trace(rank, ks)))
    return files


def test_kernels_are_classified_as_hta_does_and_overlap_follows_the_definition(traces):
    k = kernel_intervals(json.loads(traces[1].read_text()))
    assert k["communication"] == [(0.1, 0.5)] and k["memory"] == [(0.2, 0.5)] and k["compute"] == [(0.6, 0.7)]
    r0, r1 = kernel_overlap(traces[0]), kernel_overlap(traces[1])
    assert r0["overlap_ratio"] == pytest.approx(0.5) and r0["communication_kernel_ms"] == pytest.approx(0.4)
    assert r1["overlap_ratio"] == 0.0  # a copy beside the collective is not computation


@pytest.mark.hta
@pytest.mark.skipif(
    not HAS_HTA, reason="Holistic Trace Analysis is not installed (the `hta` extra; gpu-check installs it)"
)
def test_hta_agrees_with_the_lab_on_the_same_traces(traces):
    # spans within the tolerance of the kernels (0.5 and 0): they agree too, and pass through as measured
    check = cross_check(traces, {0: 0.47, 1: 0.0})
    assert check["hta_available"] and check["hta_reason"] is None
    by_rank = {r["rank"]: r for r in check["ranks"]}
    assert by_rank[0]["hta_overlap_ratio"] == pytest.approx(0.5, abs=1e-4)
    assert by_rank[1]["hta_overlap_ratio"] == pytest.approx(0.0, abs=1e-4)
    assert by_rank[0]["lab_span_overlap_ratio"] == 0.47
    assert check["disagree_ranks"] == [] and all(r["difference"] <= AGREEMENT_TOLERANCE for r in check["ranks"])


@pytest.mark.skipif(HAS_HTA, reason="checks the result without HTA installed")
def test_without_hta_the_lab_count_stands_alone_and_says_why(traces):
    check = cross_check(traces)
    assert check["hta_available"] is False and "not importable" in check["hta_reason"]
    assert [r["lab_kernel_overlap_ratio"] for r in check["ranks"]] == pytest.approx([0.5, 0.0])
    assert "HTA did not run" in check["note"]


def test_on_cpu_hta_does_not_apply_and_the_result_says_so():
    na = not_applicable("cpu")
    assert na["applies"] is False and "not on the cpu backend" in na["note"] and na["ranks"] == []


def test_span_ratio_far_from_the_kernel_count_is_flagged(traces):
    # Rank 0's kernels overlap half the all-gather; spans that claim all of it disagree with the kernels.
    check = cross_check(traces, {0: 1.0, 1: 0.0})
    assert 0 in check["disagree_ranks"] and 1 not in check["disagree_ranks"]
    assert "CUDA-event spans and its kernel count differ" in check["note"] and "[0]" in check["note"]
    agreeing = cross_check(traces, {0: 0.5, 1: 0.0})
    assert agreeing["disagree_ranks"] == [] and "spans agree with its kernel count" in agreeing["note"]


def test_kernels_launched_outside_the_profiled_steps_are_not_counted():
    # A one-element NCCL all-reduce (a barrier) launched before ProfilerStep#0 starts: HTA drops it, so must the lab.
    trace = kineto_trace(
        0, [("sm90_xmma_gemm_bf16bf16_bf16f32", 300.0, 400.0), ("ncclDevKernel_AllGather_RING_LL", 300.0, 400.0)]
    )
    trace["traceEvents"][0]["ts"] = 200.0  # ProfilerStep#0 now starts after a launch placed at ts 50
    trace["traceEvents"] += [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 10,
            "tid": 10,
            "ts": 50.0,
            "dur": 5.0,
            "args": {"correlation": 99},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "pid": 0,
            "tid": 20,
            "ts": 60.0,
            "dur": 200.0,
            "args": {"device": 0, "stream": 20, "correlation": 99},
        },
    ]
    k = kernel_intervals(trace)
    assert k["communication"] == [(0.3, 0.7)]
    del trace["traceEvents"][0]  # without step markers the whole trace counts, as in HTA
    assert len(kernel_intervals(trace)["communication"]) == 2


def stepped_trace(rank: int, steps: list[list[tuple[str, float]]]) -> dict:
    """A Kineto-shaped trace with one ProfilerStep per entry; each step's kernels (name, duration µs) run in turn."""
    ev, corr = [], 0
    for s, kernels in enumerate(steps):
        t0 = 10_000.0 * s
        ev.append(
            {"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t0, "dur": 9000.0}
        )
        for i, (name, dur) in enumerate(kernels):
            corr += 1
            at = t0 + 100.0 + 2000.0 * i
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": at,
                    "dur": 5.0,
                    "args": {"correlation": corr},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": at + 10.0,
                    "dur": dur,
                    "args": {"device": rank, "stream": 7, "correlation": corr},
                }
            )
    return {"schemaVersion": 1, "traceEvents": ev}


def test_waits_come_from_each_ranks_own_kernel_durations(tmp_path):
    ar, gemm = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "sm90_xmma_gemm_bf16bf16_bf16f32"
    steps = {
        # step 0: rank 0 launched its first all-reduce 300 µs early and spun; step 1: rank 1 was early twice
        0: [[(gemm, 50.0), (ar, 500.0), (ar, 200.0)], [(ar, 100.0), (ar, 200.0)]],
        1: [[(gemm, 80.0), (ar, 200.0), (ar, 200.0)], [(ar, 400.0), (ar, 250.0)]],
    }
    files = {}
    for r, st in steps.items():
        files[r] = tmp_path / f"r{r}.json"
        files[r].write_text(json.dumps(stepped_trace(r, st)))
    waits = kernel_waits(files)
    assert waits == {0: pytest.approx([0.3, 0.0]), 1: pytest.approx([0.0, 0.35])}
    files[1].write_text(json.dumps(stepped_trace(1, [[(ar, 200.0)], [(ar, 400.0), (ar, 250.0)]])))
    assert kernel_waits(files) is None  # collectives that do not pair up give no waits rather than wrong ones


@pytest.mark.parametrize(
    "device, says",
    [("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "MIG"), ("NVIDIA H200", "CUPTI may be unavailable")],
)
def test_a_rank_with_no_kernels_is_named_with_the_likely_reason(tmp_path, device, says):
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(kineto_trace(0, [])))
    check = cross_check({0: empty}, device_name=device)
    assert check["ranks"][0]["kernels"] == 0
    assert "rank(s) [0]: the profile recorded no GPU kernels" in check["note"] and says in check["note"]


def test_collective_wait_and_exposed_times_come_from_kernels_and_each_ranks_own_clock(tmp_path):
    from labs.trace.kernels import kernel_comm

    ar, gemm = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "sm90_xmma_gemm_bf16bf16_bf16f32"
    # One step; rank 0 arrived 300 µs early at the first all-reduce. The stepped trace runs kernels one after
    # another, 2 ms apart, so no compute overlaps a collective: all of it is exposed, less the wait.
    steps = {0: [[(gemm, 50.0), (ar, 500.0), (ar, 200.0)]], 1: [[(gemm, 80.0), (ar, 200.0), (ar, 200.0)]]}
    files = {}
    for r, st in steps.items():
        files[r] = tmp_path / f"r{r}.json"
        # Rank 1's clock is 7 s off rank 0's: nothing may depend on it.
        trace = stepped_trace(r, st)
        for ev in trace["traceEvents"]:
            ev["ts"] += 7e6 * r
        files[r].write_text(json.dumps(trace))
    comm = kernel_comm(files)
    assert comm is not None
    assert comm[0] == [pytest.approx({"collective_ms": 0.4, "wait_ms": 0.3, "exposed_ms": 0.4})]
    assert comm[1] == [pytest.approx({"collective_ms": 0.4, "wait_ms": 0.0, "exposed_ms": 0.4})]


def test_compute_overlapping_a_collective_on_the_same_rank_is_not_exposed(tmp_path):
    from labs.trace.kernels import kernel_comm

    # kineto_trace places kernels at given times: rank 0's GEMM covers half its all-gather, rank 1's nothing.
    files = {}
    for rank, ks in RANKS.items():
        files[rank] = tmp_path / f"k{rank}.json"
        files[rank].write_text(json.dumps(kineto_trace(rank, [k for k in ks if k[0] != "elementwise_kernel"])))
    comm = kernel_comm(files)
    assert comm is not None
    assert comm[0][0]["exposed_ms"] == pytest.approx(0.2)  # 400 µs of all-gather, 200 under the GEMM
    assert comm[1][0]["exposed_ms"] == pytest.approx(0.4)  # the Memcpy is not compute
