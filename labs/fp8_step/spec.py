"""fp8-step in the catalog (torch-free): what the app lists, validates, sizes, grades and says of it."""

from __future__ import annotations

from labs.fp8_step import describe, params
from labs.fp8_step.result import Fp8StepResults
from labs.resources import BACKENDS
from labs.spec import LabSpec

SPEC = LabSpec(
    name="fp8-step",
    order=20,
    title="FP8 training step: BF16 reference vs an FP8 recipe",
    question="Does an FP8 recipe train like BF16, and what do its scales do when an activation spikes?",
    params=params.Params,
    result=Fp8StepResults,
    backends=BACKENDS,
    runner="labs.fp8_step.run:run",
    checks="labs.fp8_step.checks:checks",
    needs=params.resources,
    presets=params.PRESETS,
    cost=params.estimate_seconds,
    limits=params.limits,
    fp8_recipe=params.te_recipe_name,
    tiny={"steps": 4, "batch": 2, "seq": 8, "d_model": 16, "n_heads": 2, "ffn": 32, "n_layers": 1},
    # a spike at step 5 of 8: tests/labs/test_fp8_step.py reads the clipping there and the step after from this run
    small={
        "steps": 8,
        "batch": 4,
        "seq": 16,
        "d_model": 32,
        "n_heads": 2,
        "ffn": 64,
        "n_layers": 2,
        "vocab": 16,
        "outlier_step": 5,
        "outlier_scale": 16.0,
    },
    words=describe.WORDS,
)
