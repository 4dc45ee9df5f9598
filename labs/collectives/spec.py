"""collectives in the catalog (torch-free): what the app lists, validates, sizes, grades and says of it."""

from __future__ import annotations

from labs.collectives import describe, params
from labs.collectives.result import CollectivesResults
from labs.spec import LabSpec

SPEC = LabSpec(
    name="collectives",
    order=50,
    title="Collectives: bandwidth, the α-β model, and what crossing a node costs",
    question="How long does each collective take as messages grow, and what does crossing a node boundary cost?",
    params=params.Params,
    result=CollectivesResults,
    backends=("torch-cuda", "cpu"),
    runner="labs.collectives.run:run",
    checks="labs.collectives.checks:checks",
    needs=params.resources,
    presets=params.PRESETS,
    cost=params.estimate_seconds,
    limits=params.limits,
    uses_fp8=lambda p: False,  # collectives of FP32 buffers: no FP8 anywhere
    # Also the run its own tests read (small is None): two emulated nodes of two ranks each.
    tiny={
        "ranks": 4,
        "nodes": 2,
        "collectives": ["all-reduce", "all-gather"],
        # 256 B is latency-bound even on the slow link below, 64 KiB bandwidth-bound: bus bandwidth must rise.
        "min_bytes": 256,
        "max_bytes": 65536,
        "factor": 16,
        "iters": 3,
        "warmup": 1,
        # A slow link, so a 64 KiB transfer across it (~26 ms) stands far above CPU scheduling noise (a few ms).
        "link_mbit": 20.0,
    },
    nccl_run={"ranks": 2, "nodes": 1},
    words=describe.WORDS,
)
