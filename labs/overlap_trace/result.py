"""overlap-trace's `results` in result.json (torch-free): per schedule and rank, the overlap ratio
|compute ∩ comm| / |comm|, exposed communication and the step identity, all in ms."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import ConfigDict, Field, field_validator, with_config
from typing_extensions import TypedDict

from labs.result_common import STRICT, LabResults, Ms, NonNegInt, ProfilerCheck, TimelineArtifacts

# A ratio of two sums of float intervals can land an ulp above 1.
OverlapRatio = Annotated[float, Field(ge=0, le=1.000001)]


@with_config(STRICT)
class OverlapTiming(TypedDict):
    kind: Literal["cpu-wall-clock", "cuda-events"]
    unit: Literal["ms"]
    note: str


@with_config(STRICT)
class OverlapRankRow(TypedDict):
    """One rank's median step (by step time), whole, so its numbers satisfy the identity together."""

    rank: NonNegInt
    step_ms: Ms
    compute_ms: Ms
    communication_ms: Ms
    wait_ms: Ms
    overlap_ms: Ms
    overlap_ratio: OverlapRatio | None  # undefined (null) without communication, as in HTA
    exposed_communication_ms: Ms
    identity_ms: Ms  # compute + communication - overlap
    identity_residual_ms: Ms  # measured step - identity: idle time
    median_overlap_ratio_all_steps: OverlapRatio | None
    identity_residual_fraction: float | None
    unwritten_at_read: NotRequired[NonNegInt]  # dependent schedule on CPU: gathered elements still NaN


@with_config(STRICT)
class Schedule(TypedDict):
    ranks: Annotated[list[OverlapRankRow], Field(min_length=2)]
    overlap_ratio: OverlapRatio | None  # mean over ranks
    exposed_comm_ms: Ms
    step_ms: Ms
    safe_to_overlap: bool
    must_wait: bool
    explanation: str
    artifacts: TimelineArtifacts
    profiler: NotRequired[ProfilerCheck]  # HTA vs the lab's kernel count and spans on CUDA; why not on CPU


@with_config(STRICT)
class DependentSchedule(TypedDict):
    """The consumer reads the gathered tensor: it is never safe to overlap and must wait."""

    ranks: Annotated[list[OverlapRankRow], Field(min_length=2)]
    overlap_ratio: OverlapRatio | None
    exposed_comm_ms: Ms
    step_ms: Ms
    safe_to_overlap: Literal[False]
    must_wait: Literal[True]
    explanation: str
    artifacts: TimelineArtifacts
    profiler: NotRequired[ProfilerCheck]


@with_config(STRICT | ConfigDict(json_schema_extra={"minProperties": 1}))
class Schedules(TypedDict, total=False):
    immediate: Schedule
    windowed: Schedule
    dependent: DependentSchedule


@with_config(STRICT)
class Comparison(TypedDict):
    windowed_overlap_gt_immediate_per_rank: list[bool]
    windowed_over_immediate_step: float | None


class OverlapTraceResults(LabResults):
    timing: OverlapTiming
    ranks: Annotated[int, Field(ge=2)]
    gathered_bytes: NonNegInt
    schedules: Schedules
    comparison: Comparison | None  # when both windowed and immediate ran

    @field_validator("schedules")
    @classmethod
    def _some_schedule(cls, v: Schedules) -> Schedules:
        if not v:
            raise ValueError("expected at least one of immediate, windowed, dependent")
        return v
