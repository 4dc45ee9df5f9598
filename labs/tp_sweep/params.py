"""tp-sweep parameters, limits and resources (torch-free: the web tier reads this through labs.catalog)."""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict

from pydantic import Field, field_validator
from pydantic.config import JsonDict

from labs.parallel.dims import TPDims
from labs.params import LabParams, Preset, rank_timeout_field, seed_field
from labs.resources import (
    CPU_GEMM_FLOPS,
    GPU_BACKENDS,
    GPU_GEMM_FLOPS,
    PROCESS_BASE_BYTES,
    RANK_START_S,
    START_S,
    TRACKER_BYTES,
    Problem,
    Resources,
)
from labs.words import byte_size, number


class Tolerance(TypedDict):
    max_rel_diff: float  # the largest relative difference from the TP=1 block that passes
    reason: str  # why a correct run differs by up to that much, shown beside the number


# Parity tolerances: the sharded block does the same arithmetic in a different order.
TOLERANCES: dict[str, Tolerance] = {
    "FP32_REORDER": {
        "max_rel_diff": 1e-5,
        # an fp32 ulp is 2**-24 of the value it rounds
        "reason": "fp32 partial sums added across ranks in another order: a few ulps "
        f"(about {number(2**-24, 1)} each) of the largest term",
    },
    "FP8_TP_AMAX": {
        "max_rel_diff": 1e-3,
        "reason": "emulated FP8 with every tensor's amax reduced over the TP group (the emulation's choice: "
        "Transformer Engine's delayed scaling does it, its current scaling only for sequence-parallel inputs and "
        "gradients), so every shard is cast with TP=1's scale: fp32 sums in another order, and now and then a value "
        "that order tips across an E4M3 rounding boundary",
    },
    # The GPU runs the Megatron block in BF16, the precision the prediction prices (labs.tp_sweep.run.megatron_dtype).
    "BF16_VS_FP32": {
        "max_rel_diff": 0.02,
        "reason": "on GPU the block runs in BF16 (8 significant bits, 2**-8 relative) against the FP32 TP=1 block",
    },
    "FP8_IN_BF16": {
        "max_rel_diff": 0.125,
        "reason": "on GPU the emulated FP8 block holds BF16 tensors: a value rounded to BF16 before its cast can land "
        "one E4M3 step (2**-3 relative) from where the FP32 TP=1 block puts it",
    },
}
# The te.Linear block's parity (te backend): kept apart because the grader's checks (labs/tp_sweep/checks.py)
# judge the Megatron block, whose tolerance is one of the four above.
TE_TOLERANCES: dict[str, Tolerance] = {
    "TE_BF16": {
        "max_rel_diff": 0.02,
        "reason": "te.Linear under BF16 autocast rounds GEMM inputs to 8 significant bits (2**-8 relative) and sums in another order than the FP32 TP=1 block",
    },
    "TE_FP8": {
        "max_rel_diff": 0.25,
        "reason": "Transformer Engine's FP8 GEMMs against the FP32 TP=1 block: E4M3 inputs (2**-3 relative step) "
        "forward and E5M2 gradients (2**-2) backward (HYBRID)",
    },
}

# The lab form's fieldsets (app/services/jobs/forms.py): `group` is a field's legend, groups in the order they first
# appear (the backend choice joins the first); `advanced` folds a knob a first run leaves alone under "More settings",
# open by itself once it differs from its default or has an error.
RUN: JsonDict = {"group": "Run"}
RUN_MORE: JsonDict = {"group": "Run", "advanced": True}
SHAPE: JsonDict = {"group": "Block shape"}
FP8: JsonDict = {"group": "FP8 and the te backend"}
FP8_MORE: JsonDict = {"group": "FP8 and the te backend", "advanced": True}
PREDICT: JsonDict = {"group": "Cost-model prediction"}
PREDICT_MORE: JsonDict = {"group": "Cost-model prediction", "advanced": True}


