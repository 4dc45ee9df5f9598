"""pipeline parameters, limits and resources (torch-free: the web tier reads this through labs.catalog)."""

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

Schedule = Literal["gpipe", "1f1b", "interleaved-1f1b", "zero-bubble"]
SCHEDULES: tuple[Schedule, ...] = get_args(Schedule)
# Schedules that place several (virtual) stages on each rank, looped: rank r holds stages r, r+p, r+2p, ...
LOOPED: tuple[Schedule, ...] = ("interleaved-1f1b", "zero-bubble")

RUN: JsonDict = {"group": "Pipeline"}
RUN_MORE: JsonDict = {"group": "Pipeline", "advanced": True}
SIZES: JsonDict = {"group": "Model sizes"}

# Gradients, what the grader's checks (checks.py) judge parity by: the pipeline sums m micro-batch gradients (each
# of a mean loss) and divides by m; the reference takes one mean over the batch. FP32 sums in another order differ
# by a few ulps of the gradient's size; far above it, a stage used the wrong weights or dropped a micro-batch.
GRAD_RTOL = 1e-4


class PipelineParams(LabParams):
    ranks: int = ranks_field(
        2,
        description="Pipeline ranks p (one process each); GPipe and 1F1B put one stage on each",
        title="Pipeline ranks (p)",
        group=RUN,
    )
    microbatches: int = Field(
        4,
        ge=1,
        le=64,
        description="Micro-batches m per step; the bubble shrinks as m grows",
        title="Micro-batches (m)",
        json_schema_extra=RUN,
    )
    schedules: Annotated[list[Schedule], in_order(SCHEDULES)] = Field(
        default=list(SCHEDULES),
        min_length=1,
        max_length=4,
        description="torch.distributed.pipelining schedules to run, one after another on the same model",
        title="Schedules",
        json_schema_extra=RUN,
    )
    stages_per_rank: int = Field(
        2,
        ge=2,
        le=4,
        description="Stages v each rank holds in the interleaved and zero-bubble schedules",
        title="Stages per rank (v, looped schedules)",
        json_schema_extra=RUN,
    )
    layers: int = Field(
        8,
        ge=1,
        le=64,
        description="Linear+tanh layers of the whole model, split evenly over the stages",
        title="Layers",
        json_schema_extra=SIZES,
    )
    width: int = Field(
        512,
        ge=8,
        le=8192,
        description="Width of every layer (activations are micro-batch rows x width)",
        title="Width",
        json_schema_extra=SIZES,
    )
    microbatch_rows: int = Field(
        128,
        ge=1,
        le=4096,
        description="Rows in one micro-batch; the batch is micro-batches x rows",
        title="Rows per micro-batch",
        json_schema_extra=SIZES,
    )
    steps: int = Field(
        3,
        ge=1,
        le=20,
        description="Timed steps per schedule (each rank's median step reported, the last one drawn)",
        title="Timed steps",
        json_schema_extra=RUN_MORE,
    )
    warmup: int = Field(
        1,
        ge=0,
        le=10,
        description="Untimed steps first: the stages infer shapes and set up p2p on the first step (at least 1 on a "
        "GPU)",
        title="Warm-up steps",
        json_schema_extra=RUN_MORE,
    )
    seed: int = seed_field("Seeds weights and data", RUN_MORE)
    rank_timeout_s: int = rank_timeout_field(RUN_MORE)


Params = PipelineParams


def stages_for(params: Params, schedule: str) -> int:
    """Stages on each rank for `schedule`: v for the looped schedules, 1 otherwise."""
    return params.stages_per_rank if schedule in LOOPED else 1


