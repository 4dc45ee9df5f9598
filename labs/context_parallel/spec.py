"""context-parallel in the catalog (torch-free): what the app lists, validates, sizes, grades and says of it."""

from __future__ import annotations

from labs.context_parallel import describe, params
from labs.context_parallel.result import ContextParallelResults
from labs.spec import LabSpec

SPEC = LabSpec(
    name="context-parallel",
    order=80,
    title="Context parallelism: ring attention, a zig-zag split, and an all-to-all over heads",
    question="How do ranks share the attention of one long sequence, and what does a causal mask do to their work?",
    params=params.Params,
    result=ContextParallelResults,
    backends=("torch-cuda", "cpu"),
    runner="labs.context_parallel.run:run",
    checks="labs.context_parallel.checks:checks",
    needs=params.resources,
    presets=params.PRESETS,
    cost=params.estimate_seconds,
    limits=params.limits,
    uses_fp8=lambda p: False,  # FP32 attention and p2p sends: no FP8 anywhere
    tiny={"ranks": 2, "seq_len": 32, "heads": 2, "head_dim": 8, "steps": 1, "warmup": 0},
    small={"ranks": 4, "seq_len": 256, "heads": 4, "head_dim": 16, "steps": 2, "warmup": 1},
    nccl_run={"ranks": 2},
    words=describe.WORDS,
)
