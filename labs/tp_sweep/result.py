"""tp-sweep's `results` in result.json (torch-free): per degree and rank, measured (ms), parity against
TP=1, and beside them a cost-model prediction labelled 'predicted' (labs.parallel.costmodel)."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import Field, with_config
from typing_extensions import TypedDict

from labs.result_common import (
    STRICT,
    LabResults,
    Ms,
    NonNegFloat,
    NonNegInt,
    PosInt,
    ProfilerCheck,
    TimelineArtifacts,
)

# ---- the prediction (labs.parallel.costmodel.predict_sweep) -------------------------------------


@with_config(STRICT)
class NodeSpec(TypedDict):
    name: str
    gpus: PosInt
    peak_bf16_flops: float
    peak_fp8_flops: float
    hbm_bytes_per_s: float
    link_bytes_per_s: float
    collective_latency_s: float
    source: str


@with_config(STRICT)
class PredictedDegree(TypedDict):
    """Predicted per-rank times (ms) of one forward+backward of the TP MLP block at one degree."""

    degree: PosInt
    local_gemm_ms: NonNegFloat
    elementwise_ms: NonNegFloat
    collective_ms: NonNegFloat
    collective_bytes: NonNegInt
    exposed_comm_ms: NonNegFloat
    step_ms: NonNegFloat
    hideable_ms: NonNegFloat
    comm_fraction: NonNegFloat


@with_config(STRICT)
class Shape(TypedDict):
    tokens: PosInt
    hidden: PosInt
    ffn: PosInt


@with_config(STRICT)
class Prediction(TypedDict):
    label: Literal["predicted"]  # never a measurement
    node: str
    node_spec: NodeSpec
    precision: Literal["bf16", "fp8"]
    shape: Shape
    gemm_efficiency: float
    per_degree: list[PredictedDegree]
    best_degree: PosInt
    oversharding_from: PosInt | None
    step_stops_improving_from: PosInt | None
    comm_exceeds_gemm_from: PosInt | None


# ---- the measurement ---------------------------------------------------------------------------


@with_config(STRICT)
class TpTiming(TypedDict):
    kind: Literal["cpu-wall-clock", "cuda-events"]
    unit: Literal["ms"]
    note: str


@with_config(STRICT)
class RankSlots(TypedDict):
    available: NonNegInt
    explanation: str


@with_config(STRICT)
class Tolerance(TypedDict):
    max_rel_diff: NonNegFloat
    reason: str


@with_config(STRICT)
class Fp8Mode(TypedDict):
    enabled: bool
    mode: str | None


@with_config(STRICT)
class Diff(TypedDict):
    max_abs_diff: NonNegFloat
    max_rel_diff: NonNegFloat


@with_config(STRICT)
class Parity(TypedDict):
    """The sharded block against the unsharded TP=1 block computed in the launching process."""

    output: Diff
    grad_input: Diff
    grad_fc1_weight: Diff
    grad_fc2_weight: Diff
    tolerance: str  # a key of `tolerances`
    max_rel_diff: NonNegFloat
    within_tolerance: bool


@with_config(STRICT)
class WeightSlice(TypedDict):
    weight: str
    split: str
    full_shape: list[PosInt]
    slice: str
    local_shape: list[PosInt]


@with_config(STRICT)
class GemmShape(TypedDict):
    gemm: str
    m: PosInt
    n: PosInt
    k: PosInt


@with_config(STRICT)
class Collective(TypedDict):
    name: str
    kind: Literal["all-reduce", "all-gather", "reduce-scatter"]
    bytes: NonNegInt
    ms: Ms


@with_config(STRICT)
class PlannedCollective(TypedDict):
    name: str
    kind: Literal["all-reduce", "all-gather", "reduce-scatter"]
    bytes: NonNegInt  # everything the collective reduces or gathers, over all ranks (data and scales)
    carries: str  # what those bytes are: BF16, FP8 data and which scales (labs/tp_sweep/te.py gather_bytes)


@with_config(STRICT)
class TeDegree(TypedDict):
    """The te.Linear block (te backend) at one degree, beside the plain-PyTorch Megatron block."""

    recipe: str | None  # the TE FP8 recipe; null when the block ran in BF16
    sequence_parallel: bool
    step_ms: Ms  # slowest rank's median step, CUDA events
    step_vs_megatron: float | None
    parity: Parity
    collectives: list[PlannedCollective]
    ring_bytes_per_rank: NonNegFloat  # what each rank sends in a ring for those collectives
    megatron_ring_bytes_per_rank: NonNegFloat
    profiler: ProfilerCheck


@with_config(STRICT)
class TpRankRow(TypedDict):
    """One rank at one degree; times are medians: step_ms over the steps timed alone, the rest over the traced
    (and on CUDA profiled) steps after them."""

    rank: NonNegInt
    mapping: list[WeightSlice]
    local_gemm_shapes: list[GemmShape]
    step_ms: Ms
    local_gemm_ms: Ms
    other_compute_ms: Ms
    collective_ms: Ms
    wait_ms: Ms
    exposed_comm_ms: Ms
    overlap_ratio: float | None
    collectives: list[Collective]


@with_config(STRICT)
class DegreeRow(TypedDict):
    """One TP degree: the slowest rank's step, GEMM and collective times averaged over ranks."""

    degree: PosInt
    step_ms: Ms
    step_vs_tp1: float | None
    local_gemm_ms: Ms
    collective_ms: Ms
    wait_ms: Ms
    # Where collective_ms, wait_ms and exposed_comm_ms come from. "trace kernels": each rank's NCCL kernel
    # durations in its profiled window, no clock compared across ranks (CUDA); "shared host clock": the lab's
    # traced spans, every rank read on one host clock (CPU).
    wait_source: Literal["trace kernels", "shared host clock"]
    exposed_comm_ms: Ms
    collective_kinds: list[str]
    collective_bytes_per_step: NonNegInt
    parity: Parity
    ranks: Annotated[list[TpRankRow], Field(min_length=1)]
    predicted: PredictedDegree | None
    artifacts: TimelineArtifacts
    profiler: NotRequired[ProfilerCheck]  # HTA vs the lab's kernel count on CUDA; "does not apply" on CPU
    te: NotRequired[TeDegree]  # te backend only


@with_config(STRICT)
class Crossover(TypedDict):
    """Where collective time overtakes local GEMM time: measured here, and predicted for the named node."""

    measured_from: PosInt | None  # first measured degree with collective > local GEMM (the grader's rule)
    measured_best_degree: PosInt
    predicted_from: PosInt | None  # the same rule on the prediction, over the measured degrees
    predicted_best_degree: PosInt
    agree: bool
    explanation: str | None  # why they differ, with this run's ratios; null when they agree


class TpSweepResults(LabResults):
    timing: TpTiming
    rank_slots: RankSlots
    tolerances: dict[str, Tolerance]
    tolerance_used: str
    fp8: Fp8Mode
    degrees: Annotated[list[DegreeRow], Field(min_length=1)]
    predicted: Prediction
    crossover: Crossover | None = None  # optional: results written before it existed lack it
