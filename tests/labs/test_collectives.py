"""collectives: one real run on 4 gloo ranks in 2 emulated nodes, shared by the invariant checks; the α-β fit
and the predicted egress on their own (the model they use: tests/labs/parallel/test_comm.py); the namespaces'
cleanup on exit, on an exception, on SIGTERM and after a SIGKILL."""

import json
import os
import signal
import subprocess
import sys

import pytest

from labs.collectives import model, topo
from labs.collectives.params import Params, estimate_seconds, limits, resources, sizes
from labs.parallel import comm
from labs.runtime import validate_result
from tests.labs import runs


def _may_build_namespaces() -> bool:
    t = topo.build(2, 100, 0)
    try:
        return t.ok
    finally:
        topo.teardown(t)


NETNS = _may_build_namespaces()
needs_netns = pytest.mark.skipif(not NETNS, reason="this worker may not create network namespaces")


@pytest.fixture(scope="module")
def lab():
    return runs.run("collectives")  # its spec's tiny run: 4 ranks in 2 nodes, 256 B to 64 KiB on a slow link


@pytest.fixture(scope="module")
def res(lab):
    return lab.result["results"]


def test_the_result_validates_and_names_its_emulation(lab):
    assert validate_result(lab.result) == []
    assert lab.result["environment"]["emulated"] is True
    assert "CPU emulation" in lab.result["environment"]["label"]


def test_busbw_is_algbw_times_the_nccl_tests_factor_and_algbw_is_s_over_t(res):
    factors = {"all-reduce": 2 * 3 / 4, "all-gather": 3 / 4}
    (sweep,) = res["sweeps"]
    assert sweep["algorithm"] == "gloo-ring"
    assert [c["name"] for c in sweep["collectives"]] == ["all-reduce", "all-gather"]
    for c in sweep["collectives"]:
        assert [r["bytes"] for r in c["rows"]] == [256, 4096, 65536]
        for r in c["rows"]:
            assert r["algbw_gbs"] == pytest.approx(r["bytes"] / (r["time_ms"] / 1e3) / 1e9)
            assert r["busbw_gbs"] == pytest.approx(factors[c["name"]] * r["algbw_gbs"])


def test_the_fit_is_the_course_model_and_its_residuals_are_the_rows(res):
    for c in res["sweeps"][0]["collectives"]:
        f = c["fit"]
        assert f["steps"] == comm.hops(c["name"], 4)
        assert f["alpha_us"] == pytest.approx(1e3 * f["intercept_ms"] / f["steps"])
        if f["bandwidth_gbs"] is not None:
            assert f["bandwidth_gbs"] == pytest.approx(f["busbw_factor"] / (f["slope_ms_per_mib"] / 1e3 / 2**20) / 1e9)
        for r in c["rows"]:
            assert r["fit_ms"] == pytest.approx(f["intercept_ms"] + f["slope_ms_per_mib"] * r["bytes"] / 2**20)
            assert r["residual"] == pytest.approx((r["time_ms"] - r["fit_ms"]) / r["time_ms"])


def test_hierarchical_all_reduce_gives_the_flat_sums_exactly(res):
    h = res["hierarchy"]
    assert h["max_abs_diff"] == 0
    assert h["bytes"] == 65536
    assert h["egress"]["predicted_flat_bytes"] == 1.5 * 65536  # 2(N-1)/N x S, N = 4
    assert h["egress"]["predicted_hierarchical_bytes"] == 65536  # 2(k-1)/k x S, k = 2


@needs_netns
def test_emulated_nodes_cross_node_is_slower_and_egress_matches_the_model(res):
    t = res["topology"]
    assert t["mode"] == "netns" and t["link_mbit"] == 20.0
    scopes = {s["scope"]: s for s in res["scopes"]}
    assert scopes["cross-node"]["time_ms"] > scopes["intra-node"]["time_ms"]
    e = res["hierarchy"]["egress"]
    # The interface counters see TCP/IP headers and the barriers on top of the payload: a little more, never less.
    for kind in ("flat", "hierarchical"):
        got, want = e[f"measured_{kind}_bytes"], e[f"predicted_{kind}_bytes"]
        assert want <= got <= 1.25 * want, kind
    assert e["measured_hierarchical_bytes"] < e["measured_flat_bytes"]


def test_the_timeline_has_every_rank_and_the_three_hierarchical_phases(lab, res):
    trace = json.loads((lab.out / res["hierarchy"]["artifacts"]["trace"]).read_text())
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert {e["pid"] for e in spans} == {0, 1, 2, 3}
    names = {e["name"] for e in spans}
    assert {"all-reduce (flat, all ranks)", "reduce-scatter (in node)", "all-gather (in node)"} <= names
    assert (lab.out / res["busbw_chart"]).read_text().startswith("<svg")


def test_the_run_leaves_no_namespace_behind(lab):
    assert not [n for n in topo.list_namespaces() if n.startswith(topo.PREFIX)]


# ---- the model and its fit, without torch -----------------------------------------------------------------


def test_fit_recovers_an_exact_alpha_beta_line():
    n, alpha, bw = 8, 20e-6, 5e9
    szs = [2**k for k in range(10, 24, 2)]
    ts = [comm.alpha_beta("all-reduce", n, s, alpha_s=alpha, bandwidth=bw).seconds for s in szs]
    f = model.fit("all-reduce", n, szs, ts)
    assert f["alpha_us"] == pytest.approx(20, rel=1e-6)
    assert f["bandwidth_gbs"] == pytest.approx(5, rel=1e-6)
    assert f["beta_ns_per_byte"] == pytest.approx(0.2, rel=1e-6)
    assert f["rms_residual"] < 1e-9


