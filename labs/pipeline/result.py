"""pipeline's `results` in result.json (torch-free): per schedule and rank, the measured step, busy and idle
time against both bubble formulas, micro-batches and activation bytes in flight, p2p sends, and parity with
the unpipelined model."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from labs.result_common import STRICT, LabResults, Ms, NonNegInt, TimelineArtifacts

Fraction = Annotated[float, Field(ge=0, le=1)]


@with_config(STRICT)
class PipelineTiming(TypedDict):
    kind: Literal["cpu-wall-clock", "cuda-events"]
    unit: Literal["ms"]
    note: str


@with_config(STRICT)
class PipelineRank(TypedDict):
    """One rank's median step (by step time), whole."""

    rank: NonNegInt
    stages: list[NonNegInt]  # the stage indices this rank holds
    step_ms: Ms
    busy_ms: Ms  # |union of F, B, I, W spans|
    idle_ms: Ms  # step - busy: the bubble, p2p waits and overhead
    idle_fraction: Fraction
    idle_over_busy: float | None
    forward_ms: Ms
    backward_ms: Ms  # full backward B, or input-gradient I where it is split
    weight_grad_ms: Ms  # W (zero-bubble only)
    peak_microbatches_in_flight: NonNegInt
    expected_peak_in_flight: NonNegInt | None  # GPipe m, 1F1B p - rank; None for the looped schedules
    activation_bytes_per_microbatch: NonNegInt  # saved for backward by one forward on one stage
    peak_activation_bytes: NonNegInt
    sends: NonNegInt  # p2p sends this rank posted in the step (activations forward, gradients back)
    send_bytes: NonNegInt
    ran: list[str]  # compute actions in the order they started (2F0 = stage 2, forward, micro-batch 0)
    plan: list[str]  # the schedule's own pipeline_order for this rank, compute actions only
    max_grad_rel_err: float  # against the unpipelined model, relative to each layer's largest gradient


@with_config(STRICT)
class PipelineSchedule(TypedDict):
    stages_per_rank: Annotated[int, Field(ge=1)]
    stages: Annotated[int, Field(ge=2)]
    ranks: Annotated[list[PipelineRank], Field(min_length=2)]
    step_ms: Ms
    bubble_fraction: Fraction  # mean over ranks of idle / step
    bubble_over_ideal: float | None  # mean over ranks of idle / busy
    formula_step_fraction: Fraction | None  # (p-1)/(vm+p-1); None for zero-bubble
    formula_over_ideal: float | None  # (p-1)/(vm)
    simulated_step_ms: Ms  # the ranks' action order replayed with their mean F/B/I/W compute times and free p2p
    simulated_bubble_fraction: Fraction
    schedule_bubble_fraction: Fraction  # the same order with uniform stages (F 1, B 2, I = W = 1) and free p2p
    peak_microbatches_in_flight: NonNegInt
    peak_activation_bytes: NonNegInt
    sends_per_step: NonNegInt
    send_bytes_per_step: NonNegInt
    loss: float
    max_grad_rel_err: float
    artifacts: TimelineArtifacts


# The schedules' names are the keys (as in params.Schedule), and "1f1b" is not an identifier: the functional form.
PipelineSchedules = TypedDict(
    "PipelineSchedules",
    {
        "gpipe": PipelineSchedule,
        "1f1b": PipelineSchedule,
        "interleaved-1f1b": PipelineSchedule,
        "zero-bubble": PipelineSchedule,
    },
    total=False,
)
with_config(STRICT | ConfigDict(json_schema_extra={"minProperties": 1}))(PipelineSchedules)


class PipelineResults(LabResults):
    timing: PipelineTiming
    ranks: Annotated[int, Field(ge=2)]
    microbatches: Annotated[int, Field(ge=1)]
    reference_loss: float
    schedules: PipelineSchedules
