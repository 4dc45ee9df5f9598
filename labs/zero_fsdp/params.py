"""zero-fsdp parameters, limits and resources (torch-free: the web tier reads this through labs.catalog)."""

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
from labs.zero_fsdp import anatomy

Strategy = Literal["ddp", "zero1", "fsdp2", "fsdp2-no-reshard"]
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)

# The lab form's fieldsets (app/services/jobs/forms.py), as in the other labs.
RUN: JsonDict = {"group": "Run"}
RUN_MORE: JsonDict = {"group": "Run", "advanced": True}
MODEL: JsonDict = {"group": "Model"}
MODEL_MORE: JsonDict = {"group": "Model", "advanced": True}

# Loss parity between strategies, what the page reports and the grader's checks (checks.py) judge by. Every
# strategy sees the same data and weights; what differs is the order in which FP32 gradients are summed (one
# all-reduce vs a reduce-scatter, bucket boundaries), a few ulps per step that Adam's normalised updates can amplify
# over a few steps. 1e-4 on a loss near ln(vocab) is far above that and far below any real bug (a wrong gradient
# scale or a skipped shard moves the loss by more than 1e-2 within two steps).
LOSS_TOLERANCE = 1e-4


class ZeroFsdpParams(LabParams):
    ranks: int = ranks_field(
        2,
        description="Data-parallel processes (one per device); every strategy shards or replicates over all of them",
        group=RUN,
    )
    strategies: Annotated[list[Strategy], in_order(STRATEGIES)] = Field(
        default=list(STRATEGIES),
        min_length=1,
        max_length=4,
        description="ddp replicates everything; zero1 shards Adam's state; fsdp2 shards weights, gradients and "
        "state (fsdp2-no-reshard keeps weights gathered from forward to backward)",
        title="Strategies",
        json_schema_extra=RUN,
    )
    layers: int = Field(
        2, ge=1, le=24, description="Transformer blocks, each one FSDP2 unit", title="Layers", json_schema_extra=MODEL
    )
    hidden: int = Field(
        128,
        ge=16,
        le=4096,
        description="Model width d; a block holds 12 d² + 13 d parameters",
        title="Hidden width",
        json_schema_extra=MODEL,
    )
    heads: int = Field(
        4,
        ge=1,
        le=64,
        description="Attention heads; must divide the hidden width",
        title="Heads",
        json_schema_extra=MODEL_MORE,
    )
    vocab: int = Field(
        256,
        ge=16,
        le=65536,
        description="Vocabulary: the embedding and the output head hold vocab x d each",
        title="Vocabulary",
        json_schema_extra=MODEL_MORE,
    )
    seq: int = Field(
        64, ge=4, le=4096, description="Tokens per sequence", title="Sequence length", json_schema_extra=MODEL_MORE
    )
    batch: int = Field(
        4,
        ge=1,
        le=256,
        description="Sequences per rank per step (each rank its own data)",
        title="Batch per rank",
        json_schema_extra=MODEL_MORE,
    )
    steps: int = Field(
        4,
        ge=1,
        le=50,
        description="Timed training steps per strategy; as many again are recorded for the timeline and the bytes "
        "moved (losses compared step by step over all of them)",
        title="Timed steps",
        json_schema_extra=RUN,
    )
    warmup: int = Field(
        1,
        ge=0,
        le=10,
        description="Training steps before the timed ones, so first-call costs stay out (they count in the losses; at "
        "least 1 on a GPU)",
        title="Warm-up steps",
        json_schema_extra=RUN,
    )
    lr: float = Field(
        3e-3, gt=0, le=1.0, description="AdamW learning rate", title="Learning rate", json_schema_extra=RUN_MORE
    )
    ddp_bucket_mb: float = Field(
        0.5,
        ge=0.01,
        le=1024,
        description="DDP's gradient bucket cap (MiB); small so the all-reduces of a small model overlap backward as a big model's would",
        title="DDP bucket (MiB)",
        json_schema_extra=RUN_MORE,
    )
    seed: int = seed_field("Seeds weights and data, the same for every strategy", RUN_MORE)
    rank_timeout_s: int = rank_timeout_field(RUN_MORE)


Params = ZeroFsdpParams  # every lab's parameters are `Params` to its own code


