"""context-parallel's `results` in result.json (torch-free): per method (ring zig-zag, ring contiguous, ring
without overlap, Ulysses all-to-all) and rank, the chunk pairs computed and needed under the mask, the compute,
communication and wait time with their overlap, the bytes sent against the formula, and parity with full
attention; and what PyTorch's own context parallelism did here."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from labs.result_common import STRICT, LabResults, Ms, NonNegFloat, NonNegInt, TimelineArtifacts


@with_config(STRICT)
class CpTiming(TypedDict):
    kind: Literal["cpu-wall-clock", "cuda-stream-sync"]
    unit: Literal["ms"]
    note: str


@with_config(STRICT)
class CpRank(TypedDict):
    """One rank's median pass."""

    rank: NonNegInt
    chunks: list[NonNegInt]  # the sequence chunks (of 2N) whose queries this rank holds
    pass_ms: Ms
    blocks_computed: NonNegFloat  # (query chunk, key chunk) pairs computed; the diagonal one counts whole
    blocks_needed: NonNegFloat  # pairs the causal mask needs; the diagonal one counts half
    flops_computed: NonNegInt
    flops_needed: NonNegInt
    compute_ms: Ms  # |union of compute spans|
    compute_cpu_ms: Ms  # thread CPU time of the attention, median over passes (CPU); the stream's time on CUDA
    communication_ms: Ms  # |union of send/recv spans|, posted to completed
    wait_ms: Ms  # blocked on a receive after the block's compute
    overlap_ratio: float | None  # |compute ∩ communication| / |communication|
    exposed_communication_ms: Ms
    send_bytes: NonNegInt  # bytes this rank sent to other ranks in the pass
    max_abs_err: NonNegFloat  # against full attention, this rank's rows


@with_config(STRICT)
class CpVariant(TypedDict):
    method: Literal["ring", "ulysses"]
    split: Literal["zigzag", "contiguous"]
    overlapped: bool  # the ring's transfers posted before the block's attention, waited for after it
    ranks: Annotated[list[CpRank], Field(min_length=2)]
    pass_ms: Ms
    max_abs_err: NonNegFloat
    work_imbalance: float | None  # max / min of blocks needed over ranks; None when a rank needs none
    model_work_imbalance: float | None  # the same from the split's arithmetic (labs/context_parallel/work.py)
    compute_time_imbalance: float | None  # max / min of compute_cpu_ms
    overlap_ratio: float | None
    exposed_communication_ms: Ms
    send_bytes_per_rank: NonNegInt
    formula_bytes_per_rank: NonNegInt
    artifacts: TimelineArtifacts


CpVariants = TypedDict(
    "CpVariants",
    {
        "ring-zigzag": CpVariant,
        "ring-contiguous": CpVariant,
        "ring-serial": CpVariant,
        "ulysses": CpVariant,
    },
    total=False,
)
with_config(STRICT | ConfigDict(json_schema_extra={"minProperties": 1}))(CpVariants)


@with_config(STRICT)
class TorchContextParallel(TypedDict):
    """PyTorch's own: its ring loop `_templated_ring_attention` called with this device's SDPA op, and whether the
    public `context_parallel()` runs here (the error it raised, or None)."""

    ring_max_abs_err: NonNegFloat | None
    ring_error: str | None
    context_parallel_error: str | None


@with_config(STRICT)
class CpBackward(TypedDict):
    """The zig-zag ring's backward, once: largest |ring − autograd through full attention| of each gradient,
    relative to that gradient's largest entry, over ranks."""

    split: Literal["zigzag"]
    max_rel_err_dq: NonNegFloat
    max_rel_err_dk: NonNegFloat
    max_rel_err_dv: NonNegFloat
    tolerance: NonNegFloat


class ContextParallelResults(LabResults):
    timing: CpTiming
    ranks: Annotated[int, Field(ge=2)]
    seq_len: Annotated[int, Field(ge=1)]
    heads: Annotated[int, Field(ge=1)]
    head_dim: Annotated[int, Field(ge=1)]
    chunk_tokens: Annotated[int, Field(ge=1)]
    causal: bool
    tolerance: NonNegFloat
    variants: CpVariants
    torch_context_parallel: TorchContextParallel
    backward: CpBackward | None  # None when the run skipped the backward check
