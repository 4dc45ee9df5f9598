"""fp8-step's `results` in result.json (torch-free): both runs, the FP8 tensors' evidence, timing and memory.

Written by labs/fp8_step/run.py (numbers from evidence.py, summary and tables from report.py); read by
the app's checks and pages. Per-step lists hold null where a diverged run produced NaN or inf.
"""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import Field, with_config
from typing_extensions import TypedDict

from labs.fp8_step.params import Accumulation, AmaxAlgo, DelayedUpdate, Fp8FormatChoice, RecipeKind
from labs.resources import Backend
from labs.result_common import STRICT, LabResults, Ms, NonNegFloat, NonNegInt, PosInt

Fp8Format = Literal["e4m3", "e5m2"]
Role = Literal["input", "weight", "grad_output"]


@with_config(STRICT)
class RoleFormats(TypedDict):
    input: Fp8Format
    weight: Fp8Format
    grad_output: Fp8Format


@with_config(STRICT)
class RecipeInfo(TypedDict):
    kind: RecipeKind
    fp8_format: Fp8FormatChoice
    margin: NonNegInt
    amax_history_len: PosInt
    amax_compute_algo: AmaxAlgo
    formats: RoleFormats
    te_recipe: str | None  # repr of the Transformer Engine recipe object (te backend only)
    delayed_update: NotRequired[DelayedUpdate]  # fused (TE's kernel_bulk, default) or unfused (Python path)
    fprop_accumulation: NotRequired[Accumulation]  # what the emulated forward GEMMs summed with


@with_config(STRICT)
class ModelInfo(TypedDict):
    vocab: PosInt
    seq: PosInt
    d_model: PosInt
    n_layers: PosInt
    n_heads: PosInt
    ffn: PosInt
    parameters: PosInt
    fp8_layers: Annotated[list[str], Field(min_length=1)]


@with_config(STRICT)
class Sample(TypedDict):
    prompt: list[int]
    generated: list[int]
    stride: int
    correct: NonNegInt


@with_config(STRICT)
class Generation(TypedDict):
    prompt_len: PosInt
    generated_len: PosInt
    accuracy: Annotated[float, Field(ge=0, le=1)]
    follows_stride: bool
    samples: list[Sample]


@with_config(STRICT)
class Run(TypedDict):
    label: str
    loss: Annotated[list[float | None], Field(min_length=1)]
    final_loss: float | None
    ms_per_step: Annotated[Ms, Field(ge=0)]
    peak_memory_bytes: NonNegInt | None  # measured on CUDA only; null on CPU (see memory.note)
    generation: Generation


@with_config(STRICT)
class Runs(TypedDict):
    reference: Run
    fp8: Run


@with_config(STRICT)
class GradError(TypedDict):
    layer: str
    rel_error: float | None


@with_config(STRICT)
class Quantizer(TypedDict):
    """One FP8 tensor's history; long runs keep an even spread of steps plus every clipped one."""

    name: str
    layer: str
    role: Role
    format: Fp8Format
    fp8_max: float
    source: Literal["emulation", "transformer_engine"]
    steps: list[NonNegInt]
    amax: list[float | None]
    scale: list[float | None]
    clipped: list[NonNegInt] | None  # null: Transformer Engine counts no clipped values
    underflow: list[NonNegInt] | None
    numel: NonNegInt | None
    total_clipped: NonNegInt | None
    total_underflow: NonNegInt | None


@with_config(STRICT)
class Clipping(TypedDict):
    clipped_per_step: list[NonNegInt] | None
    underflow_per_step: list[NonNegInt] | None
    total_clipped: NonNegInt | None
    total_underflow: NonNegInt | None
    steps_with_clipping: list[NonNegInt]
    note: str | None


@with_config(STRICT)
class Outlier(TypedDict):
    """The spike: its step and target, and (when the target was recorded) what the scale did."""

    step: NonNegInt
    target: str
    scale_factor: float
    note: NotRequired[str]  # present when no per-step record of the target exists
    amax_before: NotRequired[float | None]
    amax_at_spike: NotRequired[float | None]
    scale_at_spike: NotRequired[float | None]
    clipped_at_spike: NotRequired[NonNegInt | None]
    scale_after: NotRequired[float | None]
    clipped_after: NotRequired[NonNegInt | None]


@with_config(STRICT)
class Fp8Timing(TypedDict):
    kind: Literal["cpu", "cuda"]
    unit: Literal["ms"]
    fp8_over_reference: NonNegFloat | None
    note: str


@with_config(STRICT)
class Memory(TypedDict):
    unit: Literal["bytes"]
    measured: bool
    note: str | None


@with_config(STRICT)
class TeScaling(TypedDict):
    scale: list[float]
    amax_history_newest: list[float]
    amax_history_len: PosInt


@with_config(STRICT)
class TeLayer(TypedDict, total=False):
    scaling_fwd: TeScaling
    scaling_bwd: TeScaling


@with_config(STRICT)
class TeMetadata(TypedDict):
    available: bool
    reason: str | None
    layers: dict[str, TeLayer]


@with_config(STRICT)
class AccumulationLayer(TypedDict):
    """One FP8 layer's forward GEMM on the same FP8 inputs, summed three ways (errors vs exact FP32)."""

    layer: str
    k: PosInt  # the reduction length
    fast_model_rel_error: NonNegFloat  # MODEL of fast accumulation (no promotion)
    promote_128_rel_error: NonNegFloat  # MODEL with promotion to FP32 every 128 of K
    fp8_inputs_rel_error: NonNegFloat  # for scale: FP8-rounded inputs vs the unrounded FP32 GEMM


@with_config(STRICT)
class AccumulationDemo(TypedDict):
    k: PosInt
    fp32: NonNegFloat
    fast: NonNegFloat
    promote_128: NonNegFloat


@with_config(STRICT)
class AccumulationEvidence(TypedDict):
    """Exact FP32 vs modelled limited-precision accumulation (labs.numerics.accumulate); all of it a MODEL."""

    label: Literal["model"]
    fprop: Accumulation  # what this run's FP8 forward GEMMs used
    model: str  # the model's settings in words
    layers: list[AccumulationLayer]  # this model's own GEMMs, on a fresh batch after training
    demo: list[AccumulationDemo]  # positive E4M3 values at growing K: where the accumulator starts to matter
    note: str


class Fp8StepResults(LabResults):
    backend: Backend
    emulated: bool = Field(description="true when FP8 was emulated in software (cpu, torch-cuda)")
    recipe: RecipeInfo
    model: ModelInfo
    steps: PosInt
    runs: Runs
    grad_rel_error_step0: list[GradError]
    quantizers: list[Quantizer]
    clipping: Clipping
    outlier: Outlier | None  # null when the run had no spike
    timing: Fp8Timing
    memory: Memory
    te_metadata: TeMetadata | None  # the te backend only
    accumulation: AccumulationEvidence | None = None  # emulated backends; null on te (the real accumulator ran)
