"""pipeline in the catalog (torch-free): what the app lists, validates, sizes, grades and says of it."""

from __future__ import annotations

from labs.pipeline import describe, params
from labs.pipeline.result import PipelineResults
from labs.spec import LabSpec

SPEC = LabSpec(
    name="pipeline",
    order=70,
    title="Pipeline schedules: GPipe, 1F1B, interleaved and zero-bubble on real stages",
    question="Where does a pipeline idle, and what do 1F1B, interleaving and zero-bubble buy against GPipe?",
    params=params.Params,
    result=PipelineResults,
    backends=("torch-cuda", "cpu"),
    runner="labs.pipeline.run:run",
    checks="labs.pipeline.checks:checks",
    needs=params.resources,
    presets=params.PRESETS,
    cost=params.estimate_seconds,
    limits=params.limits,
    uses_fp8=lambda p: False,  # FP32 layers and p2p sends: no FP8 anywhere
    tiny={
        "ranks": 2,
        "microbatches": 2,
        "layers": 4,
        "width": 16,
        "microbatch_rows": 4,
        "steps": 1,
        "warmup": 0,
    },
    small={
        "ranks": 2,
        "microbatches": 4,
        "layers": 4,
        "width": 512,
        "microbatch_rows": 256,
        "steps": 2,
        "warmup": 1,
    },
    nccl_run={"ranks": 2, "width": 1024},
    words=describe.WORDS,
)
