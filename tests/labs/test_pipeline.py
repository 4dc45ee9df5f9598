"""pipeline: torch.distributed.pipelining's four schedules on 2 gloo ranks, one real run shared by every assert,
plus the bubble arithmetic and the schedule replay on their own."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from labs.pipeline import analysis
from labs.pipeline.params import Params, limits
from labs.runtime import validate_result
from tests.labs import runs

# A few seconds of CPU, with micro-batches big enough (256 x 512) that a stage's GEMMs (~5-10 ms) outweigh a
# gloo send (~0.3 ms) and a wake-up on a busy machine.
SMALL = {"ranks": 2, "microbatches": 4, "layers": 4, "width": 512, "microbatch_rows": 256, "steps": 2, "warmup": 1}
# The controlled model: the run's own action order, each action costing the thread CPU time it measured (which
# other processes on the shared cores cannot inflate) and p2p free. It lands above the uniform-stage formula by
# the stages' imbalance (the last stage also computes the loss, the first skips its input gradient): 0.01-0.09
# for all four schedules at load 13 on this 2-core machine while writing this lab. BAND holds it there.
BAND = 0.15
# Wall-clock idle adds p2p latency, wake-ups and other processes' time on the cores (0.3-0.7 above the formula at
# load 13), so it is held only from below: the spans cannot show less idle than the schedule forces, up to
# timer edges.
BELOW = 0.05


@pytest.fixture(scope="module")
def run():
    return runs.run("pipeline", SMALL)


@pytest.fixture(scope="module")
def res(run):
    return run.result["results"]


def _order(ranks: list[dict]) -> dict:
    pat = re.compile(r"(\d+)([FBIW])(\d+)")
    return {
        r["rank"]: [(int(s), k, int(m)) for s, k, m in (pat.fullmatch(a).groups() for a in r["ran"])] for r in ranks
    }


def test_the_run_validates_and_draws_every_schedule(run, res):
    assert validate_result(run.result) == []
    assert list(res["schedules"]) == ["gpipe", "1f1b", "interleaved-1f1b", "zero-bubble"]
    for name, s in res["schedules"].items():
        assert [r["rank"] for r in s["ranks"]] == [0, 1]
        ET.fromstring((run.out / s["artifacts"]["timeline"]).read_text())
        assert (run.out / s["artifacts"]["trace"]).is_file(), name
    assert run.result["environment"]["emulated"] is True
    assert res["answer"].startswith("With p = 2, m = 4, GPipe idled") and len(res["answer"].split()) <= 40


def test_pipelined_loss_and_gradients_equal_the_unpipelined_model(res):
    for name, s in res["schedules"].items():
        assert s["loss"] == pytest.approx(res["reference_loss"], rel=1e-5), name
        assert s["max_grad_rel_err"] <= 1e-4, name


def test_each_rank_ran_every_action_once_and_the_runtime_schedules_ran_their_plan(res):
    m = SMALL["microbatches"]
    for name, s in res["schedules"].items():
        kinds = {"zero-bubble": "FIW"}.get(name, "FB")
        for r in s["ranks"]:
            want = sorted(f"{st}{k}{mb}" for st in r["stages"] for k in kinds for mb in range(m))
            assert sorted(r["ran"]) == want, (name, r["rank"])
        if name in ("gpipe", "interleaved-1f1b", "zero-bubble"):
            # these execute pipeline_order as listed; Schedule1F1B's plan in torch 2.13 lists its last rank
            # off by one micro-batch (1F1 .. 1F4), so its plan is shown but not held to
            assert all(r["ran"] == r["plan"] for r in s["ranks"]), name
    assert all(r["weight_grad_ms"] > 0 for r in res["schedules"]["zero-bubble"]["ranks"])
    assert all(r["weight_grad_ms"] == 0 for r in res["schedules"]["1f1b"]["ranks"])


def test_1f1b_holds_fewer_microbatches_of_activations_than_gpipe(res):
    g, o = res["schedules"]["gpipe"], res["schedules"]["1f1b"]
    for r in g["ranks"] + o["ranks"]:
        assert r["peak_microbatches_in_flight"] == r["expected_peak_in_flight"]
    assert (
        g["peak_microbatches_in_flight"] == SMALL["microbatches"] > o["peak_microbatches_in_flight"] == SMALL["ranks"]
    )
    # one micro-batch saves the same bytes under both; GPipe keeps m of them, 1F1B p
    per_mb = g["ranks"][0]["activation_bytes_per_microbatch"]
    assert per_mb == o["ranks"][0]["activation_bytes_per_microbatch"] > 0
    assert g["peak_activation_bytes"] >= o["peak_activation_bytes"]
    assert g["ranks"][0]["peak_activation_bytes"] == SMALL["microbatches"] * per_mb


def test_sends_count_one_activation_and_one_gradient_per_stage_boundary_and_microbatch(res):
    m = SMALL["microbatches"]
    for name, s in res["schedules"].items():
        assert s["sends_per_step"] == 2 * m * (s["stages"] - 1), name
    i, o = res["schedules"]["interleaved-1f1b"], res["schedules"]["1f1b"]
    assert i["sends_per_step"] == 3 * o["sends_per_step"]  # v = 2: 2p - 1 = 3 boundaries instead of p - 1 = 1
    assert i["send_bytes_per_step"] == 3 * o["send_bytes_per_step"]


def test_the_orders_that_ran_give_the_formulas_at_uniform_stage_cost(res):
    """The controlled model: the executed orders replayed with F = 1, B = 2 and free p2p."""
    for name, s in res["schedules"].items():
        assert analysis.uniform_bubble(_order(s["ranks"])) == pytest.approx(s["schedule_bubble_fraction"])
        if s["formula_step_fraction"] is not None:
            assert s["schedule_bubble_fraction"] == pytest.approx(s["formula_step_fraction"], abs=1e-9), name
    sch = {n: s["schedule_bubble_fraction"] for n, s in res["schedules"].items()}
    assert sch["zero-bubble"] < sch["interleaved-1f1b"] < sch["1f1b"] == sch["gpipe"]


def test_measured_bubble_lies_in_the_stated_band_around_the_schedule(res):
    for name, s in res["schedules"].items():
        want = s["schedule_bubble_fraction"]  # = the formula where there is one (test above)
        assert abs(s["simulated_bubble_fraction"] - want) <= BAND, (name, s["simulated_bubble_fraction"], want)
        assert s["bubble_fraction"] >= max(want, s["simulated_bubble_fraction"]) - BELOW, (name, s["bubble_fraction"])
        for r in s["ranks"]:
            assert r["idle_ms"] == pytest.approx(r["step_ms"] - r["busy_ms"], abs=1e-6)


@pytest.mark.gpu
def test_the_four_schedules_on_two_gpus_over_nccl():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs: NCCL p2p between two pipeline ranks")
    done = runs.run("pipeline", {**SMALL, "width": 1024}, backend="torch-cuda")
    res = done.result["results"]
    assert res["timing"]["kind"] == "cuda-events"
    for name, s in res["schedules"].items():
        # cuBLAS picks its own summation order per shape: looser than the CPU's 1e-4, far below a wrong stage
        assert s["max_grad_rel_err"] <= 1e-3, name
        assert s["sends_per_step"] == 2 * SMALL["microbatches"] * (s["stages"] - 1), name


# ---- the arithmetic on its own ------------------------------------------------------------------


@pytest.mark.parametrize(("p", "m"), [(2, 1), (2, 4), (4, 8), (8, 3)])
def test_gpipe_and_1f1b_orders_idle_exactly_the_formula(p, m):
    gpipe = {r: [(r, "F", i) for i in range(m)] + [(r, "B", i) for i in range(m)] for r in range(p)}
    one_f_one_b = {}
    for r in range(p):
        warm = min(m, p - r)  # torch's Schedule1F1B: p - rank forwards, then backward / forward in turn
        acts = [(r, "F", i) for i in range(warm)]
        for i in range(m):
            acts.append((r, "B", i))
            if warm + i < m:
                acts.append((r, "F", warm + i))
        one_f_one_b[r] = acts
    for order in (gpipe, one_f_one_b):
        assert analysis.uniform_bubble(order) == pytest.approx(analysis.bubble_step_fraction(p, m))
    f = analysis.bubble_step_fraction(p, m)
    assert analysis.bubble_over_ideal(p, m) == pytest.approx(f / (1 - f))  # the two definitions, one idle time


def test_a_deadlocking_order_is_refused_with_the_waiting_actions():
    order = {0: [(0, "B", 0), (0, "F", 0)], 1: [(1, "F", 0), (1, "B", 0)]}
    with pytest.raises(ValueError, match="deadlocks"):
        analysis.simulate(order, {(s, k): 1.0 for s in (0, 1) for k in "FB"})


def test_in_flight_counts_until_the_last_backward_action():
    acts = [
        analysis.Action(0, "F", 0, 0, 1, 10),
        analysis.Action(0, "F", 1, 1, 2, 10),
        analysis.Action(0, "I", 0, 2, 3),
        analysis.Action(0, "F", 2, 3, 4, 10),  # mb 0 is still held: its W has not run
        analysis.Action(0, "W", 0, 4, 5),
    ]
    assert analysis.in_flight(acts) == {"peak_microbatches": 3, "peak_bytes": 30}
    assert analysis.gaps(acts[:2], (0, 3)) == [(2, 3)]


def test_a_long_action_list_is_cut_to_one_table_cell():
    MAX_TEXT = pytest.importorskip("app.web.views.result_excerpt").MAX_TEXT  # the page's cut
    from labs.pipeline.report import _cell

    ran = " ".join(f"{s}{k}{m}" for m in range(64) for s in (0, 4, 8, 12) for k in "FIW")
    cut = _cell(ran)
    assert len(cut) <= MAX_TEXT and cut.endswith(" …") and ran.startswith(cut[:-2])
    assert _cell("0F0 0B0") == "0F0 0B0"


def test_limits_show_the_arithmetic():
    p = Params.model_validate({"layers": 6})
    assert [x.field for x in limits(p, "cpu")] == ["layers"]
    assert "= 4 stages; layers % 4 = 2" in limits(p, "cpu")[0].message
    p = Params.model_validate({"ranks": 4, "microbatches": 9, "layers": 8, "schedules": ["zero-bubble"]})
    (problem,) = limits(p, "cpu")
    assert problem.field == "microbatches" and "= 2 rounds; m % 2 = 1, must be 0" in problem.message
    assert (
        limits(Params.model_validate({"ranks": 4, "microbatches": 9, "layers": 8, "schedules": ["gpipe"]}), "cpu") == []
    )


def test_on_cpu_a_step_spans_every_ranks_clock_and_on_cuda_no_clock_is_compared_across_ranks():
    from labs.pipeline.run import step_frames

    # Rank 1's times are its own host origin plus its events: on CUDA they could be anywhere against rank 0's.
    steps = [[(100.0, 110.0), (120.0, 128.0)], [(5000.0, 5012.0), (5020.0, 5029.0)]]
    shifts, windows = step_frames(steps, "cuda")
    assert windows == [(0.0, 12.0), (12.0, 21.0)]  # each step as long as its slowest rank, laid end to end
    assert shifts == [[100.0, 108.0], [5000.0, 5008.0]]  # every rank starts each step at the window's start
    # One host clock (CPU): first start to last end, the ranks where they were.
    shared = [[(100.0, 110.0), (120.0, 128.0)], [(101.0, 112.0), (121.0, 127.0)]]
    shifts, windows = step_frames(shared, "cpu")
    assert shifts == [[100.0, 100.0], [100.0, 100.0]] and windows == [(0.0, 12.0), (20.0, 28.0)]
