"""tp-sweep parameters, limits and resources (torch-free: the web tier reads this through labs.catalog)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from labs.parallel.dims import TPDims
from labs.params import LabParams
from labs.resources import GPU_BACKENDS, PROCESS_BASE_BYTES, Problem, Resources, fmt_bytes

# Parity tolerances: the sharded block does the same arithmetic in a different order.
TOLERANCES = {
    "FP32_REORDER": {
        "max_rel_diff": 1e-5,
        "reason": "fp32 partial sums added across ranks in another order: a few ulps (~6e-8 each) of the largest term",
    },
    "FP8_PER_SHARD_SCALE": {
        "max_rel_diff": 0.125,
        "reason": "each rank scales its own shard to FP8, so values land on a different E4M3 grid (2**-3 relative step) than at TP=1",
    },
}


class TpSweepParams(LabParams):
    degrees: list[Annotated[int, Field(ge=1, le=8)]] = Field(
        default=[1, 2, 4],
        min_length=1,
        max_length=4,
        description="TP degrees to run; one process per rank, up to the devices available",
    )
    tokens: int = Field(256, ge=8, le=8192, description="rows of the activation (batch x sequence) fed to the block")
    hidden: int = Field(512, ge=16, le=8192, description="model width: fc1 input and fc2 output")
    ffn: int = Field(
        2048, ge=16, le=32768, description="MLP inner width, the dimension TP splits; must divide by every degree"
    )
    steps: int = Field(5, ge=1, le=50, description="timed forward+backward steps per degree (the median is reported)")
    warmup: int = Field(2, ge=0, le=10, description="untimed steps first, so allocation and first-call costs stay out")
    fp8: bool = Field(
        False, description="emulate FP8 GEMM inputs (HYBRID: E4M3 forward, E5M2 gradients, per-shard current scaling)"
    )
    predict_node: Literal["H200", "H100-SXM"] = Field("H200", description="GPU node the cost model predicts for")
    predict_precision: Literal["bf16", "fp8"] = Field("bf16", description="GEMM precision of the prediction")
    predict_tokens: int = Field(
        0, ge=0, le=1_000_000, description="tokens for the prediction; 0 = same as the measured block"
    )
    predict_hidden: int = Field(
        0, ge=0, le=65536, description="hidden for the prediction; 0 = same as the measured block"
    )
    predict_ffn: int = Field(0, ge=0, le=262144, description="ffn for the prediction; 0 = same as the measured block")
    seed: int = Field(
        0, ge=0, le=2**31 - 1, description="seeds weights and inputs, so TP=1 and TP>1 see the same block"
    )
    rank_timeout_s: int = Field(
        300, ge=10, le=1800, description="a rank that has not finished by then is stopped and the job fails"
    )

    @field_validator("degrees")
    @classmethod
    def _unique_sorted(cls, v: list[int]) -> list[int]:
        return sorted(set(v))


Params = TpSweepParams  # every lab's parameters are `Params` to its own code


def device_for(backend: str) -> str:
    return "cuda" if backend in GPU_BACKENDS else "cpu"


def limits(params: Params, backend: str) -> list[Problem]:
    """Every degree must split ffn evenly (fc1 by rows, fc2 by columns)."""
    out = []
    for d in params.degrees:
        errs = TPDims(degree=d, hidden=params.hidden, ffn=params.ffn).problems()
        if errs:
            out.append(Problem("degrees", "degrees: " + "; ".join(errs)))
    return out


def resources(params: Params, backend: str) -> Resources:
    """max(degrees) rank processes plus the launching process, which also computes the TP=1 reference.

    Conservatively every process is counted with the unsharded block (rank 0 runs TP=1): FP32 weights
    and their gradients (2 x 2 x ffn x hidden), the input, output and their gradients (4 x tokens x
    hidden), and the MLP activation before and after GELU with its gradient (3 x tokens x ffn).
    """
    ranks = max(params.degrees)
    elems = 4 * params.ffn * params.hidden + 4 * params.tokens * params.hidden + 3 * params.tokens * params.ffn
    per_process = 4 * elems
    gpu = backend in GPU_BACKENDS
    total = (ranks + 1) * PROCESS_BASE_BYTES + (1 if gpu else ranks + 1) * per_process
    return Resources(
        ranks=ranks,
        gpus=ranks if gpu else 0,
        cpus=1 if gpu else ranks,
        memory_bytes=total,
        memory_note=(
            f"{ranks} rank(s) + 1 launcher, each {fmt_bytes(PROCESS_BASE_BYTES)} for the process"
            + ("" if gpu else f" + {fmt_bytes(per_process)} of FP32 tensors for the unsharded block")
            + (f"; the launcher's TP=1 reference {fmt_bytes(per_process)}" if gpu else "")
        ),
        ranks_field="degrees",
        memory_field="ffn",
    )
