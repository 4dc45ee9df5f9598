"""The parts of result.json every lab shares: the envelope, the environment, artifacts, summary and tables.

Torch-free: the web tier validates uploaded bundles with these models. Each lab adds its own `results`
model in `labs/<lab>/result.py` (a subclass of `LabResults`), registered on its `LabSpec`;
labs.result_schema assembles the envelope per lab and generates `labs/schema/result.schema.json`.

Parts are TypedDicts because result.json is plain JSON built as dicts: a key is either required or
`NotRequired` (absent), never silently null, and no extra key is accepted (`STRICT`). Validation is
strict: "5" is not an integer, 1.5 is not one either, true is not a number.

NaN and inf pass as numbers, as JSON Schema's "number" lets them: Python's json module reads them from
an uploaded result.json, and the app's checks then fail a diverged loss with the step it diverged at,
which tells a learner more than a refused upload. `python -m labs run` itself never writes them (the
labs store null for a non-finite value, and result.json is written with allow_nan=False).
"""

from __future__ import annotations

from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,  # pydantic needs typing_extensions' TypedDict on 3.11
)

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, Strict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from labs.resources import Backend

# No unknown keys and no coercion ("5" is not an int, true is not a number, 1.5 is not an int). Python's re
# for patterns: the artifact path rule needs look-ahead, which pydantic's default engine lacks.
STRICT = ConfigDict(extra="forbid", strict=True, regex_engine="python-re")

NonNegInt = Annotated[int, Field(ge=0)]
PosInt = Annotated[int, Field(ge=1)]
NonNegFloat = Annotated[float, Field(ge=0)]
Ms = Annotated[float, Field(description="milliseconds")]
RecipeName = Literal["delayed", "current", "block", "mxfp8"]
MediaType = Literal["image/svg+xml", "application/json", "text/plain", "text/csv"]
# ISO 8601 with a UTC offset; a JSON string, so parsed from text even in strict mode.
Timestamp = Annotated[AwareDatetime, Strict(False)]
# Relative, inside the bundle: no leading slash, no '..', a plain character set.
ArtifactPath = Annotated[str, Field(pattern=r"^(?!/)(?!.*\.\.)[A-Za-z0-9_./-]+$")]


# ---- what the app renders generically ----------------------------------------------------------


# A lab builds each part by calling its class (`SummaryItem(label="Backend", value=ctx.backend)`), so mypy names a
# misspelt or renamed key where it is written; the page reads them back through read_summary_item / read_table, so
# a result that does not match these shapes is refused there, in words, rather than shown with blanks.


@with_config(STRICT)
class SummaryItem(TypedDict):
    label: str
    value: float | str | bool | None
    unit: NotRequired[str]
    note: NotRequired[str]


Cell = float | str | bool | None


@with_config(STRICT)
class Table(TypedDict):
    title: str
    columns: list[str]
    rows: list[list[Cell]]


_SUMMARY_ITEM: TypeAdapter[SummaryItem] = TypeAdapter(SummaryItem)
_TABLE: TypeAdapter[Table] = TypeAdapter(Table)


def read_summary_item(raw: Any) -> SummaryItem | None:
    """`raw` (one entry of a result's `summary`) as a SummaryItem, or None when it is not one."""
    try:
        return _SUMMARY_ITEM.validate_python(raw)
    except ValidationError:
        return None


def read_table(raw: Any) -> Table | None:
    """`raw` (one entry of a result's `tables`) as a Table, or None when it is not one."""
    try:
        return _TABLE.validate_python(raw)
    except ValidationError:
        return None


class LabResults(BaseModel):
    """Base of every lab's `results`: a summary and tables the app renders without knowing the lab."""

    model_config = STRICT

    # The answer to the lab's question (labs.spec LabSpec.question) in one sentence of the learner's
    # terms, from this run's numbers; the page leads with it. Optional: results written before it existed.
    answer: str | None = Field(None, description="the lab's question answered in one sentence from this run")
    summary: list[SummaryItem]
    tables: list[Table]


# ---- the environment block (labs.env.environment_for) ------------------------------------------


@with_config(STRICT)
class Device(TypedDict):
    type: Literal["cpu", "cuda"]
    name: str
    compute_capability: str | None
    cpu_count: int | None  # os.cpu_count() may not know
    memory_gib: NotRequired[float]  # cuda only
    count: NotRequired[NonNegInt]  # cuda only: visible GPUs


