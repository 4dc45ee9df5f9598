"""The context-parallel lab's evidence checks (labs/context_parallel/checks.py) on its golden bundle and
on edits of it that break one claim each. No lab run: the golden bundle is a real run with labruns' TINY
parameters (2 ranks, 32 tokens)."""

from __future__ import annotations

import copy
import json

import pytest

from labs import catalog
from labs.context_parallel import checks

GOLDEN = catalog.folder("context-parallel") / "golden"


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads((GOLDEN / "result.json").read_text())


def _read(name: str) -> bytes:
    return (GOLDEN / f"{name}.json").read_bytes()


def _by_name(result: dict, read=None) -> dict:
    return {c["check"]: c for c in checks.checks("evidence", result, read)}


def test_the_golden_run_passes_every_check(golden):
    got = _by_name(golden, _read)
    assert {n: c["status"] for n, c in got.items()} == {
        "parity": "pass",
        "balance": "pass",
        "bytes": "pass",
        "overlap": "pass",
        "every-rank": "pass",
    }
    assert "3.0x the idlest's chunk pairs split contiguously, 1.00x zig-zag" in got["balance"]["sentence"]


def test_an_output_off_full_attention_fails_parity(golden):
    bad = copy.deepcopy(golden)
    bad["results"]["variants"]["ring-contiguous"]["max_abs_err"] = 0.02
    got = _by_name(bad)["parity"]
    assert got["status"] == "fail" and "ring-contiguous (2.0e-02)" in got["sentence"]


def test_a_gradient_off_full_attention_fails_parity(golden):
    bad = copy.deepcopy(golden)
    bad["results"]["backward"]["max_rel_err_dk"] = 0.5
    got = _by_name(bad)["parity"]
    assert got["status"] == "fail" and "dQ, dK, dV" in got["sentence"] and "5.0e-01" in got["sentence"]


def test_an_unbalanced_zigzag_or_a_balanced_causal_contiguous_split_fails(golden):
    bad = copy.deepcopy(golden)
    bad["results"]["variants"]["ring-zigzag"]["work_imbalance"] = 1.5
    assert _by_name(bad)["balance"]["status"] == "fail"
    flat = copy.deepcopy(golden)
    flat["results"]["variants"]["ring-contiguous"]["work_imbalance"] = 1.0
    got = _by_name(flat)["balance"]
    assert got["status"] == "fail" and "mask was not applied" in got["sentence"]
    unmasked = copy.deepcopy(flat)
    unmasked["results"]["causal"] = False
    assert _by_name(unmasked)["balance"]["status"] == "info"


def test_bytes_off_the_formula_fail(golden):
    bad = copy.deepcopy(golden)
    bad["results"]["variants"]["ulysses"]["send_bytes_per_rank"] += 4
    got = _by_name(bad)["bytes"]
    assert got["status"] == "fail" and "ulysses" in got["sentence"]


def test_a_ring_without_overlap_fails_the_overlap_check(golden):
    bad = copy.deepcopy(golden)
    bad["results"]["variants"]["ring-zigzag"]["overlap_ratio"] = 0.0
    assert _by_name(bad)["overlap"]["status"] == "fail"


def test_a_trace_missing_a_rank_fails_coverage(golden):
    def read(name: str) -> bytes:
        doc = json.loads(_read(name))
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("pid") != 1]
        return json.dumps(doc).encode()

    got = _by_name(golden, read)["every-rank"]
    assert got["status"] == "fail" and "expected every rank 0..1" in got["sentence"]
