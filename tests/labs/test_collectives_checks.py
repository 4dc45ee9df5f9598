"""collectives' evidence checks on its golden bundle (4 gloo ranks, 2 emulated nodes) and on edited copies that
must fail: a hierarchy that changed the sums, a node egress far from the model, a cross-node link no slower."""

import copy

from labs.checks.common import ArtifactUnreadable
from labs.collectives import checks as collectives
from tests.labs import runs


def _read(result):
    root = runs.golden("collectives")

    def read(name: str) -> bytes:
        a = next((a for a in result["artifacts"] if a["name"] == name), None)
        if a is None:
            raise ArtifactUnreadable(f"{name} is missing")
        return (root / a["path"]).read_bytes()

    return read


def _golden():
    import json

    return json.loads((runs.golden("collectives") / "result.json").read_text())


def _status(result) -> dict:
    return {c["check"]: c["status"] for c in collectives.checks("evidence", result, _read(result))}


def test_the_golden_run_passes_every_check_but_the_fit():
    got = _status(_golden())
    got.pop("alpha-beta-fit")  # CPU timings of a few sizes scatter: test_the_fit_check_judges_the_rms below
    assert got == {
        "busbw-rises": "pass",
        "hierarchy-parity": "pass",
        "cross-node-slower": "pass",
        "egress-flat": "pass",
        "egress-hierarchical": "pass",
        "every-rank": "pass",
    }


def test_the_fit_check_judges_the_rms_residual_and_forgives_cpu_timings():
    r = copy.deepcopy(_golden())
    fits = [c["fit"] for sw in r["results"]["sweeps"] for c in sw["collectives"]]
    for f in fits:
        f["rms_residual"] = 0.1
    assert _status(r)["alpha-beta-fit"] == "pass"
    fits[-1]["rms_residual"] = 0.9
    assert _status(r)["alpha-beta-fit"] == "warn"  # emulated on CPU
    r["environment"]["emulated"] = False
    assert _status(r)["alpha-beta-fit"] == "fail"


def test_edited_results_fail_what_they_break():
    r = copy.deepcopy(_golden())
    res = r["results"]
    res["hierarchy"]["max_abs_diff"] = 2.0
    res["hierarchy"]["egress"]["measured_flat_bytes"] = 3 * res["hierarchy"]["egress"]["predicted_flat_bytes"]
    scopes = {s["scope"]: s for s in res["scopes"]}
    scopes["cross-node"]["time_ms"] = scopes["intra-node"]["time_ms"] / 2
    got = _status(r)
    assert got["hierarchy-parity"] == "fail"
    assert got["egress-flat"] == "warn"
    assert got["cross-node-slower"] == "fail"
    assert got["egress-hierarchical"] == "pass"


def test_a_flat_run_says_why_there_are_no_node_checks():
    r = copy.deepcopy(_golden())
    r["results"]["topology"] |= {"mode": "flat", "note": "one node: nothing to emulate"}
    checks = collectives.checks("evidence", r, _read(r))
    info = [c for c in checks if c["check"] == "emulated-nodes"]
    assert info and info[0]["status"] == "info" and "one node" in info[0]["sentence"]
    assert not any(c["check"].startswith("egress") for c in checks)
