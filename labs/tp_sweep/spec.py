"""tp-sweep in the catalog (torch-free): what the app lists, validates, sizes, grades and says of it."""

from __future__ import annotations

from labs.spec import LabSpec
from labs.tp_sweep import describe, params
from labs.tp_sweep.result import TpSweepResults

SPEC = LabSpec(
    name="tp-sweep",
    order=30,
    title="Tensor-parallel sweep: local GEMMs, collectives and over-sharding",
    question="As the TP degree grows, when does collective time overtake the GEMM time it saves?",
    params=params.Params,
    result=TpSweepResults,
    backends=("te", "torch-cuda", "cpu"),  # te: the te.Linear block beside the Megatron one
    runner="labs.tp_sweep.run:run",
    checks="labs.tp_sweep.checks:checks",
    needs=params.resources,
    presets=params.PRESETS,
    cost=params.estimate_seconds,
    limits=params.limits,
    fp8_recipe=params.te_recipe_name,
    uses_fp8=lambda p: p.fp8,  # FP8 GEMMs only when asked for
    tiny={"degrees": [1, 2], "tokens": 16, "hidden": 32, "ffn": 64, "steps": 1, "warmup": 0},
    small={"degrees": [1, 2], "tokens": 64, "hidden": 128, "ffn": 512, "steps": 2, "warmup": 1},
    words=describe.WORDS,
)
