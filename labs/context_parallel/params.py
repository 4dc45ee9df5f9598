"""context-parallel parameters, limits and resources (torch-free: the web tier reads this through labs.catalog)."""

from __future__ import annotations

from pydantic import Field
from pydantic.config import JsonDict

from labs.params import LabParams, Preset, rank_timeout_field, ranks_field, seed_field
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

RUN: JsonDict = {"group": "Context parallelism"}
RUN_MORE: JsonDict = {"group": "Context parallelism", "advanced": True}
SIZES: JsonDict = {"group": "Attention sizes"}

# Parity with one full softmax, what the lab reports and the grader's checks (checks.py) judge by.
# FP32 attention merged block by block against one full softmax: the sums run in another order, a few ulps of
# values of order one. Far above it, a block was skipped, doubled or merged with the wrong scale.
TOL = 1e-4
# Gradients through the ring's merges against autograd through one softmax: FP32 in another order, relative to
# each gradient's largest entry.
GRAD_RTOL = 1e-4


class ContextParallelParams(LabParams):
    ranks: int = ranks_field(
        4,
        description="Context-parallel ranks N (one process each); the sequence is cut into 2N chunks",
        title="Ranks (N)",
        group=RUN,
    )
    causal: bool = Field(
        True,
        description="Causal mask: a token attends only to earlier tokens, which makes a contiguous split uneven",
        title="Causal mask",
        json_schema_extra=RUN,
    )
    serial_baseline: bool = Field(
        True,
        description="Also run the zig-zag ring with each K/V transfer waited for before the block's attention, "
        "to measure what overlapping saves",
        title="Run a no-overlap ring as well",
        json_schema_extra=RUN,
    )
    backward: bool = Field(
        True,
        description="Also check the zig-zag ring's backward once (untimed): its dQ, dK, dV against autograd "
        "through full attention",
        title="Check the backward",
        json_schema_extra=RUN,
    )
    seq_len: int = Field(
        2048,
        ge=16,
        le=65536,
        description="Tokens in the whole sequence; must divide into 2N equal chunks",
        title="Sequence length",
        json_schema_extra=SIZES,
    )
    heads: int = Field(
        4,
        ge=1,
        le=64,
        description="Attention heads; the all-to-all (Ulysses) comparison needs heads divisible by N",
        title="Heads",
        json_schema_extra=SIZES,
    )
    head_dim: int = Field(
        64,
        ge=8,
        le=256,
        description="Width of one head",
        title="Head dimension",
        json_schema_extra=SIZES,
    )
    steps: int = Field(
        3,
        ge=1,
        le=20,
        description="Timed attention passes per method (each rank's median reported, the last one drawn)",
        title="Timed passes",
        json_schema_extra=RUN_MORE,
    )
    warmup: int = Field(
        1,
        ge=0,
        le=10,
        description="Untimed passes first (at least 1 on a GPU)",
        title="Warm-up passes",
        json_schema_extra=RUN_MORE,
    )
    seed: int = seed_field("Seeds Q, K and V", RUN_MORE)
    rank_timeout_s: int = rank_timeout_field(RUN_MORE)


Params = ContextParallelParams


def chunk_tokens(p: Params) -> int:
    return p.seq_len // (2 * p.ranks)


def limits(params: Params, backend: str) -> list[Problem]:
    out = []
    n2 = 2 * params.ranks
    if params.seq_len % n2:
        out.append(
            Problem(
                "seq_len",
                f"seq_len: {params.seq_len} tokens must split into 2 x ranks = {n2} equal chunks; "
                f"seq_len % {n2} = {params.seq_len % n2}, must be 0 (try {params.seq_len - params.seq_len % n2 or n2})",
            )
        )
    if params.heads % params.ranks:
        out.append(
            Problem(
                "heads",
                f"heads: the all-to-all comparison gives each of the {params.ranks} ranks whole heads; "
                f"heads({params.heads}) % ranks({params.ranks}) = {params.heads % params.ranks}, must be 0",
            )
        )
    return out


# Host memory per rank, FP32: the whole Q, K, V and the reference output (every rank checks its own rows against
# full attention), the reference's scores for one query chunk at a time (heads x chunk x seq), and the ring's
# local shards, two K/V buffers in flight and the Ulysses head-sharded copies (each at most 3 x Q's size).
SAFETY = 1.5


def _rank_bytes(p: Params) -> int:
    qkv = p.heads * p.seq_len * p.head_dim
    scores = p.heads * max(1, chunk_tokens(p)) * p.seq_len
    return 4 * (4 * qkv + 2 * scores + 3 * qkv)


def resources(params: Params, backend: str) -> Resources:
    p = params
    return rank_job(
        p.ranks,
        backend,
        per_rank_bytes=_rank_bytes(p),
        what=f"of FP32 tensors each (Q, K, V and "
        f"the reference output for {p.seq_len} tokens x {p.heads} heads x {p.head_dim}, the reference's "
        "scores one chunk at a time, and the shards and buffers in flight)",
        memory_field="seq_len",
        safety=SAFETY,
    )


PRESETS: tuple[Preset, ...] = (
    Preset(
        "Contiguous against zig-zag",
        "Four ranks under a causal mask: the contiguous split's last rank computes seven times the first's "
        "blocks; the zig-zag split gives every rank the same.",
        {"ranks": 4, "causal": True},
    ),
    Preset(
        "No causal mask",
        "The same run without the mask: every rank needs every block, so the contiguous split is balanced too.",
        {"ranks": 4, "causal": False},
    ),
    Preset(
        "Two ranks",
        "N = 2: the ring moves N/2 = 1 times the all-to-all's bytes per rank, and contiguous work is 3 to 1.",
        {"ranks": 2, "heads": 4},
    ),
)


def flops_per_chunk_pair(p: Params) -> int:
    """QK^T and PV for one (query chunk, key chunk) pair over all heads: 2 GEMMs of 2 x c x c x d each."""
    c = chunk_tokens(p)
    return 4 * c * c * p.head_dim * p.heads


def estimate_seconds(params: Params, backend: str) -> float:
    """Start-up, one process per rank, the reference, and each method's passes."""
    n = params.ranks
    full = 4 * params.seq_len**2 * params.head_dim * params.heads
    rate = GPU_GEMM_FLOPS if backend in GPU_BACKENDS else CPU_GEMM_FLOPS
    # CPU attention runs well below GEMM peak (softmax, masking, small GEMMs): about 4x slower per FLOP.
    slow = 1.0 if backend in GPU_BACKENDS else 4.0
    # The slowest rank of a contiguous causal ring computes (4N - 1) of the 4N^2 chunk pairs; every pass shares
    # the cores (N ranks on the CPU's few), so a pass costs the whole job's FLOPs over the machine.
    methods = 3 + (1 if params.serial_baseline else 0)
    warmup = max(1, params.warmup) if backend in GPU_BACKENDS else params.warmup  # labs.parallel.timing.warmup_for
    passes = methods * (params.steps + warmup)
    per_pass = full * slow / rate
    # The backward check: full attention's forward and backward (3x) beside the ring's, once.
    reference = n * full * slow / rate * (1 + (6 if params.backward else 0))
    # Each ring step posts a send and a receive: ~1 ms on gloo.
    p2p = passes * n * 1e-3
    return START_S + n * RANK_START_S + reference + passes * per_pass + p2p
