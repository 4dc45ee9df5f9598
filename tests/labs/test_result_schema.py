"""result.json's contract: the models validate real results, refuse broken ones naming the path, and the
committed labs/schema/result.schema.json is exactly what the models generate."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import typing

import jsonschema
import pytest

from labs import SCHEMA_VERSION, catalog, result_schema
from labs.result_common import Envelope, LabResults
from labs.runtime import validate_result
from tests.labs import runs


def test_committed_schema_is_the_generated_one():
    assert result_schema.is_current(), (
        f"{result_schema.SCHEMA_PATH} differs from the result models: run `{result_schema.REGENERATE}` and commit it"
    )
    check = subprocess.run(
        [sys.executable, "-m", "labs", "schema", "--check"], cwd=runs.ROOT, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr


def test_schema_check_fails_on_a_stale_file(tmp_path):
    stale = tmp_path / "result.schema.json"
    stale.write_text(result_schema.render().replace('"const": 1', '"const": 2', 1))
    assert not result_schema.is_current(stale)
    assert result_schema.write(stale) and result_schema.is_current(stale)
    assert not result_schema.write(stale)  # nothing to change the second time


def test_every_lab_registers_a_results_model_and_the_version_is_one_number():
    for spec in catalog.LABS.values():
        assert issubclass(spec.result, LabResults), spec.name
    assert typing.get_args(Envelope.model_fields["schema_version"].annotation) == (SCHEMA_VERSION,)
    schema = result_schema.json_schema()
    assert set(schema["discriminator"]["mapping"]) == set(catalog.names())


@pytest.mark.parametrize("lab", list(runs.SMALL))
def test_a_real_result_is_valid_for_the_models_and_the_generated_file(lab):
    result = runs.run(lab).result
    assert validate_result(result) == []
    schema = json.loads(result_schema.SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    # Readers outside Python use the file: it must accept what the models accept.
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(result)) == []


def _fp8() -> dict:
    return copy.deepcopy(runs.run("fp8-step").result)


def _overlap() -> dict:
    return copy.deepcopy(runs.run("overlap-trace").result)


def _set(doc: dict, path: str, value) -> dict:
    *parents, last = path.split("/")
    node = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is _DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


_DELETE = object()

BROKEN = [
    # (which result, path, new value, what the message must say)
    (_fp8, "environment", _DELETE, "environment: required"),
    (_fp8, "schema_version", 2, "schema_version: should be 1"),
    (_fp8, "started_at", "yesterday", "started_at:"),
    (_fp8, "params/steps", 1, "params/steps: should be greater than or equal to 2"),
    (_fp8, "params/bogus", 1, "params/bogus: not a field"),
    (_fp8, "environment/backend", "tpu", "environment/backend: should be 'te', 'torch-cuda' or 'cpu'"),
    (_fp8, "environment/label", "cpu", "environment/label:"),
    (_fp8, "artifacts/0/path", "../../etc/passwd", "artifacts/0/path: string should match pattern"),
    (_fp8, "artifacts/0/media_type", "text/html", "artifacts/0/media_type:"),
    (_fp8, "results/runs/fp8/loss", [], "results/runs/fp8/loss: list should have at least 1 item"),
    (_fp8, "results/runs/fp8/final_loss", True, "results/runs/fp8/final_loss:"),
    (_fp8, "results/runs/reference/ms_per_step", "12", "results/runs/reference/ms_per_step: should be a valid number"),
    (_fp8, "results/quantizers/0/role", "bias", "results/quantizers/0/role:"),
    (_fp8, "results/quantizers/0/total_clipped", -1, "results/quantizers/0/total_clipped:"),
    (_fp8, "results/clipping/total_clipped", 1.5, "results/clipping/total_clipped:"),
    (_fp8, "results/timing/unit", "s", "results/timing/unit: should be 'ms'"),
    (_fp8, "results/runs/fp8/generation/accuracy", 1.5, "results/runs/fp8/generation/accuracy:"),
    (_fp8, "results/summary/0/note", None, "results/summary/0/note: should be a valid string"),
    (_fp8, "results/surprise", True, "results/surprise: not a field"),
    (_fp8, "results/te_metadata", _DELETE, "results/te_metadata: required"),
    (_overlap, "results/schedules/dependent/safe_to_overlap", True, "results/schedules/dependent/safe_to_overlap"),
    (_overlap, "results/schedules/sideways", {}, "results/schedules/sideways: not a field"),
    (_overlap, "results/schedules", {}, "results/schedules: expected at least one of"),
    (_overlap, "results/schedules/windowed/ranks/0/overlap_ratio", 1.5, "overlap_ratio: should be less than"),
    (_overlap, "results/ranks", 1, "results/ranks:"),
]


@pytest.mark.parametrize(
    "make, path, value, expected",
    BROKEN,
    ids=[f"{b[1]}={'(deleted)' if b[2] is _DELETE else repr(b[2])}"[:60] for b in BROKEN],
)
def test_a_broken_result_is_refused_naming_its_path(make, path, value, expected):
    errors = validate_result(_set(make(), path, value))
    assert any(expected in e for e in errors), errors


def test_an_unknown_lab_is_named_and_the_shared_parts_still_checked():
    result = _set(_set(_fp8(), "lab", "mystery"), "environment", _DELETE)
    errors = validate_result(result)
    assert errors[0] == f"lab: got 'mystery', expected one of {', '.join(catalog.names())}"
    assert "environment: required" in errors
    assert validate_result([1, 2]) == ["(top level): expected a JSON object, got list"]
    assert validate_result({"lab": "tp-sweep"})[0] == "schema_version: required"