def test_the_weighted_fit_keeps_small_messages_honest():
    # One noisy large point: an unweighted line would drag the intercept far off; relative weights hold it.
    szs = [1e3, 1e4, 1e5, 1e6, 1e7]
    ts = [1e-4 + s / 1e9 for s in szs]
    ts[-1] *= 1.3
    a, _ = model.fit_line(szs, ts)
    assert a == pytest.approx(1e-4, rel=0.2)


def test_predicted_egress_names_both_cross_node_cases():
    e = model.predicted_egress(2**30, 16, 2, 50e9)
    assert e["predicted_flat_bytes"] == 2 * 15 / 16 * 2**30  # one flat ring over 16 ranks
    assert e["predicted_hierarchical_bytes"] == 2**30  # 2(k-1)/k x S over k = 2 nodes
    assert e["predicted_flat_ms"] == pytest.approx(1e3 * 2 * 15 / 16 * 2**30 / 50e9)
    assert model.predicted_egress(2**30, 16, 2, None)["predicted_flat_ms"] is None  # no link limit, no time


def test_bad_fit_input_is_named():
    with pytest.raises(ValueError, match="at least 2"):
        model.fit_line([1.0], [1.0])
    with pytest.raises(ValueError, match="different message sizes"):
        model.fit_line([4.0, 4.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="collective"):
        model.fit("gather", 4, [1, 2], [1.0, 2.0])


def test_a_tree_fit_divides_the_intercept_by_the_trees_hops_and_nccls_choice_by_none():
    n, alpha, bw = 8, 5e-6, 100e9
    szs = [2**k for k in range(12, 28, 2)]
    ts = [comm.alpha_beta("all-reduce", n, s, alpha_s=alpha, bandwidth=bw, algorithm="tree").seconds for s in szs]
    tree = model.fit("all-reduce", n, szs, ts, "tree")
    assert tree["steps"] == comm.hops("all-reduce", n, "tree") == 6  # 2 ceil(log2 8), not the ring's 14
    assert tree["alpha_us"] == pytest.approx(5, rel=1e-6)
    ring = model.fit("all-reduce", n, szs, ts, "ring")
    assert ring["steps"] == 14 and ring["alpha_us"] == pytest.approx(5 * 6 / 14, rel=1e-6)
    chosen = model.fit("all-reduce", n, szs, ts, None)
    assert chosen["steps"] is None and chosen["alpha_us"] == pytest.approx(30, rel=1e-6)  # the whole intercept


def test_sizes_and_limits():
    p = Params(min_bytes=1024, max_bytes=10000, factor=4)
    assert sizes(p, "cpu") == sizes(p, "torch-cuda") == [1024, 4096, 10000]
    assert [x.field for x in limits(Params(ranks=4, nodes=3), "cpu")] == ["nodes"]
    assert [x.field for x in limits(Params(min_bytes=8192, max_bytes=4096), "cpu")] == ["max_bytes"]
    assert limits(Params(), "cpu") == [] and limits(Params(), "torch-cuda") == []


def test_default_sizes_are_small_on_cpu_and_reach_256_mib_on_a_gpu_and_the_estimates_follow():
    p = Params()
    assert sizes(p, "cpu")[-1] == 4 * 2**20 and sizes(p, "torch-cuda")[-1] == 256 * 2**20
    assert len(sizes(p, "torch-cuda")) <= 12
    cpu, gpu = resources(p, "cpu"), resources(p, "torch-cuda")
    assert "4.0 MiB" in cpu.memory_note and gpu.gpus == p.ranks
    # The GPU sweep moves 64x the bytes; its estimate prices them at a GPU link's rate, not gloo's loopback.
    assert estimate_seconds(p, "torch-cuda") < 10 * estimate_seconds(p, "cpu")
    assert estimate_seconds(p.model_copy(update={"max_bytes": 2**30}), "torch-cuda") > estimate_seconds(p, "torch-cuda")


# ---- cleanup of the namespaces ----------------------------------------------------------------------------


def _mine(pid: int) -> list[str]:
    return [n for n in topo.list_namespaces() if n.startswith(f"{topo.PREFIX}{pid}-")]


@needs_netns
def test_an_exception_inside_the_block_still_deletes_the_namespaces():
    with pytest.raises(RuntimeError), topo.emulated_nodes(2, 100, 0) as t:
        assert t.ok and len(_mine(os.getpid())) == 3
        raise RuntimeError("boom")
    assert _mine(os.getpid()) == []


@needs_netns
def test_sigterm_deletes_the_namespaces_and_sigkill_leaves_them_to_the_next_sweep():
    code = (
        "import os, signal, sys, time\n"
        "from labs.collectives import topo\n"
        "with topo.emulated_nodes(2, 100, 0) as t:\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(60)\n"
    )
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=runs.ROOT)
        assert proc.stdout.readline().strip() == "ready"
        names = _mine(proc.pid)
        assert len(names) == 3
        proc.send_signal(sig)
        proc.wait(timeout=30)  # reaped: the pid no longer exists
        if sig == signal.SIGTERM:
            assert _mine(proc.pid) == []
        else:
            assert _mine(proc.pid) == names  # SIGKILL cannot be caught ...
            assert set(names) <= set(topo.sweep_stale())
            assert _mine(proc.pid) == []  # ... so the next start sweeps up after the dead process


def test_without_iproute2_the_run_is_flat_and_says_why(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    t = topo.build(2, 100, 0)
    assert not t.ok and t.names == []
    assert t.why == "iproute2's `ip` is not installed on this worker; ran flat"
    assert t.plan(2) == [None] * 4
    assert topo.build(1, 100, 0).why == "one node: nothing to emulate"