class TpSweepParams(LabParams):
    degrees: list[Annotated[int, Field(ge=1, le=8)]] = Field(
        default=[1, 2, 4],
        min_length=1,
        max_length=4,
        description="TP degrees to run; one process per rank, up to the devices available",
        title="TP degrees",
        json_schema_extra=RUN,
    )
    tokens: int = Field(
        256,
        ge=8,
        le=8192,
        description="Rows of the activation (batch x sequence) fed to the block",
        title="Tokens",
        json_schema_extra=SHAPE,
    )
    hidden: int = Field(
        512,
        ge=16,
        le=8192,
        description="Model width: fc1 input and fc2 output",
        title="Model width",
        json_schema_extra=SHAPE,
    )
    ffn: int = Field(
        2048,
        ge=16,
        le=32768,
        description="MLP inner width, the dimension TP splits; must divide by every degree",
        title="MLP hidden width",
        json_schema_extra=SHAPE,
    )
    steps: int = Field(
        5,
        ge=1,
        le=50,
        description="Timed forward+backward steps per degree (the median is reported); as many again are traced "
        "for the GEMM and collective split",
        title="Timed steps",
        json_schema_extra=RUN,
    )
    warmup: int = Field(
        2,
        ge=0,
        le=10,
        description="Untimed steps first, so allocation and first-call costs stay out (at least 1 on a GPU)",
        title="Warm-up steps",
        json_schema_extra=RUN,
    )
    fp8: bool = Field(
        False,
        description="FP8 GEMM inputs (HYBRID: E4M3 forward, E5M2 gradients): emulated per shard on cpu and torch-cuda, "
        "Transformer Engine's kernels with the recipe below on te",
        title="FP8 GEMMs",
        json_schema_extra=FP8,
    )
    recipe: Literal["delayed", "current", "block", "mxfp8"] = Field(
        "delayed",
        description="te backend with fp8: the Transformer Engine FP8 recipe of the te.Linear block",
        title="FP8 scaling recipe (te)",
        json_schema_extra=FP8_MORE,
    )
    sequence_parallel: bool = Field(
        False,
        description="te backend: te.Linear's sequence parallelism (all-gather + reduce-scatter along tokens instead "
        "of all-reduce)",
        title="Sequence parallelism (te)",
        json_schema_extra=FP8_MORE,
    )
    predict_node: Literal["H200", "H100-SXM"] = Field(
        "H200",
        description="GPU node the cost model predicts for",
        title="Predicted GPU node",
        json_schema_extra=PREDICT,
    )
    predict_precision: Literal["bf16", "fp8"] = Field(
        "bf16",
        description="GEMM precision of the prediction",
        title="Predicted precision",
        json_schema_extra=PREDICT,
    )
    predict_tokens: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Tokens for the prediction; 0 = same as the measured block",
        title="Predicted tokens",
        json_schema_extra=PREDICT_MORE,
    )
    predict_hidden: int = Field(
        0,
        ge=0,
        le=65536,
        description="Model width (hidden) for the prediction; 0 = same as the measured block",
        title="Predicted model width",
        json_schema_extra=PREDICT_MORE,
    )
    predict_ffn: int = Field(
        0,
        ge=0,
        le=262144,
        description="MLP hidden width (ffn) for the prediction; 0 = same as the measured block",
        title="Predicted MLP hidden width",
        json_schema_extra=PREDICT_MORE,
    )
    seed: int = seed_field("Seeds weights and inputs, so TP=1 and TP>1 see the same block", RUN_MORE)
    rank_timeout_s: int = rank_timeout_field(RUN_MORE)

    @field_validator("degrees")
    @classmethod
    def _unique_sorted(cls, v: list[int]) -> list[int]:
        return sorted(set(v))


Params = TpSweepParams  # every lab's parameters are `Params` to its own code


