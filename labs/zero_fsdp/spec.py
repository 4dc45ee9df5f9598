"""zero-fsdp in the catalog (torch-free): what the app lists, validates, sizes, grades and says of it."""

from __future__ import annotations

from labs.spec import LabSpec
from labs.zero_fsdp import describe, params
from labs.zero_fsdp.result import ZeroFsdpResults

SPEC = LabSpec(
    name="zero-fsdp",
    order=60,
    title="DDP, ZeRO-1 and FSDP2: what each rank holds and moves",
    question="How much memory does each rank save by sharding, and how many more bytes does it send per step?",
    params=params.Params,
    result=ZeroFsdpResults,
    backends=("torch-cuda", "cpu"),
    runner="labs.zero_fsdp.run:run",
    checks="labs.zero_fsdp.checks:checks",
    needs=params.resources,
    presets=params.PRESETS,
    cost=params.estimate_seconds,
    limits=params.limits,
    uses_fp8=lambda p: False,  # FP32 training throughout: no FP8 anywhere
    tiny={
        "ranks": 2,
        "layers": 1,
        "hidden": 16,
        "heads": 2,
        "vocab": 16,
        "seq": 8,
        "batch": 1,
        "steps": 1,
        "warmup": 1,
    },
    small={"layers": 2, "hidden": 32, "heads": 2, "vocab": 64, "seq": 16, "batch": 2, "steps": 2, "warmup": 1},
    nccl_run={"ranks": 2},
    words=describe.WORDS,
)
