"""The interactive lesson's three calculators: FP8 range, parallel axis, overlap window.

Inputs are strict pydantic models with bounds (errors name the field and the range); the
numbers come from the same code the lesson uses (app.content.calc, whose FP8 arithmetic a test keeps
bit-identical to labs.numerics.fp8; labs.parallel.costmodel), and predictions are labeled as predictions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.content import calc


class Fp8RangeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    amax: float = Field(240.0, gt=0, le=1e30, description="amax the scale was computed from (e.g. last step's)")
    value: float = Field(300.0, ge=-1e30, le=1e30, description="a value arriving now")
    fmt: Literal["E4M3", "E5M2"] = Field("E4M3", description="FP8 format")
    margin: int = Field(0, ge=0, le=16, description="headroom: the scale is divided by 2**margin")


class AxisIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tokens: int = Field(8192, ge=1, le=1_048_576, description="tokens per step on each TP group (batch x sequence)")
    hidden: int = Field(4096, ge=64, le=65536, description="model width H")
    ffn: int = Field(16384, ge=64, le=262144, description="MLP width (split across TP ranks)")
    node: Literal["H100-SXM", "H200"] = Field("H200", description="the node the prediction is for")
    precision: Literal["bf16", "fp8"] = Field("bf16", description="GEMM input precision")

    @model_validator(mode="after")
    def _divisible(self) -> AxisIn:
        if self.ffn % 8:
            raise ValueError(f"ffn ({self.ffn}) must be divisible by 8 so every degree up to 8 gets equal slices")
        return self


class OverlapIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    compute_ms: float = Field(12.0, ge=0, le=1e6, description="all compute in the step")
    comm_ms: float = Field(5.0, ge=0, le=1e6, description="the collective's duration")
    window_ms: float = Field(3.0, ge=0, le=1e6, description="independent compute placed between launch and wait")
    consumer_reads_result: bool = Field(False, description="the work in the window reads the gathered tensor")

    @model_validator(mode="after")
    def _window(self) -> OverlapIn:
        if self.window_ms > self.compute_ms:
            raise ValueError(f"window_ms ({self.window_ms}) cannot exceed compute_ms ({self.compute_ms})")
        return self


def fp8_range(p: Fp8RangeIn) -> dict:
    scale = calc.fp8_scale(p.amax, p.fmt, margin=p.margin)
    mapped = calc.fp8_map(p.value, scale=scale["scale"], fmt=p.fmt)
    err = abs(mapped["dequantized"] - p.value)
    return {
        "scale": scale["scale"],
        "fp8_max": scale["fp8_max"],
        "scaled": mapped["scaled"],
        "stored": mapped["stored"],
        "clipped": mapped["clipped"],
        "dequantized": mapped["dequantized"],
        "abs_error": err,
        "rel_error": err / abs(p.value) if p.value else 0.0,
        "headroom": scale["fp8_max"] / abs(mapped["scaled"]) if mapped["scaled"] else None,
    }


def parallel_axis(p: AxisIn) -> dict:
    from labs.parallel.costmodel import predict_sweep

    return predict_sweep(p.tokens, p.hidden, p.ffn, [1, 2, 4, 8], p.node, p.precision)


def overlap_window(p: OverlapIn) -> dict:
    # Work that reads the gathered result cannot start before the wait: it hides nothing.
    hidden = 0.0 if p.consumer_reads_result else min(p.window_ms, p.comm_ms)
    out = calc.step_time(p.compute_ms, p.comm_ms, hidden)
    out["unsafe"] = p.consumer_reads_result
    return out


# name -> (parameters model, calculation, title)
TOOLS: dict[str, tuple[type[BaseModel], Callable[[Any], dict], str]] = {
    "fp8-range": (Fp8RangeIn, fp8_range, "FP8 range: scale, clipping and the stale-scale spike"),
    "parallel-axis": (AxisIn, parallel_axis, "Parallel axis: where tensor parallelism stops paying (predicted)"),
    "overlap-window": (OverlapIn, overlap_window, "Overlap window: what an async collective really hides"),
}
