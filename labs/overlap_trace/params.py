"""overlap-trace parameters, limits and resources (torch-free: the web tier reads this through labs.catalog)."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field
from pydantic.config import JsonDict

from labs.params import LabParams, Preset, in_order, rank_timeout_field, ranks_field, seed_field
from labs.resources import (
    CPU_GEMM_FLOPS,
    GPU_BACKENDS,
    GPU_GEMM_FLOPS,
    RANK_START_S,
    START_S,
    Problem,
    Resources,
    rank_job,
)

Schedule = Literal["immediate", "windowed", "dependent"]
SCHEDULES: tuple[Schedule, ...] = get_args(Schedule)

# The lab form's fieldsets (app/services/jobs/forms.py): `group` is a field's legend, groups in the order they first
# appear (the backend choice joins the first); `advanced` folds a knob a first run leaves alone under "More settings",
# open by itself once it differs from its default or has an error.
RUN: JsonDict = {"group": "Run"}
RUN_MORE: JsonDict = {"group": "Run", "advanced": True}
SIZES: JsonDict = {"group": "Tensor sizes"}


class OverlapTraceParams(LabParams):
    ranks: int = ranks_field(2, description="Processes (one per device), all in one tensor-parallel group", group=RUN)
    schedules: Annotated[list[Schedule], in_order(SCHEDULES)] = Field(
        default=list(SCHEDULES),
        min_length=1,
        max_length=3,
        description="Which schedules to run after the async all-gather",
        title="Schedules",
        json_schema_extra=RUN,
    )
    tokens: int = Field(
        512,
        ge=8,
        le=16384,
        description="Rows of the activation; with ffn sets the all-gather size",
        title="Tokens",
        json_schema_extra=SIZES,
    )
    hidden: int = Field(
        512,
        ge=16,
        le=16384,
        description="Input width of the column-parallel linear",
        title="Input width",
        json_schema_extra=SIZES,
    )
    ffn: int = Field(
        2048,
        ge=16,
        le=65536,
        description="Output width of the column-parallel linear, gathered across ranks",
        title="Gathered output width",
        json_schema_extra=SIZES,
    )
    window_out: int = Field(
        768,
        ge=16,
        le=16384,
        description="Output width of the independent linear in the window; sized so it outlasts the all-gather on a small CPU machine",
        title="Window work width",
        json_schema_extra=SIZES,
    )
    steps: int = Field(
        5,
        ge=1,
        le=50,
        description="Timed steps per schedule (each rank's median step reported, the last one drawn)",
        title="Timed steps",
        json_schema_extra=RUN,
    )
    warmup: int = Field(
        2,
        ge=0,
        le=10,
        description="Untimed steps first, so first-call costs stay out of the timeline (at least 1 on a GPU)",
        title="Warm-up steps",
        json_schema_extra=RUN,
    )
    seed: int = seed_field("Seeds inputs and weights", RUN_MORE)
    rank_timeout_s: int = rank_timeout_field(RUN_MORE)


Params = OverlapTraceParams  # every lab's parameters are `Params` to its own code


def limits(params: Params, backend: str) -> list[Problem]:
    if params.ffn % params.ranks:
        return [
            Problem("ffn", f"ffn: ffn({params.ffn}) % ranks({params.ranks}) = {params.ffn % params.ranks}, must be 0")
        ]
    return []


# Host memory of a run, calibrated against the summed RSS measured by bench/lab_memory.py (torch 2.13 CPU).
# Each rank, in FP32 elements: the full seeded w1 and its own rows (ffn x hidden x (1 + 1/ranks)), the window's
# two weights, x and x2; per step its local output (tokens x ffn / ranks), the gathered buffer (tokens x ffn),
# gloo's staging copy of it, the dependent schedule's concatenated copy and NaN mask (1.25 x tokens x ffn),
# and the window's output and operand slices. Schedules run one after another in one heap, so each rank's
# peak is counted with all of them. The launcher only collects spans.
SAFETY = 1.5


def _rank_elems(p: Params) -> int:
    k_dep = min(p.hidden, p.ffn)
    weights = p.ffn * p.hidden + p.ffn * p.hidden // p.ranks + p.window_out * (p.hidden + k_dep)
    inputs = 2 * p.tokens * p.hidden
    step = p.tokens * p.ffn * (2 + 1.25) + p.tokens * p.ffn // p.ranks + p.tokens * (p.window_out + k_dep)
    return int(weights + inputs + step)


def resources(params: Params, backend: str) -> Resources:
    """`ranks` processes plus the launcher; on a GPU the ranks' tensors live on the devices."""
    p = params
    return rank_job(
        p.ranks,
        backend,
        per_rank_bytes=4 * _rank_elems(p),
        what=f"of FP32 tensors each (the full "
        f"w1 ffn({p.ffn}) x hidden({p.hidden}), and per step about 3.25 x tokens({p.tokens}) x ffn for "
        "the gathered buffer and its copies)",
        memory_field="tokens",
        safety=SAFETY,
    )


# Named runs the lesson's pauses ask for (lessons/transformer-scaling/parts/deep-dives.yaml links them by key).
PRESETS: tuple[Preset, ...] = (
    Preset(
        "Async then wait at once",
        "Only the immediate-wait and windowed schedules, side by side: the same all-gather, with nothing and "
        "with independent work in its window.",
        {"schedules": ["immediate", "windowed"]},
    ),
    Preset(
        "A bigger all-gather",
        "Four times the tokens, so four times the bytes gathered while the window's work stays the same: "
        "watch how much of the transfer stays exposed.",
        {"tokens": 2048},
    ),
)


def estimate_seconds(params: Params, backend: str) -> float:
    """Start-up, one process per rank, and each schedule's warm-up and timed steps."""
    rows = params.tokens
    local = 2 * rows * params.hidden * params.ffn / params.ranks  # the column-parallel linear, per rank
    window = 2 * rows * params.hidden * params.window_out
    gather_bytes = 4 * rows * params.ffn
    rate = GPU_GEMM_FLOPS if backend in GPU_BACKENDS else CPU_GEMM_FLOPS
    # Ranks share the host's cores on the CPU: a step costs every rank's GEMMs, plus the gather over gloo (~1 GB/s).
    share = params.ranks if backend not in GPU_BACKENDS else 1
    per_step = share * (local + window) / rate + gather_bytes / 1e9
    # On a GPU the profiled window repeats the timed steps; warm-up is at least 1 there (labs.parallel.timing).
    gpu = backend in GPU_BACKENDS
    steps = len(params.schedules) * (
        (2 if gpu else 1) * params.steps + (max(1, params.warmup) if gpu else params.warmup)
    )
    return START_S + params.ranks * RANK_START_S + steps * per_step
