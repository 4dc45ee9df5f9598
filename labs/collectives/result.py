"""collectives' `results` in result.json (torch-free): the size sweep per collective with nccl-tests'
bandwidths and the α-β fit, the all-reduce inside and across nodes, and flat against hierarchical."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, with_config
from typing_extensions import TypedDict

from labs.result_common import STRICT, LabResults, Ms, NonNegFloat, NonNegInt, PosInt, TimelineArtifacts


@with_config(STRICT)
class Timing(TypedDict):
    kind: Literal["cpu-wall-clock", "cuda-events"]  # what brackets the back-to-back calls: perf_counter, CUDA events
    unit: Literal["ms"]
    note: str


@with_config(STRICT)
class SweepRow(TypedDict):
    bytes: PosInt  # nccl-tests' S: the whole buffer (all-gather's output, reduce-scatter's input)
    time_ms: Ms  # the slowest rank's span of `iters` back-to-back calls / iters (nccl-tests' time)
    algbw_gbs: NonNegFloat  # S / t
    busbw_gbs: NonNegFloat  # algbw x the collective's factor
    fit_ms: float  # the fitted line at this size
    residual: float  # (measured - fit) / measured
    nccl_algorithm: str | None  # what NCCL logged it chose ("NVLS/Simple"); None on gloo or without a log line


@with_config(STRICT)
class Fit(TypedDict):
    intercept_ms: float
    slope_ms_per_mib: float
    steps: PosInt | None  # the ran algorithm's hops (ring or tree); None where NCCL chose per call
    busbw_factor: NonNegFloat
    alpha_us: float  # intercept / steps, or the whole intercept per collective when steps is None
    beta_ns_per_byte: NonNegFloat | None  # 1 / B; null when the line does not rise
    bandwidth_gbs: NonNegFloat | None  # B = factor / slope
    rms_residual: NonNegFloat
    max_abs_residual: NonNegFloat


@with_config(STRICT)
class CollectiveSweep(TypedDict):
    name: Literal["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast"]
    rows: Annotated[list[SweepRow], Field(min_length=2)]
    fit: Fit


@with_config(STRICT)
class Sweep(TypedDict):
    algorithm: Literal["gloo-ring", "nccl-auto", "nccl-ring", "nccl-tree"]
    note: str
    collectives: Annotated[list[CollectiveSweep], Field(min_length=1)]


@with_config(STRICT)
class Topology(TypedDict):
    mode: Literal["netns", "flat", "gpu-groups"]  # emulated nodes, none, or GPUs grouped on one host
    note: str
    nodes: PosInt
    ranks_per_node: PosInt
    link_mbit: NonNegFloat | None
    link_delay_ms: NonNegFloat | None
    delay_applied: bool


@with_config(STRICT)
class Scope(TypedDict):
    scope: Literal["intra-node", "cross-node", "all ranks"]
    ranks: PosInt
    bytes: PosInt
    time_ms: Ms
    busbw_gbs: NonNegFloat


@with_config(STRICT)
class Phases(TypedDict):
    reduce_scatter: Ms
    all_reduce_across: Ms
    all_gather: Ms


@with_config(STRICT)
class Egress(TypedDict):
    measured_flat_bytes: NonNegFloat | None  # per node per all-reduce, from the interface's counters
    measured_hierarchical_bytes: NonNegFloat | None
    predicted_flat_bytes: NonNegFloat
    predicted_hierarchical_bytes: NonNegFloat
    nics_per_node: PosInt
    nic_bytes_per_s: NonNegFloat | None
    predicted_flat_ms: NonNegFloat | None  # bytes / (NICs per node x per-NIC bandwidth)
    predicted_hierarchical_ms: NonNegFloat | None


@with_config(STRICT)
class Hierarchy(TypedDict):
    bytes: PosInt
    flat_ms: Ms
    hierarchical_ms: Ms
    flat_over_hierarchical: NonNegFloat
    phases_ms: Phases
    max_abs_diff: NonNegFloat  # flat vs hierarchical result, on integers: must be 0
    egress: Egress
    artifacts: TimelineArtifacts


class CollectivesResults(LabResults):
    timing: Timing
    ranks: Annotated[int, Field(ge=2)]
    topology: Topology
    sweeps: Annotated[list[Sweep], Field(min_length=1)]
    scopes: Annotated[list[Scope], Field(min_length=1)]
    hierarchy: Hierarchy
    busbw_chart: str  # the artifact path of the bus-bandwidth chart
    iters: NonNegInt
