"""Ring all-reduce time: the bandwidth term and the latency term that grows with the ring."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from labs.api import Series, line_chart

from .. import calc
from ..schema import Rendered
from . import phone
from .base import FigureSpec, Params, finish


class RingTimeParams(Params):
    size_mb: float = Field(256, gt=0, le=1e6, description="Array size in MB (10^6 bytes).")
    alpha_us: float = Field(5, ge=0, le=1000, description="Latency of one ring step, µs (an assumption).")
    node: Literal["H100-SXM", "H200"] = Field(
        "H100-SXM", description="Node from labs/parallel/costmodel.py for the link bandwidth."
    )
    gpus: list[int] = Field(
        default_factory=lambda: [2, 8, 64, 128, 256, 512, 1024], min_length=2, description="Ring sizes drawn."
    )


def draw_ring_time(p: RingTimeParams) -> Rendered:
    bw = calc.node_figures(p.node)["link_bytes_per_s"]
    rs = [calc.ring_time(p.size_mb * 1e6, n, bw, p.alpha_us * 1e-6) for n in p.gpus]
    xs = [float(n) for n in p.gpus]
    title = f"Ring all-reduce of {p.size_mb:g} MB at {bw / 1e9:g} GB/s: time with the latency term"
    alt = (
        f"Time of one ring all-reduce of {p.size_mb:g} MB at {bw / 1e9:g} GB/s per GPU with α = {p.alpha_us:g} µs per "
        "ring step. The bandwidth term 2(p−1)/p · size ÷ bandwidth stays near "
        f"{rs[-1]['transfer_ms']:.2f} ms; the latency term 2(p−1)·α grows linearly, from {rs[0]['latency_ms']:.3f} ms "
        f"at p = {p.gpus[0]} to {rs[-1]['latency_ms']:.2f} ms at p = {p.gpus[-1]}, where it is "
        f"{rs[-1]['latency_share']:.0%} of the total {rs[-1]['ms']:.2f} ms."
    )
    svg = line_chart(
        [
            Series("total", xs, [r["ms"] for r in rs]),
            Series("bandwidth term", xs, [r["transfer_ms"] for r in rs], dashed=True),
            Series("latency term 2(p−1)·α", xs, [r["latency_ms"] for r in rs], dashed=True),
        ],
        title=title,
        xlabel="GPUs in the ring (p)",
        ylabel="time (ms)",
        width=600,
        description=alt,
    )
    narrow = phone.line_chart(
        [
            ("total", xs, [r["ms"] for r in rs], False),
            ("bandwidth term", xs, [r["transfer_ms"] for r in rs], True),
            ("latency term 2(p−1)·α", xs, [r["latency_ms"] for r in rs], True),
        ],
        title=title,
        alt=alt,
        xlabel="GPUs in the ring (p)",
        ylabel="time (ms)",
        x_ticks=6,
    )
    rows = [[str(n), f"{r['transfer_ms']:.3f}", f"{r['latency_ms']:.3f}", f"{r['ms']:.3f}"] for n, r in zip(p.gpus, rs)]
    numbers: dict[str, float] = {}
    for n, r in zip(p.gpus, rs):
        numbers[f"ms_{n}"], numbers[f"latency_ms_{n}"], numbers[f"transfer_ms_{n}"] = (
            r["ms"],
            r["latency_ms"],
            r["transfer_ms"],
        )
    return finish(
        name="ring-time",
        title=title,
        svg=svg,
        narrow_svg=narrow,
        alt=alt,
        columns=["GPUs (p)", "bandwidth term (ms)", "latency term (ms)", "total (ms)"],
        rows=rows,
        numbers=numbers,
    )


SPEC = FigureSpec("ring-time", "ring all-reduce time: bandwidth term and latency term", RingTimeParams, draw_ring_time)