def limits(params: Params, backend: str) -> list[Problem]:
    if params.hidden % params.heads:
        return [
            Problem(
                "heads",
                f"heads: hidden({params.hidden}) % heads({params.heads}) = {params.hidden % params.heads}, must be 0",
            )
        ]
    return []


# Host memory per rank (FP32): weights, gradients, DDP's bucket copy of them and Adam's two moments, 5 copies in
# all (DDP is the largest strategy), plus activations kept for backward (about 24 x tokens x d per block and the
# logits' tokens x vocab three times). Strategies run in fresh processes one after another, so only one is alive.
SAFETY = 1.5


def _rank_bytes(p: Params) -> int:
    n = anatomy.param_count(layers=p.layers, hidden=p.hidden, vocab=p.vocab, seq=p.seq)
    tokens = p.batch * p.seq
    acts = tokens * (24 * p.hidden * p.layers + 3 * p.vocab) + p.batch * p.heads * p.seq * p.seq * 2 * p.layers
    return 4 * (5 * n + acts)


def resources(params: Params, backend: str) -> Resources:
    """`ranks` processes plus the launcher; on a GPU the ranks' tensors live on the devices."""
    p = params
    return rank_job(
        p.ranks,
        backend,
        per_rank_bytes=_rank_bytes(p),
        what=f"each (5 FP32 copies of the "
        f"{anatomy.param_count(layers=p.layers, hidden=p.hidden, vocab=p.vocab, seq=p.seq):,} parameters "
        f"and the activations of batch({p.batch}) x seq({p.seq}) tokens)",
        memory_field="hidden",
        safety=SAFETY,
    )


# Named runs the lesson's pauses ask for (lessons/parallelism-measured/parts/zero-fsdp-lab.yaml links them by key).
PRESETS: tuple[Preset, ...] = (
    Preset(
        "DDP against ZeRO-1",
        "The same model replicated and with Adam's state sharded: only the optimizer-state bytes per rank change.",
        {"strategies": ["ddp", "zero1"]},
    ),
    Preset(
        "FSDP2 over four ranks",
        "Four ranks: each holds a quarter of the weights, gradients and state, and moves more bytes per step.",
        {"ranks": 4, "strategies": ["ddp", "fsdp2"]},
    ),
    Preset(
        "Big enough to see in memory",
        "Width 512 and 4 blocks (12.7 million parameters): DDP's process peak is now the highest by tens of MiB, "
        "and each peak sits above the counted state by what a step gathers and allocates.",
        {"hidden": 512, "layers": 4, "steps": 2, "strategies": ["ddp", "zero1", "fsdp2"]},
    ),
    Preset(
        "Reshard or keep",
        "FSDP2 with and without resharding after forward: one all-gather fewer per block against weights held longer.",
        {"strategies": ["fsdp2", "fsdp2-no-reshard"], "layers": 4},
    ),
)


def estimate_seconds(params: Params, backend: str) -> float:
    """Start-up (one launch of the ranks for every strategy), then each strategy's setup and steps."""
    p = params
    n = anatomy.param_count(layers=p.layers, hidden=p.hidden, vocab=p.vocab, seq=p.seq)
    flops = 6 * n * p.batch * p.seq  # forward + backward per rank
    gpu = backend in GPU_BACKENDS
    rate = GPU_GEMM_FLOPS if gpu else CPU_GEMM_FLOPS
    share = 1 if gpu else p.ranks  # ranks share the host's cores on the CPU
    comm = 3 * 4 * n / 1e9  # at most 3 x the weights' bytes per step over gloo (~1 GB/s)
    # Small shapes run far below GEMM peak on the CPU: a fixed cost per step for the recorder, the hooks and the
    # many small ops, and per strategy for wrapping the model (about 0.15 s and 2 s at the defaults, measured on
    # the 2-core host under load).
    per_step = share * flops / rate + comm + (0.0 if gpu else 0.15)
    # Warm-up (at least 1 on a GPU), the timed steps, as many recorded ones, and the census step.
    warmup = max(1, p.warmup) if backend in GPU_BACKENDS else p.warmup
    per_strategy = 2.0 + (2 * p.steps + warmup + 1) * per_step
    return START_S + p.ranks * RANK_START_S + len(p.strategies) * per_strategy
