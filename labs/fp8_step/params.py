"""fp8-step parameters, limits and resources (torch-free: the web tier reads this through labs.catalog)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from labs.params import LabParams, Preset, seed_field
from labs.resources import GPU_BACKENDS, GPU_GEMM_FLOPS, PROCESS_BASE_BYTES, START_S, Problem, Resources
from labs.words import byte_size, power_of_ten

_WHOLE = TypeAdapter(int)  # how an int field reads its input (lax: "5" and 4.0 are 5 and 4)

# A CPU run beyond this many estimated FLOPs per run would take many minutes; refuse it early.
CPU_FLOP_BUDGET = 2e12
# Memory of a CPU run, calibrated against the summed RSS measured by bench/lab_memory.py (torch 2.13 CPU,
# 2-core x86 host; eight shapes from the default up to 50M parameters, each term dominating in one):
# What the fp8-step process holds before its tensors: torch, autocast's BF16 kernels, SDPA (measured 500 MiB).
BASE_BYTES = 600 * 2**20
# Per parameter, for the whole run: both models' FP32 weights and gradients, one AdamW's two moments, the
# step-0 gradient copies kept for the comparison, autocast's BF16 weight casts, heap slack (measured 43 B).
STATE_BYTES_PER_PARAM = 44
# Live activations per layer and token, in FP32 elements: with ffn = 4 x d_model the emulated FP8 run holds
# about 25-60 x d_model (saved GEMM inputs and their FP8 copies, BF16 outputs, LayerNorm, GELU, residuals,
# and freed-but-kept heap); counted as 24 x d_model + 6 x ffn.
ACT_ELEMS_PER_D_MODEL, ACT_ELEMS_PER_FFN = 24, 6
# Logits in BF16 and FP32, their log-softmax and gradient: about 4 FP32 tensors of tokens x vocab.
LOGIT_COPIES = 4
# Causal attention on CPU runs a fused kernel that never holds all layers' scores; at most one layer's
# (batch x heads x seq x seq) FP32 scores exist at a time (the unfused fallback).
# On top of the calibrated count: shapes differ in how their heap fragments (measured/count = 0.7-1.0).
SAFETY = 1.5

RecipeKind = Literal["delayed", "current", "block", "mxfp8"]
Fp8FormatChoice = Literal["hybrid", "e4m3"]  # hybrid: E4M3 forward, E5M2 gradients
AmaxAlgo = Literal["max", "most_recent"]
DelayedUpdate = Literal["fused", "unfused"]
Accumulation = Literal["fp32", "fast-model"]

# The lab form's fieldsets (app/services/jobs/forms.py): `group` is a field's legend, groups in the order they first
# appear (the backend choice joins the first); `advanced` folds a knob a first run leaves alone under "More settings",
# open by itself once it differs from its default or has an error.
RUN: JsonDict = {"group": "Run"}
MODEL: JsonDict = {"group": "Model and data"}
MODEL_MORE: JsonDict = {"group": "Model and data", "advanced": True}
FP8: JsonDict = {"group": "FP8 recipe"}
FP8_MORE: JsonDict = {"group": "FP8 recipe", "advanced": True}
OUTLIER: JsonDict = {"group": "Outlier experiment"}


class Fp8StepParams(LabParams):
    # The defaults (150 steps of 16-token sequences at lr 3e-3) learn the stride task in well under a minute of
    # CPU and keep the FP8 loss within ~2-4% of BF16's at every step (seeds 0-3 measured; the grader warns past 5%).
    # Longer contexts or higher rates make both runs learn in a sharper drop, where a one-step phase lag between
    # them reads as a 5-20% gap at that step. The default spike at step 20 (8x, just after warm-up) is the lesson's
    # delayed-scaling lag: 38 values clip at step 20, none at 21, and both runs still learn the task
    # (bench/fp8_step_default.py).
    steps: int = Field(
        150,
        ge=2,
        le=5000,
        description="Training steps per run; the default learns the stride task on a laptop CPU",
        title="Training steps",
        json_schema_extra=RUN,
    )
    seed: int = seed_field("Seeds weights, batches and prompts so both runs see identical inputs", MODEL_MORE)
    batch: int = Field(16, ge=1, le=512, description="Sequences per step", title="Batch size", json_schema_extra=MODEL)
    seq: int = Field(
        16,
        ge=4,
        le=8192,
        description="Tokens per sequence (also the model's context length)",
        title="Sequence length",
        json_schema_extra=MODEL,
    )
    d_model: int = Field(
        64,
        ge=8,
        le=8192,
        description="Residual width; a multiple of n_heads (and of 16 for TE FP8 GEMMs)",
        title="Model width",
        json_schema_extra=MODEL,
    )
    n_layers: int = Field(
        2,
        ge=1,
        le=48,
        description="Transformer blocks; each has four FP8 GEMMs",
        title="Layers",
        json_schema_extra=MODEL,
    )
    n_heads: int = Field(
        4,
        ge=1,
        le=128,
        description="Attention heads; must divide d_model",
        title="Attention heads",
        json_schema_extra=MODEL,
    )
    ffn: int = Field(
        256,
        ge=8,
        le=65536,
        description="MLP hidden width (4 x d_model is the GPT-2 habit)",
        title="MLP hidden width",
        json_schema_extra=MODEL,
    )
    vocab: int = Field(
        32,
        ge=8,
        le=65536,
        description="Token ids; the stride task counts modulo vocab",
        title="Vocabulary size",
        json_schema_extra=MODEL_MORE,
    )
    lr: float = Field(
        3e-3,
        gt=0.0,
        le=0.1,
        description="Peak AdamW learning rate (10% warmup, cosine to a tenth), same for both runs",
        title="Learning rate",
        json_schema_extra=MODEL_MORE,
    )
    recipe: RecipeKind = Field(
        "delayed",
        description="FP8 scaling recipe: per-tensor delayed or current, 1x128/128x128 blocks, or MXFP8",
        title="FP8 scaling recipe",
        json_schema_extra=FP8,
    )
    fp8_format: Fp8FormatChoice = Field(
        "hybrid",
        description="hybrid: E4M3 forward, E5M2 gradients; e4m3: E4M3 everywhere",
        title="FP8 format",
        json_schema_extra=FP8,
    )
    margin: int = Field(
        0,
        ge=0,
        le=16,
        description="Delayed scaling headroom: the scale is divided by 2 to this power (1 halves it)",
        title="Scale margin",
        json_schema_extra=FP8_MORE,
    )
    amax_history_len: int = Field(
        16,
        ge=1,
        le=1024,
        description="Delayed scaling: steps of amax the scale looks back over",
        title="Amax history length",
        json_schema_extra=FP8_MORE,
    )
    amax_compute_algo: AmaxAlgo = Field(
        "max",
        description="Delayed scaling: largest amax in the window, or only the last step's",
        title="Amax from the history",
        json_schema_extra=FP8_MORE,
    )
    delayed_update: DelayedUpdate = Field(
        "fused",
        description="Delayed scaling's history update: fused is TE's default kernel (a step whose amax is 0 neither "
        "rolls nor rescales, NaN ignored); unfused is TE's Python path (NVTE_UNFUSED_FP8_UPDATE=1)",
        title="Delayed-scaling update",
        json_schema_extra=FP8_MORE,
    )
    fprop_accumulation: Accumulation = Field(
        "fp32",
        description="Emulation only: forward GEMM products summed exactly in FP32, or through the MODEL of Hopper's "
        "fast FP8 accumulator (~14 bits, no promotion) that TE uses for the delayed and current recipes",
        title="Forward GEMM accumulation",
        json_schema_extra=FP8_MORE,
    )
    outlier_step: int | None = Field(
        20,
        ge=0,
        le=4999,
        description="Step at which one token's activation spikes; empty for a run without a spike",
        title="Outlier step",
        json_schema_extra=OUTLIER,
    )
    outlier_scale: float = Field(
        8.0,
        ge=1.0,
        le=1e4,
        description="How many times larger the spiking activation row is",
        title="Outlier size",
        json_schema_extra=OUTLIER,
    )

    @field_validator("n_heads")
    @classmethod
    def _heads_divide_width(cls, v: int, info):
        d = info.data.get("d_model")
        if d is not None and d % v:
            raise PydanticCustomError(
                "cross_field",
                "a divisor of d_model={d} (d_model % n_heads = {r}: heads must split the width evenly)",
                {"d": d, "r": d % v},
            )
        return v

    @model_validator(mode="before")
    @classmethod
    def _default_spike_fits(cls, data):
        # The default spike (step 20) belongs to the default length; a shorter run that does not name a spike step
        # runs without one, rather than being refused for a field the learner never set.
        if isinstance(data, dict) and "outlier_step" not in data:
            try:  # as the field reads it: "5" and 4.0 are steps too, so they drop the spike as 5 and 4 do
                steps = _WHOLE.validate_python(data.get("steps"))
            except ValidationError:
                return data  # no steps, or none that reads as a number: the field's own error says so
            default = cls.model_fields["outlier_step"].default
            if not isinstance(data.get("steps"), bool) and steps <= default:
                return data | {"outlier_step": None}
        return data

    @field_validator("outlier_step")
    @classmethod
    def _outlier_inside_run(cls, v: int | None, info):
        steps = info.data.get("steps")
        if v is not None and steps is not None and v >= steps:
            raise PydanticCustomError(
                "cross_field", "a step below steps={steps} (the spike must happen during the run)", {"steps": steps}
            )
        return v


Params = Fp8StepParams  # every lab's parameters are `Params` to its own code


def te_recipe_name(p: Params, backend: str) -> str | None:
    """The recipe handed to Transformer Engine on the te backend (checked against the GPU before running)."""
    return p.recipe if backend == "te" else None


def param_count(p: Params) -> int:
    per_block = 4 * p.d_model * p.d_model + 2 * p.d_model * p.ffn
    return p.n_layers * per_block + (2 * p.vocab + p.seq) * p.d_model


def limits(p: Params, backend: str) -> list[Problem]:
    """Backend-dependent rules beyond the bounds of each field, checked before anything runs."""
    if backend == "cpu":
        flops = 6 * param_count(p) * p.batch * p.seq * p.steps
        if flops > CPU_FLOP_BUDGET:
            return [
                Problem(
                    "steps",
                    f"steps: about {power_of_ten(flops, 2)} FLOPs, over the cpu backend's budget of "
                    f"{power_of_ten(CPU_FLOP_BUDGET, 1)}; take fewer steps, a smaller batch, seq or model, or a GPU backend",
                    f"6 × {param_count(p):,} parameters × batch {p.batch:,} × seq {p.seq:,} × {p.steps:,} steps\n"
                    f"≈ {power_of_ten(flops, 2)} FLOPs per run\n"
                    f"> {power_of_ten(CPU_FLOP_BUDGET, 1)}, the cpu backend's budget",
                )
            ]
    if backend == "te":
        # TE's FP8 GEMMs need 16-aligned dims; block recipes need whole tiles along the reduction dim.
        align = te_alignment(p)
        for name, v in (("d_model", p.d_model), ("ffn", p.ffn), ("seq", p.seq)):
            if v % align:
                return [
                    Problem(
                        name,
                        f"{name}: got {v}, expected a multiple of {align} for Transformer Engine's {p.recipe} FP8 GEMMs",
                    )
                ]
    return []


def te_alignment(p: Params) -> int:
    """Shape multiple TE's FP8 GEMMs need: 16 per tensor, whole 32-blocks (MX) or 128-tiles (block)."""
    return {"block": 128, "mxfp8": 32}.get(p.recipe, 16)