def limits(params: Params, backend: str) -> list[Problem]:
    """Every degree must split ffn evenly (fc1 by rows, fc2 by columns); te adds TE's shape rules."""
    out = []
    for d in params.degrees:
        errs = TPDims(degree=d, hidden=params.hidden, ffn=params.ffn).problems()
        if errs:
            out.append(Problem("degrees", "degrees: " + "; ".join(errs)))
    if backend == "te":
        # TE's FP8 GEMMs want dims that are multiples of 16 (32 for MXFP8 blocks, 128 for 1x128 tiles); with
        # sequence parallelism every rank holds tokens / degree rows.
        align = {"block": 128, "mxfp8": 32}.get(params.recipe, 16) if params.fp8 else 1
        for d in params.degrees:
            rows = params.tokens // d if params.sequence_parallel else params.tokens
            if params.sequence_parallel and params.tokens % d:
                out.append(
                    Problem("tokens", f"tokens: {params.tokens} % degree {d} != 0; sequence parallelism splits tokens")
                )
            for name, v in (("tokens", rows), ("hidden", params.hidden), ("ffn", params.ffn // d)):
                if v % align:
                    what = f"{name}({v})" if name != "ffn" else f"ffn / degree {d} ({v})"
                    out.append(
                        Problem(
                            name, f"{name}: {what} is not a multiple of {align}, as TE's {params.recipe} FP8 GEMMs need"
                        )
                    )
                    break
    return out


def te_recipe_name(params: Params, backend: str) -> str | None:
    """The recipe handed to Transformer Engine (checked against the GPU before running): te with fp8 only."""
    return params.recipe if backend == "te" and params.fp8 else None


# Host memory of a run, calibrated against the summed RSS measured by bench/lab_memory.py (torch 2.13 CPU).
# In elements (x 4 B), with fh = ffn x hidden, th = tokens x hidden, tf = tokens x ffn:
#   each rank builds the full seeded block (2 fh + 2 th); per degree it takes part in it holds its weight
#   shards and their gradients (4 fh / d) and the step's activations (4 tf / d + 8 th); it keeps its gradient
#   shards for the launcher's parity check (2 fh / d per degree) and pickles them when it reports (a second
#   copy); rank 0 also returns the output and input gradient;
#   the launcher receives every rank's gradients (2 fh per degree), then computes the unsharded TP=1
#   reference (6 fh + activations) and concatenates one degree's shards at a time (2 fh).
# The sum of each process's own peak overstates the peak of the sum (the launcher peaks after the ranks
# exit; ranks peak at different moments): measured/counted = 0.6-0.9, so a small factor suffices.
SAFETY = 1.25


def _rank_elems(params: Params, rank: int, gpu: bool) -> int:
    f, h, t = params.ffn, params.hidden, params.tokens
    mine = [d for d in params.degrees if rank < d]
    kept = sum(2 * f * h // d for d in mine)
    out = 2 * f * h + 2 * t * h + 2 * kept + (4 * t * h if rank == 0 else 0)
    if gpu:  # the block is built on the host, then moved; shards, gradients and activations live on the GPU
        return out
    fp8 = (2 * f * h + 2 * t * f) if params.fp8 else 0  # FP8-rounded copies of the GEMM inputs
    return out + max((4 * f * h + 4 * t * f + fp8) // d + 8 * t * h for d in mine)


def _launcher_elems(params: Params) -> int:
    f, h, t = params.ffn, params.hidden, params.tokens
    return 2 * f * h * len(params.degrees) + 6 * f * h + 4 * t * f + 8 * t * h + 2 * f * h


def resources(params: Params, backend: str) -> Resources:
    """max(degrees) rank processes plus the launching process, which also computes the TP=1 reference."""
    ranks = max(params.degrees)
    gpu = backend in GPU_BACKENDS
    ranks_bytes = 4 * sum(_rank_elems(params, r, gpu) for r in range(ranks))
    received = 4 * 2 * params.ffn * params.hidden * len(params.degrees)
    launcher = 4 * _launcher_elems(params)
    tensors = max(ranks_bytes + received, launcher)
    processes = (ranks + 1) * PROCESS_BASE_BYTES + TRACKER_BYTES
    total = processes + int(SAFETY * tensors)
    unit = 4 * params.ffn * params.hidden
    return Resources(
        ranks=ranks,
        gpus=ranks if gpu else 0,
        cpus=1 if gpu else ranks,
        memory_bytes=total,
        memory_note=(
            f"{ranks} rank(s) + 1 launcher x {byte_size(PROCESS_BASE_BYTES)} + tracker {byte_size(TRACKER_BYTES)} "
            f"= {byte_size(processes)}, + {SAFETY} x the larger of: while the ranks run, "
            f"{byte_size(ranks_bytes)} in the ranks (each builds the full block: 2 x ffn({params.ffn}) x "
            f"hidden({params.hidden}) x 4 B = {byte_size(2 * unit)}, plus its shards, gradients"
            f"{'' if gpu else ' and activations'}) and {byte_size(received)} of gradients sent to the launcher; "
            f"after, the launcher's {byte_size(launcher)} (those gradients and the unsharded TP=1 reference)"
        ),
        ranks_field="degrees",
        memory_field="ffn",
    )


# Named runs the lesson's pauses ask for (lessons/transformer-scaling/parts/deep-dives.yaml links them by key).
PRESETS: tuple[Preset, ...] = (
    Preset(
        "Over-sharding at a GPU shape",
        "A Llama-3-8B MLP (4,096 tokens, 4,096 wide, ffn 14,336) in FP8 on an H100 node, too big for a CPU: the "
        "cost model predicts its collectives outgrow its GEMMs at TP=8. Measured: the small block.",
        {
            "predict_tokens": 4096,
            "predict_hidden": 4096,
            "predict_ffn": 14336,
            "predict_node": "H100-SXM",
            "predict_precision": "fp8",
        },
    ),
    Preset(
        "A narrow MLP",
        "ffn 256 gives each rank little GEMM work per byte it all-reduces: on a CPU the all-reduces usually outgrow "
        "the GEMMs by TP 2 or 4, a crossover measured at your run's own shape.",
        {"tokens": 1024, "hidden": 256, "ffn": 256},
    ),
    Preset(
        "FP8 shards",
        "Each shard quantizes with its own scale: the difference from TP=1 grows to the FP8 tolerance, "
        "and the collectives still move BF16-sized sums.",
        {"fp8": True},
    ),
)


def estimate_seconds(params: Params, backend: str) -> float:
    """Start-up, one process per rank of the largest degree, and every degree's warm-up and timed steps."""
    gemm_flops = 12 * params.tokens * params.hidden * params.ffn  # fc1 and fc2, forward and two backward GEMMs
    reduce_bytes = 4 * params.tokens * params.hidden  # fc2's all-reduce, forward and backward
    rate = GPU_GEMM_FLOPS if backend in GPU_BACKENDS else CPU_GEMM_FLOPS
    world = max(params.degrees)
    # Warm-up, the timed steps, then as many traced (and on CUDA profiled) steps for the breakdown.
    warmup = max(1, params.warmup) if backend in GPU_BACKENDS else params.warmup  # labs.parallel.timing.warmup_for
    steps = 2 * params.steps + warmup
    work = 0.0
    for d in params.degrees:
        # Ranks share the host's cores on the CPU, so a degree's GEMMs take as long in all as the unsplit ones.
        comm = 0.0 if d == 1 else 2 * reduce_bytes * 2 * (d - 1) / d / 1e9  # gloo on one host: ~1 GB/s
        work += steps * (gemm_flops / rate + comm + (params.fp8 and backend == "cpu") * 2 * gemm_flops / rate)
    reference = 2 * gemm_flops / rate  # the launcher's unsharded TP=1 block for the parity check
    return START_S + world * RANK_START_S + work + reference