@with_config(STRICT)
class Versions(TypedDict):
    python: str
    torch: str
    cuda: str | None
    transformer_engine: str | None
    nccl: str | None


@with_config(STRICT)
class TransformerEngineInfo(TypedDict):
    available: bool
    reason: str | None


@with_config(STRICT)
class Distributed(TypedDict):
    gloo: bool
    nccl: bool


@with_config(STRICT)
class RecipeSupport(TypedDict):
    supported: bool
    reason: str | None


@with_config(STRICT)
class Precision(TypedDict):
    """How FP32 arithmetic ran (labs/precision.py pins it before a lab computes): IEEE FP32, or TF32 where an
    image's TORCH_ALLOW_TF32_CUBLAS_OVERRIDE would otherwise have turned it on."""

    fp32_matmul: Literal["ieee", "tf32"]  # FP32 GEMMs: IEEE FP32, or TF32 (10 mantissa bits) on a GPU
    cudnn_tf32: bool  # cuDNN convolutions allowed TF32
    float32_matmul_precision: Literal["highest", "high", "medium"]  # torch.get_float32_matmul_precision()
    torch_allow_tf32_cublas_override: str | None  # the variable as the run found it (NVIDIA's containers: "1")
    nvidia_tf32_override: str | None  # read by cuBLAS/cuDNN; "0" turns TF32 off everywhere
    checked_in: Literal["launcher", "every rank"]  # where the state was read back after pinning


@with_config(STRICT)
class Environment(TypedDict):
    device: Device
    versions: Versions
    transformer_engine: TransformerEngineInfo
    distributed: Distributed
    fp8_recipes: dict[RecipeName, RecipeSupport]
    backend: Backend  # the backend that ran
    label: Annotated[str, Field(min_length=10)]  # the honesty label shown with every number
    emulated: bool  # a CPU emulation (timings are CPU timings)
    # How FP8 arithmetic was done: Transformer Engine's kernels (te), or emulated in software (cpu, torch-cuda).
    fp8_numerics: NotRequired[Literal["transformer_engine", "emulated"]]
    precision: NotRequired[Precision]  # FP32 as pinned and read back (labs/precision.py)


@with_config(STRICT)
class Artifact(TypedDict):
    name: Annotated[str, Field(min_length=1)]
    path: ArtifactPath
    media_type: MediaType
    title: NotRequired[str]


@with_config(STRICT)
class TimelineArtifacts(TypedDict):
    """The two files drawn from one set of spans: an SVG timeline and a Chrome trace."""

    timeline: ArtifactPath
    trace: ArtifactPath


@with_config(STRICT)
class ProfilerRank(TypedDict):
    rank: NonNegInt
    lab_kernel_overlap_ratio: float | None  # the lab's count over the trace's GPU kernels
    hta_overlap_ratio: float | None  # Holistic Trace Analysis over the same trace
    lab_span_overlap_ratio: float | None  # the lab's own CUDA-event spans, where it has them
    difference: NonNegFloat | None  # |HTA - lab kernel count|
    communication_kernel_ms: NonNegFloat
    compute_kernel_ms: NonNegFloat
    kernels: NonNegInt


@with_config(STRICT)
class ProfilerCheck(TypedDict):
    """Overlap from a CUDA profiler trace's kernels: the lab's count and HTA's; a rank is in `disagree_ranks` when
    HTA or the lab's CUDA-event spans differ from the kernel count by more than `tolerance` (labs.trace.kernels).
    On CPU `applies` is false and the note says why HTA does not apply."""

    applies: bool
    tolerance: NonNegFloat
    hta_available: bool
    hta_reason: str | None
    ranks: list[ProfilerRank]
    disagree_ranks: list[NonNegInt]
    note: str


# ---- the envelope ------------------------------------------------------------------------------


class Envelope(BaseModel):
    """What `python -m labs run` writes around a lab's results; labs.result_schema adds per lab the
    `lab` tag, the lab's `Params` and its `results` model."""

    model_config = STRICT

    schema_version: Literal[1] = Field(description="changes when a field's meaning or shape changes")
    environment: Environment
    started_at: Timestamp
    finished_at: Timestamp
    artifacts: list[Artifact]


def table_number(v: Any, nd: int = 3) -> float | None:
    """A number for a result table: `nd` decimals, except that a nonzero value too small for them keeps three
    significant figures (a predicted 2.5e-06 ms is not 0)."""
    if v is None:
        return None
    x = round(float(v), nd)
    return float(f"{float(v):.3g}") if x == 0 and v != 0 else x
