"""overlap-trace in the catalog (torch-free): what the app lists, validates, sizes, grades and says of it."""

from __future__ import annotations

from labs.overlap_trace import describe, params
from labs.overlap_trace.result import OverlapTraceResults
from labs.spec import LabSpec

SPEC = LabSpec(
    name="overlap-trace",
    order=40,
    title="Overlap trace: async all-gather, the overlap window, and a dependency that forbids it",
    question="How much of an all-gather can independent work hide, and what must wait for it?",
    params=params.Params,
    result=OverlapTraceResults,
    backends=("torch-cuda", "cpu"),
    runner="labs.overlap_trace.run:run",
    checks="labs.overlap_trace.checks:checks",
    needs=params.resources,
    presets=params.PRESETS,
    cost=params.estimate_seconds,
    limits=params.limits,
    uses_fp8=lambda p: False,  # all-gathers and plain GEMMs: no FP8 anywhere
    tiny={"ranks": 2, "tokens": 16, "hidden": 32, "ffn": 64, "window_out": 64, "steps": 1, "warmup": 0},
    small={"tokens": 64, "hidden": 128, "ffn": 512, "window_out": 128, "steps": 2, "warmup": 1},
    words=describe.WORDS,
)