def limits(params: Params, backend: str) -> list[Problem]:
    p, m = params.ranks, params.microbatches
    out = []
    for schedule in params.schedules:
        n_stages = p * stages_for(params, schedule)
        if params.layers % n_stages:
            out.append(
                Problem(
                    "layers",
                    f"layers: {schedule} splits layers({params.layers}) over ranks({p}) x "
                    f"stages per rank({stages_for(params, schedule)}) = {n_stages} stages; "
                    f"layers % {n_stages} = {params.layers % n_stages}, must be 0",
                )
            )
            break
    if "1f1b" in params.schedules and m < p:
        # torch 2.13 schedules.py Schedule1F1B.__init__: fewer micro-batches than stages is refused.
        out.append(Problem("microbatches", f"microbatches: 1F1B needs m({m}) >= p({p}) stages; use m >= {p}"))
    if any(s in LOOPED for s in params.schedules):
        # torch.distributed.pipelining (2.13, schedules.py ScheduleInterleaved1F1B.__init__): the looped
        # schedules run m in rounds of max(1, m // p) and refuse an m that the rounds do not divide.
        rounds = max(1, m // p)
        if m % rounds:
            out.append(
                Problem(
                    "microbatches",
                    f"microbatches: the interleaved and zero-bubble schedules run m in max(1, m({m}) // p({p})) = "
                    f"{rounds} rounds; m % {rounds} = {m % rounds}, must be 0 (try a multiple of {p})",
                )
            )
    return out


# Host memory, per rank in FP32 elements: the whole seeded model (the unpipelined reference runs on every
# rank for the parity check) with its gradients, the batch and its target, and the reference's saved
# activations (layers x batch x width, twice: input and tanh output); the pipeline's own activations are
# at most the same. Schedules run one after another, each freeing the last.
SAFETY = 1.5


def _rank_elems(p: Params) -> int:
    weights = 2 * p.layers * (p.width * p.width + p.width)
    batch = p.microbatches * p.microbatch_rows
    acts = 2 * p.layers * batch * p.width
    return int(weights + 2 * batch * p.width + 2 * acts)


def resources(params: Params, backend: str) -> Resources:
    p = params
    return rank_job(
        p.ranks,
        backend,
        per_rank_bytes=4 * _rank_elems(p),
        what=f"of FP32 tensors each (the whole "
        f"model of {p.layers} layers of width {p.width} with its gradients, and the batch of "
        f"{p.microbatches} x {p.microbatch_rows} rows with its activations)",
        memory_field="width",
        safety=SAFETY,
    )


PRESETS: tuple[Preset, ...] = (
    Preset(
        "GPipe against 1F1B",
        "The two single-stage schedules side by side at the same p and m: the same bubble, but GPipe keeps "
        "every micro-batch's activations in flight while 1F1B keeps at most p.",
        {"schedules": ["gpipe", "1f1b"], "microbatches": 8},
    ),
    Preset(
        "More micro-batches",
        "Sixteen micro-batches of the same total batch: watch the bubble fall toward (p-1)/(m+p-1).",
        {"microbatches": 16, "microbatch_rows": 8, "schedules": ["gpipe", "1f1b"]},
    ),
    Preset(
        "Interleave the stages",
        "1F1B against interleaved 1F1B with v = 2 stages per rank: a smaller bubble bought with three times the "
        "sends (2p - 1 = 3 stage boundaries instead of 1).",
        {"schedules": ["1f1b", "interleaved-1f1b"], "microbatches": 4},
    ),
)


def estimate_seconds(params: Params, backend: str) -> float:
    """Start-up, one process per rank, the reference, and each schedule's warm-up and timed steps."""
    batch = params.microbatches * params.microbatch_rows
    fwd = 2 * batch * params.width * params.width * params.layers
    rate = GPU_GEMM_FLOPS if backend in GPU_BACKENDS else CPU_GEMM_FLOPS
    # Forward + backward = 3x the forward's FLOPs; a step takes its critical path, about (m + p - 1)/m of the
    # per-rank share; each p2p send over gloo costs ~0.3 ms of latency.
    per_rank = 3 * fwd / params.ranks / rate
    per_step = per_rank * (params.microbatches + params.ranks - 1) / params.microbatches
    sends = 4 * params.microbatches * params.stages_per_rank * 3e-4
    warmup = max(1, params.warmup) if backend in GPU_BACKENDS else params.warmup  # labs.parallel.timing.warmup_for
    steps = len(params.schedules) * (params.steps + warmup)
    # Each schedule also builds its stages and exchanges shapes on its first step (~0.5 s on 2 cores).
    setup = 0.5 * len(params.schedules)
    return START_S + params.ranks * RANK_START_S + 3 * fwd / rate + setup + steps * (per_step + sends)