def resources(p: Params, backend: str) -> Resources:
    """One process holding both models (BF16 reference and FP8) and one run's activations at a time."""
    n = param_count(p)
    tokens = p.batch * p.seq
    gpu = backend in GPU_BACKENDS
    if gpu:
        # The tensors live in device memory; the host builds each model on the CPU before moving it (a copy
        # of its FP32 weights at a time, counted for both). Not measured: no GPU was available to calibrate.
        weights = 2 * n * 4
        return Resources(
            ranks=1,
            gpus=1,
            cpus=1,
            memory_bytes=PROCESS_BASE_BYTES + weights,
            memory_note=(
                f"process {byte_size(PROCESS_BASE_BYTES)} + 2 models x {n:,} params x 4 B = {byte_size(weights)} "
                "on the host (the tensors live on the GPU)"
            ),
            memory_field="d_model",
        )
    state = n * STATE_BYTES_PER_PARAM
    per_token = ACT_ELEMS_PER_D_MODEL * p.d_model + ACT_ELEMS_PER_FFN * p.ffn
    acts = 4 * p.n_layers * tokens * per_token
    attn = 4 * p.batch * p.n_heads * p.seq * p.seq
    logits = 4 * LOGIT_COPIES * tokens * p.vocab
    total = BASE_BYTES + int(SAFETY * (state + acts + attn + logits))
    # The refusal belongs to the parameter behind the largest term: the model's width for its state, the batch
    # for activations and logits (tokens = batch x seq), the sequence for attention scores (seq²).
    drivers = {"d_model": state, "batch": acts + logits, "seq": attn}
    return Resources(
        ranks=1,
        gpus=0,
        cpus=1,
        memory_bytes=total,
        memory_note=(
            f"process {byte_size(BASE_BYTES)} + {SAFETY} x (state {n:,} params x {STATE_BYTES_PER_PARAM} B = "
            f"{byte_size(state)}; activations {p.n_layers} layers x {tokens:,} tokens x ({ACT_ELEMS_PER_D_MODEL} x "
            f"d_model {p.d_model} + {ACT_ELEMS_PER_FFN} x ffn {p.ffn}) x 4 B = {byte_size(acts)}; attention scores "
            f"{p.batch} x {p.n_heads} heads x {p.seq}² x 4 B = {byte_size(attn)}; logits {LOGIT_COPIES} x {tokens:,} "
            f"tokens x {p.vocab:,} vocab x 4 B = {byte_size(logits)})"
        ),
        memory_field=max(drivers, key=lambda k: drivers[k]),
    )


