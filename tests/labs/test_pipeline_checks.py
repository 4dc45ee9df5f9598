"""The pipeline lab's evidence checks (labs/pipeline/checks.py) on its golden bundle and on edits of it
that break one claim each. No lab run: the golden bundle is a real run with labruns' TINY parameters."""

from __future__ import annotations

import copy
import json

import pytest

from labs import catalog
from labs.pipeline import checks

GOLDEN = catalog.folder("pipeline") / "golden"


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads((GOLDEN / "result.json").read_text())


def _read(name: str) -> bytes:
    return (GOLDEN / f"{name}.json").read_bytes()


def _by_name(result: dict, read=None) -> dict:
    return {c["check"]: c for c in checks.checks("evidence", result, read)}


def test_the_golden_run_passes_parity_memory_interleaving_and_rank_coverage(golden):
    got = _by_name(golden, _read)
    for name in ("parity", "activations", "interleaving-cost", "every-rank"):
        assert got[name]["status"] == "pass", got[name]
    # the tiny golden run is all overhead: 4-row micro-batches idle far above the formula, said as a warning
    assert got["bubble-gpipe"]["status"] == "warn" and "overhead dominates" in got["bubble-gpipe"]["sentence"]
    assert "bubble-zero-bubble" not in got  # no closed form to hold it to


def test_a_gradient_off_the_unpipelined_model_fails_parity(golden):
    bad = copy.deepcopy(golden)
    bad["results"]["schedules"]["1f1b"]["max_grad_rel_err"] = 3e-3
    c = _by_name(bad)["parity"]
    assert c["status"] == "fail" and "3.0e-03" in c["sentence"]


def test_gpipe_holding_fewer_microbatches_than_1f1b_fails(golden):
    bad = copy.deepcopy(golden)
    bad["results"]["schedules"]["gpipe"]["peak_microbatches_in_flight"] = 1
    assert _by_name(bad)["activations"]["status"] == "fail"
    del bad["results"]["schedules"]["1f1b"]
    got = _by_name(bad)
    assert got["activations"]["status"] == "fail" and "Run both" in got["activations"]["sentence"]
    assert got["interleaving-cost"]["status"] == "info"


def test_bubble_below_the_formula_fails_and_near_it_passes(golden):
    r = copy.deepcopy(golden)
    s = r["results"]["schedules"]["gpipe"]
    s["bubble_fraction"] = s["formula_step_fraction"] - 0.1
    assert _by_name(r)["bubble-gpipe"]["status"] == "fail"
    s["bubble_fraction"] = s["formula_step_fraction"] + 0.1
    c = _by_name(r)["bubble-gpipe"]
    assert c["status"] == "pass" and "10.0% more is p2p" in c["sentence"]


def test_a_trace_missing_a_rank_fails_coverage(golden):
    def read(name: str) -> bytes:
        doc = json.loads(_read(name))
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("pid") != 1]
        return json.dumps(doc).encode()

    c = _by_name(golden, read)["every-rank"]
    assert c["status"] == "fail" and "expected every rank 0..1" in c["sentence"]
