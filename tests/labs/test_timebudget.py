"""A run its lab's cost model prices past the job time limit is refused before it queues, naming the arithmetic and
the parameters to change, each suggestion one that fits; a GPU estimate (a guess) refuses only far past the limit."""

from __future__ import annotations

import dataclasses
import re

import pytest

from labs import catalog
from labs.timebudget import GPU_GUESS_SLACK, over_time_limit

LIMIT = 600
OVER = {"max_bytes": 94_284_223, "warmup": 2}  # collectives: ~950 s on the cpu cost model, in every field's bounds


def _capacity(**kw) -> catalog.Capacity:
    return dataclasses.replace(catalog.Capacity.local(**kw), time_limit_s=LIMIT)


def test_a_collectives_run_past_the_limit_names_the_arithmetic_and_fits_each_suggestion():
    spec = catalog.get("collectives")
    params = spec.params.model_validate(OVER)
    seconds = spec.estimate_seconds(params, "cpu")
    assert seconds > LIMIT
    (problem,) = spec.problems(params, "cpu", _capacity())
    assert problem.message.startswith(f"{problem.field}: this run is estimated at about 16 min on the cpu backend")
    assert f"({seconds:,.0f} s > {LIMIT} s)" in problem.message
    assert "past the course's time limit of 10 min 00 s for one job" in problem.message
    fixes = re.findall(r"(lower|raise) (\w+) to ([\d.]+) or (?:less|more)", problem.message)
    assert {name for _, name, _ in fixes} >= {"max_bytes", "link_mbit"} and fixes[0][1] == problem.field
    for _, name, value in fixes:
        fixed = spec.params.model_validate({**params.model_dump(), name: float(value) if "." in value else int(value)})
        assert spec.estimate_seconds(fixed, "cpu") <= LIMIT, name
        assert spec.problems(fixed, "cpu", _capacity()) == [], name


def test_no_limit_known_refuses_nothing_and_defaults_fit():
    for name in catalog.names():
        spec = catalog.get(name)
        params = spec.params.model_validate({})
        assert not [p for p in spec.problems(params, "cpu", _capacity()) if "time limit" in p.message], name
    spec = catalog.get("collectives")
    assert spec.problems(spec.params.model_validate(OVER), "cpu", catalog.Capacity.local()) == []


@pytest.mark.parametrize("backend", ["te", "torch-cuda"])
def test_a_gpu_estimate_refuses_only_past_its_slack(backend):
    params = catalog.get("collectives").params.model_validate({})
    assert over_time_limit(params, backend, estimate=lambda p, b: 2.0 * LIMIT, limit_s=LIMIT) is None
    assert over_time_limit(params, "cpu", estimate=lambda p, b: 2.0 * LIMIT, limit_s=LIMIT) is not None
    far = over_time_limit(params, backend, estimate=lambda p, b: (GPU_GUESS_SLACK + 1) * LIMIT, limit_s=LIMIT)
    assert far is not None and f"the {backend} estimate is a guess until GPU runs calibrate it" in far.message
    assert "this one is 4x" in far.message and "make the run smaller" in far.message  # nothing here lowers a constant
