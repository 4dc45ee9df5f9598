"""env-check in the catalog (torch-free): what the app lists, validates, sizes, grades and says of it."""

from __future__ import annotations

from labs.env_check import params
from labs.env_check.result import EnvCheckResults
from labs.resources import BACKENDS
from labs.spec import LabSpec

SPEC = LabSpec(
    name="env-check",
    order=10,
    title="Check my lab environment",
    question="Which backend, FP8 recipes and library versions will my labs run with here?",
    params=params.Params,
    result=EnvCheckResults,
    backends=BACKENDS,
    runner="labs.env_check.run:run",
    checks="labs.env_check.checks:checks",
    needs=params.resources,
    presets=params.PRESETS,
    cost=params.estimate_seconds,
    tiny={},
)
