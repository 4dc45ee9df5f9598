"""zero-fsdp's `results` in result.json (torch-free): per strategy and rank, the bytes held and moved, peak
memory, step time and overlap; the losses and their parity; the lesson's invariants, measured."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from labs.result_common import STRICT, LabResults, Ms, NonNegFloat, NonNegInt, TimelineArtifacts

ZeroFsdpOverlapRatio = Annotated[float, Field(ge=0, le=1.000001)]  # a ratio of float sums can land an ulp above 1


@with_config(STRICT)
class ZeroFsdpTiming(TypedDict):
    kind: Literal["cpu-wall-clock", "cuda-events"]  # what timed the steps; the GPU timeline is profiler kernels
    unit: Literal["ms"]
    note: str


@with_config(STRICT)
class ZeroFsdpPeakMemory(TypedDict):
    kind: Literal["process-rss-high-water", "cuda-max-allocated"]
    note: str


@with_config(STRICT)
class ZeroFsdpRankRow(TypedDict):
    rank: NonNegInt
    param_bytes: NonNegInt  # at rest, after the optimizer step (FSDP2: the DTensor's local shard)
    param_bytes_after_forward: NonNegInt  # between forward and backward (FSDP2 without reshard: gathered)
    grad_bytes: NonNegInt  # after backward, before the step
    optim_bytes: NonNegInt  # Adam's exp_avg + exp_avg_sq this rank holds
    optim_step_counter_bytes: NonNegInt  # Adam's per-tensor step counters, replicated under every strategy
    peak_bytes: NonNegInt
    peak_growth_bytes: NonNegInt  # peak minus what the rank's process held before the model was built
    step_ms: Ms  # median over the timed steps, each alone (no recorder or profiler on)
    # The rest: the median step of the recorded window after them (CPU: the recorder's op intervals; CUDA: the
    # profiler's kernels, which have no wait lane, so wait_ms is null there).
    compute_ms: Ms
    communication_ms: Ms
    overlap_ms: Ms
    overlap_ratio: ZeroFsdpOverlapRatio | None  # undefined (null) without communication, as in HTA
    exposed_communication_ms: Ms
    wait_ms: Ms | None


@with_config(STRICT)
class ZeroFsdpCollective(TypedDict):
    kind: Literal["all-reduce", "all-gather", "reduce-scatter", "broadcast", "reduce", "all-to-all"]
    count: NonNegInt  # calls in one timed step (the last), rank 0
    bytes: NonNegInt  # the calls' full buffers summed
    bus_bytes: NonNegFloat  # what each rank sends on a ring: bytes x nccl-tests' bus factor
    predicted_bytes: NonNegFloat  # anatomy.predicted_traffic


@with_config(STRICT)
class ZeroFsdpPredicted(TypedDict):
    param_bytes: NonNegFloat
    grad_bytes: NonNegFloat
    optim_bytes: NonNegFloat


@with_config(STRICT)
class ZeroFsdpStrategy(TypedDict):
    ranks: Annotated[list[ZeroFsdpRankRow], Field(min_length=2)]
    losses: list[float]  # mean over ranks per step: warm-up, timed, census
    loss_spread_over_ranks: NonNegFloat  # ranks see the averaged loss; 0 unless a rank disagrees
    collectives: list[ZeroFsdpCollective]
    bus_bytes_per_step: NonNegFloat
    predicted_bus_bytes_per_step: NonNegFloat
    predicted: ZeroFsdpPredicted  # lesson 08's anatomy for this strategy's ZeRO stage
    params: NonNegInt
    largest_param_numel: NonNegInt
    padded_shard_numel: NonNegInt  # ceil(rows / N) rows of every parameter
    step_ms: Ms  # slowest rank's median step
    peak_kind: Literal["process-rss-high-water", "cuda-max-allocated"]
    artifacts: TimelineArtifacts
    owned_numel: NotRequired[list[NonNegInt]]  # zero1: parameters each rank owns and updates


@with_config(STRICT | ConfigDict(json_schema_extra={"minProperties": 1}))
class ZeroFsdpStrategies(TypedDict, total=False):
    ddp: ZeroFsdpStrategy
    zero1: ZeroFsdpStrategy
    fsdp2: ZeroFsdpStrategy
    fsdp2_no_reshard: Annotated[ZeroFsdpStrategy, Field(alias="fsdp2-no-reshard")]


@with_config(STRICT)
class ZeroFsdpParity(TypedDict):
    reference: str
    max_abs_loss_diff: dict[str, NonNegFloat]
    worst: NonNegFloat
    tolerance: NonNegFloat
    within_tolerance: bool


@with_config(STRICT)
class ZeroFsdpZero1Invariant(TypedDict):
    fraction_of_full: list[NonNegFloat]
    sum_over_ranks_bytes: NonNegInt
    full_bytes: NonNegInt
    ddp_bytes: NonNegInt | None
    allowed_imbalance_bytes: NonNegInt
    holds: bool


@with_config(STRICT)
class ZeroFsdpFsdpInvariant(TypedDict):
    fraction_of_full: list[NonNegFloat]
    sum_over_ranks_bytes: NonNegInt
    full_bytes: NonNegInt
    padded_shard_bytes: NonNegInt
    holds: bool


@with_config(STRICT)
class ZeroFsdpInvariants(TypedDict, total=False):
    zero1_optim: ZeroFsdpZero1Invariant
    fsdp2_params: ZeroFsdpFsdpInvariant
    fsdp2_no_reshard_params: Annotated[ZeroFsdpFsdpInvariant, Field(alias="fsdp2-no-reshard_params")]


class ZeroFsdpResults(LabResults):
    timing: ZeroFsdpTiming
    peak_memory: ZeroFsdpPeakMemory
    ranks: Annotated[int, Field(ge=2)]
    params: NonNegInt
    parity: ZeroFsdpParity
    invariants: ZeroFsdpInvariants
    strategies: ZeroFsdpStrategies
