"""Automatic evidence checks over real lab results (made by `python -m labs run` with tiny CPU params),
and over copies of them changed the way a broken run or a hand-edited bundle would be."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from labs import catalog, checks
from labs.checks import Source, check_item
from tests.labs import runs


def _source(lab: str, result: dict | None = None, kind: str = "bundle", read=True) -> Source:
    root = runs.golden(lab)
    result = result if result is not None else runs.golden_result(lab)

    def read_artifact(name: str) -> bytes:
        a = next((a for a in result["artifacts"] if a["name"] == name), None)
        if a is None or not (root / a["path"]).is_file():
            raise checks.ArtifactUnreadable(f"{name} is missing from the bundle")
        return (root / a["path"]).read_bytes()

    return Source(kind=kind, id=7, result=result, root=root, read_artifact=read_artifact if read else None)


def _by_name(item: dict) -> dict[str, dict]:
    return {c["check"]: c for c in item["checks"]}


@pytest.mark.parametrize(
    "slot_kind,lab,expected",
    [
        ("evidence", "env-check", {"schema", "environment", "fp8-recipes", "smoke-test"}),
        ("evidence", "fp8-step", {"schema", "environment", "same-seed-steps", "loss-tracks", "clipping-scales"}),
        ("fallback", "fp8-step", {"schema", "environment", "recipe", "shapes", "labelled"}),
        ("evidence", "tp-sweep", {"schema", "environment", "tp-baseline", "rank-mapping", "tp-parity"}),
        ("evidence", "overlap-trace", {"schema", "environment", "immediate-near-zero", "windowed-more", "every-rank"}),
    ],
)
def test_real_cpu_results_pass_and_say_they_are_emulated(slot_kind, lab, expected):
    item = check_item(slot_kind=slot_kind, lab=lab, source=_source(lab))
    names = _by_name(item)
    assert set(names) == expected | {"self-consistent"}  # an upload: its claims are checked against each other
    assert item["emulated"] is True and "CPU emulation" in item["label"] and item["uploaded"] is True
    assert "CPU emulation" in names["environment"]["sentence"] and "self-reported" in names["environment"]["sentence"]
    assert names["environment"]["status"] == names["self-consistent"]["status"] == "info"
    job = _by_name(check_item(slot_kind=slot_kind, lab=lab, source=_source(lab, kind="job")))
    assert set(job) == expected and job["environment"]["status"] == "pass"  # the course's own run
    assert "(CPU emulation)" in job["environment"]["sentence"]
    hard = {
        "schema",
        "same-seed-steps",
        "loss-tracks",
        "clipping-scales",
        "tp-parity",
        "rank-mapping",
        "every-rank",
        "immediate-near-zero",
        "recipe",
        "shapes",
        "labelled",
        "fp8-recipes",
        "smoke-test",
        "tp-baseline",
    }
    for name in expected & hard:
        assert names[name]["status"] == "pass", names[name]
    # "windowed-more" compares two CPU timings of this very run, so its outcome is the machine's; each of its
    # outcomes is pinned down on a constructed result in test_windowed_overlap_* below.
    for c in item["checks"]:
        assert c["sentence"].endswith((".", ")")) and c["status"] in checks.STATUSES


def _with_overlap(immediate: float, windowed: float, emulated: bool = True) -> dict:
    result = copy.deepcopy(runs.golden_result("overlap-trace"))
    for name, ratio in (("immediate", immediate), ("windowed", windowed)):
        for rank in result["results"]["schedules"][name]["ranks"]:
            rank["overlap_ratio"] = ratio
    result["environment"]["emulated"] = emulated
    return result


def _windowed(result: dict) -> dict:
    return _by_name(check_item(slot_kind="evidence", lab="overlap-trace", source=_source("overlap-trace", result)))[
        "windowed-more"
    ]


def test_windowed_overlap_above_immediate_passes():
    c = _windowed(_with_overlap(immediate=0.01, windowed=0.6))
    assert c["status"] == "pass" and "60.0% vs 1.0%" in c["sentence"]


def test_windowed_overlap_not_above_immediate_warns_on_cpu():
    c = _windowed(_with_overlap(immediate=0.02, windowed=0.02))
    assert c["status"] == "warn" and "gloo's thread can hide the window" in c["sentence"]


def test_windowed_overlap_not_above_immediate_fails_on_a_gpu():
    c = _windowed(_with_overlap(immediate=0.02, windowed=0.01, emulated=False))
    assert c["status"] == "fail" and "may not be independent" in c["sentence"]


def _with_times(times: list[tuple[float, float]]) -> dict:
    result = copy.deepcopy(runs.golden_result("tp-sweep"))
    degrees = result["results"]["degrees"]
    for d, (gemm, coll) in zip(degrees, times):
        d["local_gemm_ms"], d["collective_ms"] = gemm, coll
    return result


def test_stretch_sweep_with_two_degrees_warns_and_the_crossing_is_information():
    result = _with_times([(4.0, 0.0), (2.0, 3.0)])
    item = check_item(slot_kind="stretch", lab="tp-sweep", source=_source("tp-sweep", result))
    names = _by_name(item)
    assert names["sweep-width"]["status"] == "warn" and "three or more" in names["sweep-width"]["sentence"]
    over = names["oversharding"]
    assert over["status"] == "info" and "overtakes local GEMM time from TP=2 (CPU timings)" in over["sentence"]
    assert item["status"] == "warn"  # from sweep-width alone: information never moves the roll-up


def test_a_sweep_where_collectives_never_overtake_says_so_as_information():
    result = _with_times([(4.0, 0.0), (2.0, 1.0)])
    over = _by_name(check_item(slot_kind="stretch", lab="tp-sweep", source=_source("tp-sweep", result)))["oversharding"]
    assert over["status"] == "info" and "never overtakes" in over["sentence"]


def test_every_catalog_lab_has_its_checks_registered():
    assert set(checks.REGISTRY) == set(catalog.names())
    for lab in catalog.names():  # and each registered entry really is the checks module in that lab's folder
        assert checks.REGISTRY[lab].__module__ == f"labs.{catalog.folder(lab).name}.checks"


def test_fp8_loss_that_diverges_fails_and_one_that_drifts_warns():
    bad = copy.deepcopy(runs.golden_result("fp8-step"))
    bad["results"]["runs"]["fp8"]["loss"][-1] *= 1.5
    c = _by_name(check_item(slot_kind="evidence", lab="fp8-step", source=_source("fp8-step", bad)))["loss-tracks"]
    assert (
        c["status"] == "fail"
        and "50.0" in c["sentence"]
        and "step 3" in c["sentence"]
        and "tolerance 5%" in c["sentence"]
    )
    drift = copy.deepcopy(runs.golden_result("fp8-step"))
    drift["results"]["runs"]["fp8"]["loss"][1] = drift["results"]["runs"]["reference"]["loss"][1] * 1.08
    assert (
        _by_name(check_item(slot_kind="evidence", lab="fp8-step", source=_source("fp8-step", drift)))["loss-tracks"][
            "status"
        ]
        == "warn"
    )
    nan = copy.deepcopy(runs.golden_result("fp8-step"))
    nan["results"]["runs"]["fp8"]["loss"][2] = float("nan")
    c = _by_name(check_item(slot_kind="evidence", lab="fp8-step", source=_source("fp8-step", nan)))["loss-tracks"]
    assert c["status"] == "fail" and "step 2" in c["sentence"]


def test_fp8_runs_of_different_length_and_missing_scale_history_fail():
    bad = copy.deepcopy(runs.golden_result("fp8-step"))
    bad["results"]["runs"]["fp8"]["loss"] = bad["results"]["runs"]["fp8"]["loss"][:2]
    bad["results"]["quantizers"] = []
    names = _by_name(check_item(slot_kind="evidence", lab="fp8-step", source=_source("fp8-step", bad)))
    assert names["same-seed-steps"]["status"] == "fail" and "FP8 2" in names["same-seed-steps"]["sentence"]
    assert names["clipping-scales"]["status"] == "fail" and "scale history" in names["clipping-scales"]["sentence"]


def test_tp_parity_outside_the_named_tolerance_fails():
    bad = copy.deepcopy(runs.golden_result("tp-sweep"))
    bad["results"]["degrees"][1]["parity"]["max_rel_diff"] = 3e-3
    c = _by_name(check_item(slot_kind="evidence", lab="tp-sweep", source=_source("tp-sweep", bad)))["tp-parity"]
    assert c["status"] == "fail" and "FP32_REORDER" in c["sentence"] and "difference 0.003 at TP=2" in c["sentence"]
    no_mapping = copy.deepcopy(runs.golden_result("tp-sweep"))
    no_mapping["results"]["degrees"][1]["ranks"] = no_mapping["results"]["degrees"][1]["ranks"][:1]
    c = _by_name(check_item(slot_kind="evidence", lab="tp-sweep", source=_source("tp-sweep", no_mapping)))[
        "rank-mapping"
    ]
    assert c["status"] == "fail" and "TP=[2]" in c["sentence"]


def test_overlap_judgement_fails_on_a_gpu_and_warns_on_cpu():
    bad = copy.deepcopy(runs.golden_result("overlap-trace"))
    # Both schedules' ratios are set here: the recorded CPU run's own windowed overlap depends on how busy
    # the cores were when it ran, and under load it can pass 40%.
    for rank in bad["results"]["schedules"]["immediate"]["ranks"]:
        rank["overlap_ratio"] = 0.4
    for rank in bad["results"]["schedules"]["windowed"]["ranks"]:
        rank["overlap_ratio"] = 0.3
    names = _by_name(check_item(slot_kind="evidence", lab="overlap-trace", source=_source("overlap-trace", bad)))
    assert names["immediate-near-zero"]["status"] == "warn" and "CPU" in names["immediate-near-zero"]["sentence"]
    assert names["windowed-more"]["status"] == "warn"
    gpu = copy.deepcopy(bad)
    gpu["environment"]["emulated"] = False
    names = _by_name(check_item(slot_kind="evidence", lab="overlap-trace", source=_source("overlap-trace", gpu)))
    assert names["immediate-near-zero"]["status"] == "fail" and names["windowed-more"]["status"] == "fail"
    assert "30.0% vs 40.0%" in names["windowed-more"]["sentence"]
    good = copy.deepcopy(gpu)
    for name, ratio in (("immediate", 0.01), ("windowed", 0.6)):
        for rank in good["results"]["schedules"][name]["ranks"]:
            rank["overlap_ratio"] = ratio
    names = _by_name(check_item(slot_kind="evidence", lab="overlap-trace", source=_source("overlap-trace", good)))
    assert names["immediate-near-zero"]["status"] == "pass" and names["windowed-more"]["status"] == "pass"


def test_timeline_missing_a_rank_fails_and_an_unreadable_trace_is_not_gradable():
    bad = copy.deepcopy(runs.golden_result("overlap-trace"))
    bad["results"]["schedules"]["windowed"]["ranks"][1]["rank"] = 0  # rank 1's row went missing
    c = _by_name(check_item(slot_kind="evidence", lab="overlap-trace", source=_source("overlap-trace", bad)))[
        "every-rank"
    ]
    assert c["status"] == "fail" and "windowed" in c["sentence"]
    gone = copy.deepcopy(runs.golden_result("overlap-trace"))
    trace = gone["results"]["schedules"]["immediate"]["artifacts"]["trace"]
    for a in gone["artifacts"]:
        if a["path"] == trace:
            a["path"] = "no-such-trace.json"
    item = check_item(slot_kind="evidence", lab="overlap-trace", source=_source("overlap-trace", gone))
    assert _by_name(item)["every-rank"]["status"] == "not_gradable" and item["status"] == "not_gradable"


def test_trace_without_spans_for_a_rank_fails(tmp_path):
    root = shutil.copytree(runs.golden("overlap-trace"), tmp_path / "b")
    result = runs.golden_result("overlap-trace")
    path = root / result["results"]["schedules"]["windowed"]["artifacts"]["trace"]
    trace = json.loads(path.read_text())
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("pid") != 1]
    path.write_text(json.dumps(trace))

    def read(name):
        a = next(a for a in result["artifacts"] if a["name"] == name)
        return (root / a["path"]).read_bytes()

    item = check_item(
        slot_kind="evidence",
        lab="overlap-trace",
        source=Source(kind="bundle", id=1, result=result, root=root, read_artifact=read),
    )
    c = _by_name(item)["every-rank"]
    assert c["status"] == "fail" and "ranks [0]" in c["sentence"]


def test_infrastructure_problems_are_not_gradable_never_failed():
    failed = check_item(
        slot_kind="evidence",
        lab="fp8-step",
        source=Source(kind="job", id=3, problem="the job failed: The lab process crashed (SIGSEGV, signal 11)"),
    )
    assert failed["status"] == "not_gradable" and "SIGSEGV" in failed["checks"][0]["sentence"]
    broken = copy.deepcopy(runs.golden_result("env-check"))
    del broken["environment"]
    as_job = check_item(slot_kind="evidence", lab="env-check", source=_source("env-check", broken, kind="job"))
    assert as_job["status"] == "not_gradable" and "schema" in as_job["checks"][0]["sentence"]
    as_upload = check_item(slot_kind="evidence", lab="env-check", source=_source("env-check", broken, kind="bundle"))
    assert as_upload["status"] == "fail" and "environment" in as_upload["checks"][0]["sentence"]


def test_wrong_lab_and_missing_items():
    item = check_item(slot_kind="evidence", lab="tp-sweep", source=_source("env-check"))
    assert item["status"] == "fail" and "needs a tp-sweep result" in item["checks"][-1]["sentence"]
    required = check_item(slot_kind="evidence", lab="tp-sweep", source=None)
    optional = check_item(slot_kind="stretch", lab="tp-sweep", source=None)
    assert required["status"] == optional["status"] == "missing"
    assert required["checks"][0]["status"] == "fail" and optional["checks"][0]["status"] == "warn"