# Named runs the lesson's pauses ask for (lessons/transformer-scaling/parts/deep-dives.yaml links them by key).
PRESETS: tuple[Preset, ...] = (
    Preset(
        "Spike at step 20",
        "One token's activation jumps 8x at step 20: delayed scaling meets it with the old scale and clips, "
        "and the next step's scale has caught up (the default run).",
        {"outlier_step": 20},
    ),
    Preset(
        "Delayed vs current",
        "The same spike under current scaling: the scale comes from the tensor being cast, so nothing clips; "
        "put it beside a delayed run.",
        {"recipe": "current", "outlier_step": 20},
    ),
    Preset(
        "Margin as headroom",
        "Delayed scaling with margin 3 divides every scale by 8: the 8x spike fits, and small values lose "
        "resolution instead.",
        {"outlier_step": 20, "margin": 3},
    ),
    Preset(
        "Blocks contain the spike",
        "Per-block scaling (1x128 activations): the spike sets only its own block's scale, so the rest of the "
        "tensor keeps its resolution.",
        {"recipe": "block", "outlier_step": 20},
    ),
    Preset(
        "No spike",
        "The clean baseline: the same run without an outlier, so any clipping left is the scale lag of training alone.",
        {"outlier_step": None},
    ),
)

# The CPU cost model (labs/resources.py says how the constants were measured: bench/cost_model_fit.py). Per training
# step of both runs together (the lab's own ms_per_step, BF16 + FP8): a fixed cost per layer (autograd, AdamW, the
# emulated FP8 quantizers' small ops; 6.0 ms a step for a 1-layer tiny model, where FLOPs are nil), and one run's
# training FLOPs (6 x parameters x tokens, plus attention's 12 x layers x batch x seq^2 x d_model) at the rate these
# small GEMMs and the FP8 emulation's passes reach for both runs together: 17.6 ms a step at the defaults
# (159 MFLOP), 73 ms at d_model 128 x 4 layers (1.25 GFLOP), 94 ms at batch 32 x seq 64 (1.5 GFLOP).
CPU_STEP_S_PER_LAYER = 0.0058
CPU_TRAIN_FLOPS = 2.2e10
# Before and after training: building both models, generation checks, accumulation evidence, charts, result.json
# (a 4-step tiny run takes 2.7 s in all, START_S included; the defaults' fixed part is 2.8-3.0 s).
TAIL_S = 1.5
# Steps each run times after training (labs/fp8_step/run.py timed_steps): enough for a median, few beside training.
TIMED_STEPS = 10


def estimate_seconds(p: Params, backend: str) -> float:
    """Start-up, two training runs (BF16 and FP8) of `steps` steps, and the evidence after them."""
    flops = 6 * param_count(p) * p.batch * p.seq  # one run's training step
    attention = 12 * p.n_layers * p.batch * p.seq * p.seq * p.d_model  # scores and their use, forward and backward
    # Each run also times TIMED_STEPS steps after training (labs/fp8_step/run.py), with its evidence off.
    steps = p.steps + TIMED_STEPS
    if backend in GPU_BACKENDS:
        per_step = 2 * 0.004 * p.n_layers + 2 * flops / GPU_GEMM_FLOPS  # launch-bound until the model is large
        return START_S + 10.0 + steps * per_step
    per_step = p.n_layers * CPU_STEP_S_PER_LAYER + (flops + attention) / CPU_TRAIN_FLOPS
    return START_S + TAIL_S + steps * per_step
