"""zero-fsdp: one real 2-rank gloo run of all four strategies (through the command line the worker uses),
shared by the parity, invariant and artifact tests; then fast tests of the arithmetic and the byte counting."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from labs import catalog
from labs.runtime import validate_result
from labs.zero_fsdp import anatomy
from labs.zero_fsdp.params import LOSS_TOLERANCE, Params
from tests.labs import runs

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"layers": 2, "hidden": 32, "heads": 2, "vocab": 64, "seq": 16, "batch": 2, "steps": 2, "warmup": 1}
N = 2


@pytest.fixture(scope="module")
def bundle() -> Path:
    """The SMALL run, shared with the catalog-wide tests that run every lab once (tests/labs/runs.py)."""
    return runs.run("zero-fsdp", SMALL).out


@pytest.fixture(scope="module")
def result(bundle) -> dict:
    return json.loads((bundle / "result.json").read_text())


def test_result_validates_and_says_it_is_emulated(result):
    assert validate_result(result) == []
    assert result["environment"]["emulated"] is True
    assert list(result["results"]["strategies"]) == ["ddp", "zero1", "fsdp2", "fsdp2-no-reshard"]


def test_every_strategy_trains_identically(result):
    s = result["results"]["strategies"]
    ref = s["ddp"]["losses"]
    assert len(ref) == SMALL["warmup"] + 2 * SMALL["steps"] + 1  # warm-up, timed, recorded, census
    assert ref[-1] < ref[0] - 0.05  # it trains (the model memorises its fixed batch)
    for name, st in s.items():
        assert st["losses"] == pytest.approx(ref, abs=LOSS_TOLERANCE), name
    assert result["results"]["parity"]["within_tolerance"] is True
    answer = result["results"]["answer"]
    assert answer.startswith("On this CPU, FSDP2") and "DDP's" in answer and "losses matched" in answer, answer
    assert len(answer.split()) <= 25, answer


def test_held_bytes_follow_the_zero_stages(result):
    s = result["results"]["strategies"]
    n_params = anatomy.param_count(layers=2, hidden=32, vocab=64, seq=16)
    assert all(st["params"] == n_params for st in s.values())
    full = 4 * n_params
    for rk in s["ddp"]["ranks"] + s["zero1"]["ranks"]:
        assert rk["param_bytes"] == rk["grad_bytes"] == full  # replicated weights and gradients
    for rk in s["ddp"]["ranks"]:
        assert rk["optim_bytes"] == 2 * full  # Adam's two FP32 moments of everything
    # ZeRO-1: the moments are split over ranks, whole parameters each, together exactly DDP's
    zero1 = [rk["optim_bytes"] for rk in s["zero1"]["ranks"]]
    assert sum(zero1) == s["ddp"]["ranks"][0]["optim_bytes"]
    slack = 8 * s["zero1"]["largest_param_numel"]
    assert all(abs(b - 2 * full / N) <= slack for b in zero1)
    assert sum(s["zero1"]["owned_numel"]) == n_params
    # FSDP2: weights, gradients and moments all 1/N (dim-0 shards), together exactly the model
    padded = 4 * s["fsdp2"]["padded_shard_numel"]
    for name in ("fsdp2", "fsdp2-no-reshard"):
        ranks = s[name]["ranks"]
        assert sum(rk["param_bytes"] for rk in ranks) == full
        assert sum(rk["grad_bytes"] for rk in ranks) == full
        assert sum(rk["optim_bytes"] for rk in ranks) == 2 * full
        assert all(rk["param_bytes"] <= padded for rk in ranks)
    # between forward and backward: resharded weights stay 1/N, kept ones are whole
    assert all(rk["param_bytes_after_forward"] == rk["param_bytes"] for rk in s["fsdp2"]["ranks"])
    assert all(rk["param_bytes_after_forward"] == full for rk in s["fsdp2-no-reshard"]["ranks"])
    inv = result["results"]["invariants"]
    assert inv["zero1_optim"]["holds"] and inv["fsdp2_params"]["holds"] and inv["fsdp2-no-reshard_params"]["holds"]


def test_bytes_moved_are_the_lessons(result):
    s = result["results"]["strategies"]
    full = 4 * s["ddp"]["params"]

    def moved(name):
        return {c["kind"]: c["bytes"] for c in s[name]["collectives"]}

    assert moved("ddp") == {"all-reduce": full}
    assert moved("zero1") == {"all-reduce": full, "broadcast": full}
    # FSDP2's buffers are padded to N rows per parameter: at least the model, at most the padded shards x N
    padded = N * 4 * s["fsdp2"]["padded_shard_numel"]
    ag, rs = moved("fsdp2")["all-gather"], moved("fsdp2")["reduce-scatter"]
    assert 2 * full <= ag <= 2 * padded and full <= rs <= padded
    assert full <= moved("fsdp2-no-reshard")["all-gather"] <= padded  # one all-gather fewer per unit
    # on a ring each rank sends (N-1)/N of an all-gather's buffer, twice that of an all-reduce's
    assert s["ddp"]["bus_bytes_per_step"] == pytest.approx(full * 2 * (N - 1) / N)
    assert s["fsdp2"]["bus_bytes_per_step"] == pytest.approx((ag + rs) * (N - 1) / N)
    assert s["fsdp2"]["bus_bytes_per_step"] > s["ddp"]["bus_bytes_per_step"]


def test_timelines_show_every_collective_on_every_rank(result, bundle):
    s = result["results"]["strategies"]
    for name, st in s.items():
        ET.fromstring((bundle / st["artifacts"]["timeline"]).read_text())
        trace = json.loads((bundle / st["artifacts"]["trace"]).read_text())
        spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        for rank in range(N):
            comm = [e for e in spans if e["pid"] == rank and e["cat"] == "communication"]
            assert all(e["args"]["bytes"] > 0 for e in comm)
            # one span per collective of the last step (the table's), each with the bytes it moved; earlier
            # steps may hold more (DDP broadcasts its rebuilt bucket order once, in its second iteration)
            last = [e for e in comm if e["args"]["step"] == SMALL["steps"] - 1]
            assert len(last) == sum(c["count"] for c in st["collectives"]), (name, rank)
            assert sum(e["args"]["bytes"] for e in last) == sum(c["bytes"] for c in st["collectives"])
            assert any(e["cat"] == "compute" and e["pid"] == rank for e in spans)
        for rk in st["ranks"]:
            assert rk["communication_ms"] > 0 and rk["step_ms"] > 0
            assert rk["exposed_communication_ms"] == pytest.approx(rk["communication_ms"] - rk["overlap_ms"], abs=1e-9)
    kinds = {e["name"] for e in json.loads((bundle / s["fsdp2"]["artifacts"]["trace"]).read_text())["traceEvents"]}
    assert {"all-gather (forward)", "all-gather (backward)", "reduce-scatter (backward)"} <= kinds


def test_the_app_grades_the_run_and_the_golden_bundle_has_its_shape(result, bundle):
    pytest.importorskip("fastapi")  # the GPU check collects tests/labs without the app's packages
    from labs.checks import check_item
    from labs.checks.common import Source
    from tests.app.test_golden_bundles import shape_differences

    def read(name: str) -> bytes:
        a = next(a for a in result["artifacts"] if a["name"] == name)
        return (bundle / a["path"]).read_bytes()

    item = check_item(
        slot_kind="evidence", lab="zero-fsdp", source=Source("bundle", 1, result, root=bundle, read_artifact=read)
    )
    assert {c["check"]: c["status"] for c in item["checks"]} == {
        "schema": "pass",
        "environment": "info",  # an upload's environment is the learner's claim
        "self-consistent": "info",
        "losses-equal": "pass",
        "zero1-optimizer-shard": "pass",
        "fsdp2-weights-shard": "pass",
        "bytes-moved": "pass",
        "timeline": "pass",
    }
    # and each check fails on the run it guards against
    from labs.zero_fsdp.checks import checks

    def statuses(edit) -> dict:
        bad = copy.deepcopy(result)
        edit(bad["results"]["strategies"])
        return {c["check"]: c["status"] for c in checks("evidence", bad, None)}

    assert (
        statuses(lambda s: s["fsdp2"]["losses"].__setitem__(-1, s["fsdp2"]["losses"][-1] + 0.01))["losses-equal"]
        == "fail"
    )
    assert (
        statuses(lambda s: s["zero1"]["ranks"][0].__setitem__("optim_bytes", s["ddp"]["ranks"][0]["optim_bytes"]))[
            "zero1-optimizer-shard"
        ]
        == "fail"
    )
    assert (
        statuses(lambda s: s["fsdp2"]["ranks"][1].__setitem__("param_bytes", 4 * s["fsdp2"]["params"]))[
            "fsdp2-weights-shard"
        ]
        == "fail"
    )
    assert statuses(lambda s: s["fsdp2"]["collectives"][0].__setitem__("bytes", 1))["bytes-moved"] == "fail"
    golden = catalog.folder("zero-fsdp") / "golden"
    assert shape_differences(json.loads((golden / "result.json").read_text()), result) == []
    assert sorted(p.name for p in golden.iterdir()) == sorted(p.name for p in bundle.iterdir())


@pytest.mark.gpu
def test_the_gpu_path_on_two_gpus(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs: one rank per GPU over NCCL")
    proc = subprocess.run(
        [sys.executable, "-m", "labs", "run", "zero-fsdp", "--params", json.dumps(SMALL), "--out", str(tmp_path)]
        + ["--backend", "torch-cuda"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert validate_result(result) == []
    res = result["results"]
    assert res["timing"]["kind"] == "cuda-events" and res["peak_memory"]["kind"] == "cuda-max-allocated"
    assert res["parity"]["within_tolerance"] and all(inv["holds"] for inv in res["invariants"].values())
    for name, st in res["strategies"].items():
        assert all(rk["peak_bytes"] > 0 and rk["communication_ms"] > 0 for rk in st["ranks"]), name
        assert all(rk["wait_ms"] is None for rk in st["ranks"]), name  # kernels have no wait lane
        assert (tmp_path / f"profile_{name}_rank1.json").is_file()


# ---- fast: the arithmetic and the counting, without ranks ---------------------------------------


@pytest.mark.parametrize(
    "shape", [dict(layers=1, hidden=16, heads=2, vocab=16, seq=8), dict(layers=3, hidden=48, heads=4, vocab=100, seq=5)]
)
def test_param_count_is_the_models(shape):
    from labs.zero_fsdp.model import TinyGPT

    net = TinyGPT(**shape)
    assert anatomy.param_count(
        layers=shape["layers"], hidden=shape["hidden"], vocab=shape["vocab"], seq=shape["seq"]
    ) == sum(p.numel() for p in net.parameters())


def test_anatomy_matches_the_lessons_calculator():
    # the lesson's zero_memory (app/content/calc/memory.py) with FP32 + AdamW bytes: 4 + 4 + 8 per parameter
    assert anatomy.zero_memory(1000, 4, 0) == {
        "param_bytes": 4000,
        "grad_bytes": 4000,
        "optim_bytes": 8000,
        "total_bytes": 16000,
    }
    assert anatomy.zero_memory(1000, 4, 1)["optim_bytes"] == 2000
    assert anatomy.zero_memory(1000, 4, 3)["total_bytes"] == 4000
    calc = pytest.importorskip("app.content.calc.memory")
    for stage in (0, 1, 2, 3):
        ours = anatomy.zero_memory(10**6, 8, stage)["total_bytes"]
        assert ours == pytest.approx(calc.zero_memory(10**6, 8, stage, weights=4, grads=4, optim=8)["bytes"])
    # the ZeRO paper's traffic: DDP 2Ψ, FSDP 3Ψ, without reshard 2Ψ (in bytes each rank sends, large N)
    psi = 4 * 1000
    assert anatomy.predicted_bus_bytes(anatomy.predicted_traffic("ddp", params=1000), 10**6) == pytest.approx(
        2 * psi, rel=1e-5
    )
    assert anatomy.predicted_bus_bytes(anatomy.predicted_traffic("fsdp2", params=1000), 10**6) == pytest.approx(
        3 * psi, rel=1e-5
    )


def test_bad_heads_is_refused_with_the_arithmetic():
    spec = catalog.get("zero-fsdp")
    problems = spec.limits(Params(hidden=30, heads=4), "cpu")
    assert [p.field for p in problems] == ["heads"] and "hidden(30) % heads(4) = 2" in problems[0].message
    assert spec.limits(Params(), "cpu") == []


def test_recorder_counts_a_collectives_full_buffer(tmp_path):
    import torch
    import torch.distributed as dist

    from labs.zero_fsdp.measure import CollectiveRecorder, held_bytes

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        rec = CollectiveRecorder(time_ops=True)
        x, out = torch.ones(10), torch.empty(10)
        with rec:
            dist.all_reduce(x)
            dist.all_gather_into_tensor(out, x)
            y = x * 2
        rec.settle()
        assert [(c["kind"], c["bytes"]) for c in rec.collectives] == [("all-reduce", 40), ("all-gather", 40)]
        assert all(c["done"] is not None and c["done"] >= c["launch"] for c in rec.collectives)
        assert len(rec.ops) >= 1 and y.sum().item() == 20
    finally:
        dist.destroy_process_group()
    net = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(net.parameters())
    net(torch.ones(1, 3)).sum().backward()
    opt.step()
    assert held_bytes(net, opt) == {
        "param_bytes": 32,
        "grad_bytes": 32,
        "optim_bytes": 64,
        "optim_step_counter_bytes": 8,
    }


def test_the_cuda_timeline_splits_profiler_kernels_by_step(tmp_path):
    # A torch.profiler trace in miniature: two ProfilerSteps, each launching a GEMM and an NCCL all-gather that
    # overlap by 1.5 ms; the CUDA path of run.py reads it as it would read a real rank's trace.
    from labs.zero_fsdp import run

    recs = []
    for r in range(2):
        ev = [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": 1000 + n * 10000, "dur": 9000}
            for n in range(2)
        ]
        for n in range(2):
            base = 1000 + n * 10000
            for i, (name, start) in enumerate(
                (("ampere_sgemm_128x64", 500), ("ncclDevKernel_AllGather_RING_LL", 2000))
            ):
                corr = 10 * n + i
                ev.append(
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "ts": base + 100,
                        "dur": 5,
                        "args": {"correlation": corr},
                    }
                )
                ev.append(
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": name,
                        "ts": base + start,
                        "dur": 3000,
                        "args": {"correlation": corr},
                    }
                )
        (tmp_path / f"p{r}.json").write_text(json.dumps({"traceEvents": ev}))
        recs.append({"profile": str(tmp_path / f"p{r}.json")})
    spans, rows = run._timeline_cuda(recs)
    assert sorted({s.args["step"] for s in spans}) == [0, 1] and len(spans) == 8
    assert {s.lane for s in spans} == {"compute", "communication"}
    for row in rows:
        assert row["communication_ms"] == pytest.approx(3.0) and row["overlap_ms"] == pytest.approx(1.5)
        assert row["overlap_ratio"] == pytest.approx(0.5)
        assert row["wait_ms"] is None  # a spinning NCCL kernel is not a wait lane: unknown, not zero


STEPS = 2


def _train_one_strategy(rank: int, world: int, out_dir: str) -> dict:
    import torch

    from labs.zero_fsdp.run import train

    params = Params(**{**SMALL, "steps": STEPS, "warmup": 1})
    rec = train(rank, world, params, "fsdp2", torch.device("cpu"), None, Path(out_dir) / f"profile_rank{rank}.json")
    return {"step_ms": rec["step_ms"], "per_step": len(rec["per_step"]), "losses": len(rec["losses"])}


def test_the_recorder_and_the_profiler_stay_out_of_the_timed_steps(tmp_path):
    """The GPU path's structure on CPU (the profiler records CPU ops here): every GEMM in the trace is inside one
    of the recorded window's steps, so the warm-up, timed and census steps ran unprofiled, and the recorder's
    tally covers that window's steps only."""
    from labs.parallel import dist as labdist
    from labs.trace.kernels import profiler_steps

    recs = labdist.launch(_train_one_strategy, N, args=(str(tmp_path),), timeout_s=180)
    for rank, rec in enumerate(recs):
        assert len(rec["step_ms"]) == STEPS and rec["per_step"] == STEPS
        assert rec["losses"] == 1 + 2 * STEPS + 1  # warm-up, timed, recorded, census: every loss kept
        trace = json.loads((tmp_path / f"profile_rank{rank}.json").read_text())
        windows = profiler_steps(trace)
        assert [n for n, _, _ in windows] == list(range(STEPS))
        gemms = [e["ts"] / 1e3 for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("name") == "aten::mm"]
        per_window = [sum(a <= t <= b for t in gemms) for _, a, b in windows]
        assert gemms and sum(per_window) == len(gemms) and len(set(per_window)) == 1, per_window
