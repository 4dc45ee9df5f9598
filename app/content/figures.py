"""Figures drawn by code when a lesson version is built: SVG with accessible text, in the lab plots' style.

A part places one with a `figure` block (or a section's `figures` list):

    - kind: figure
      id: fp8-grid                 # stable id, unique in the lesson
      name: fp8-number-line        # a name in FIGURES below
      params: {amax: 240, values: [120, 300]}
      caption: Optional Markdown under the picture.

The loader validates `params` against the figure's own model (unknown names and bad values are content
errors with the file and line), draws every figure once per lesson version and keeps the result on the
Lesson (`lesson.figures[id]`), so a page view only inlines a string. Every number a figure shows comes
from app/content/calc (the lesson's one arithmetic) or from the lab code it pictures (labs.trace.timeline.s
overlap metrics, labs.parallel.costmodel.s node figures); `Rendered.numbers` exposes them to the tests.

Drawing reuses labs/svgplot.py (svg_open's title/desc/background, the Okabe-Ito palette, line_chart) and
labs/timeline.py (svg_timeline), so a lesson figure looks like the plots the labs hand back. Text stays
real <text> (selectable, read by screen readers); the text alternative repeats the numbers as a table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from labs.trace.svgplot import PALETTE, Series, line_chart, svg_open, svg_timeline
from labs.trace.timeline import Span, overlap_metrics

from . import calc
from .schema import Rendered

BLUE, ORANGE, GREEN, PINK, OCHRE, SKY, GREY = PALETTE
RED = "#c00"  # the lab plots' clipping marker


class Params(BaseModel):
    """Base of every figure's parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class FigureSpec:
    name: str
    about: str  # one line for authors (the template README lists them)
    params: type[Params]
    draw: Callable[[Any], Rendered]


class FigureError(ValueError):
    """Bad parameters: `problems` are (field path, expected, found) triples in the author's terms."""

    def __init__(self, problems: list[tuple[tuple, str, str]]):
        super().__init__("; ".join(f"{'.'.join(map(str, loc))}: expected {e}, found {f}" for loc, e, f in problems))
        self.problems = problems


def _done(
    *,
    name: str,
    title: str,
    svg: str,
    alt: str,
    columns: list[str],
    rows: list[list[str]],
    numbers: dict[str, float],
    narrow_svg: str = "",
) -> Rendered:
    box = re.search(r'viewBox="0 0 (\d+) \d+"', svg)
    width = int(box.group(1)) if box else 0
    return Rendered(
        name=name, title=title, svg=svg, narrow_svg=narrow_svg, width=width, alt=alt, columns=columns, rows=rows,
        numbers=numbers,
    )  # fmt: skip


def _f(v: float, spec: str = ".4g") -> str:
    return format(v, spec)


def _text(x: float, y: float, s: str, *, anchor: str = "start", fill: str = "#111", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{fill}"{extra}>{escape(s)}</text>'


def _title_line(title: str, x: float = 12, y: float = 20) -> str:
    return f'<text x="{x}" y="{y}" font-size="14" font-weight="600" fill="#111">{escape(title)}</text>'


def _arrow_defs() -> str:
    """Arrowhead markers, one per colour used; ids are scoped by figure name at render time."""
    out = ["<defs>"]
    for key, colour in (("k", "#333"), ("r", RED), ("b", BLUE), ("o", ORANGE)):
        out.append(
            f'<marker id="ARROW-{key}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
        )
    out.append("</defs>")
    return "".join(out)


def _scope_ids(svg: str, scope: str) -> str:
    """Marker ids must be unique in a page that inlines several figures: prefix them with the figure id."""
    return svg.replace("ARROW-", f"{scope}-arrow-")


# ---------------------------------------------------------------- FP8 number line


class NumberLineParams(Params):
    amax: float = Field(240, gt=0, le=1e4, description="amax the worked example's scale comes from.")
    values: list[float] = Field(
        default_factory=lambda: [120.0, 300.0],
        min_length=1,
        max_length=4,
        description="Values mapped with that scale (positive, shown on the E4M3 zoom).",
    )

    @model_validator(mode="after")
    def _positive(self) -> NumberLineParams:
        bad = [v for v in self.values if not 0 < v <= 1e4]
        if bad:
            raise ValueError(f"values in (0, 10000]; found {bad}")
        return self


def _pow2_label(e: int) -> str:
    sup = str(e).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"2{sup}"


def draw_number_line(p: NumberLineParams) -> Rendered:
    width, height = 760, 372
    left, right = 70, 24
    pw = width - left - right
    scale = calc.fp8_scale(p.amax, "E4M3")["scale"]
    maps = [calc.fp8_map(v, scale=scale, fmt="E4M3") for v in p.values]
    grids = {fmt: calc.fp8_grid(fmt) for fmt in ("E4M3", "E5M2")}
    title = "FP8 number lines: where E4M3 and E5M2 have values, and the worked scale"
    alt = (
        f"Top: the positive values of both formats on a log₂ axis. E4M3 has {len(grids['E4M3']) - 1} positive "
        f"values from {_f(grids['E4M3'][1])} (smallest subnormal) to {_f(calc.FP8_MAX['E4M3'], ',.0f')}; E5M2 has "
        f"{len(grids['E5M2']) - 1} from {_f(grids['E5M2'][1])} to {_f(calc.FP8_MAX['E5M2'], ',.0f')}, with coarser "
        f"steps. Bottom: E4M3 from 0 to 600 on a linear axis, the scale {scale:.3f} = 448 ÷ {p.amax:g} applied "
        "to "
        + "; ".join(
            f"{m['value']:g} → {m['scaled']:.0f}"
            + (f", beyond 448, clipped to {m['stored']:g}" if m["clipped"] else "")
            for m in maps
        )
        + "."
    )
    out = svg_open(width, height, title, alt)
    out.append(_arrow_defs())
    out.append(_title_line(title))

    # Panel 1: both formats on a log2 axis.
    lo_e, hi_e = -17, 17

    def lx(v: float) -> float:
        return left + (math.log2(v) - lo_e) / (hi_e - lo_e) * pw

    out.append(_text(12, 44, "Every positive value of each format (log₂ scale); subnormals in orange", fill="#444"))
    for e in range(lo_e + 1, hi_e, 4):
        x = lx(2.0**e)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="54" y2="150" stroke="#e4e4e4"/>')
        out.append(_text(x, 166, _pow2_label(e), anchor="middle", fill="#333"))
    for fmt, y in (("E4M3", 78), ("E5M2", 124)):
        mant, emin = calc.FP8_BITS[fmt]
        smallest_normal = 2.0**emin
        out.append(_text(left - 8, y + 4, fmt, anchor="end", fill="#111", extra=' font-weight="600"'))
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y}" y2="{y}" stroke="#333"/>')
        for v in grids[fmt][1:]:
            colour = ORANGE if v < smallest_normal else BLUE
            out.append(f'<line x1="{lx(v):.1f}" x2="{lx(v):.1f}" y1="{y - 9}" y2="{y + 9}" stroke="{colour}"/>')
        top = calc.FP8_MAX[fmt]
        out.append(
            f'<line x1="{lx(top):.1f}" x2="{lx(top):.1f}" y1="{y - 14}" y2="{y + 14}" stroke="{RED}" stroke-width="2"/>'
        )
        right_room = left + pw - lx(top) > 70
        out.append(
            _text(lx(top) + (5 if right_room else -5), y - 12 + (9 if right_room else 0), f"max {top:,.0f}",
                  anchor="start" if right_room else "end", fill=RED)
        )  # fmt: skip
        first = grids[fmt][1]
        out.append(_text(lx(first) - 3, y + 21, f"smallest {_pow2_label(round(math.log2(first)))}", fill=ORANGE))
    # Panel 2: E4M3 zoom, linear, with the worked example.
    top_y, base_y = 214, 300
    hi = 600.0

    def x_lin(v: float) -> float:
        return left + v / hi * pw

    out.append(
        _text(
            12, 196, f"E4M3, 0 to 600 (linear): scale = 448 ÷ {p.amax:g} = {scale:.3f}; each value × scale", fill="#444"
        )
    )
    for t in range(0, 601, 100):
        x = x_lin(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base_y}" y2="{base_y + 4}" stroke="#333"/>')
        out.append(_text(x, base_y + 18, str(t), anchor="middle", fill="#333"))
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{base_y}" y2="{base_y}" stroke="#333"/>')
    for v in grids["E4M3"]:
        out.append(f'<line x1="{x_lin(v):.1f}" x2="{x_lin(v):.1f}" y1="{base_y - 7}" y2="{base_y}" stroke="{BLUE}"/>')
    mx = x_lin(calc.FP8_MAX["E4M3"])
    out.append(
        f'<rect x="{mx:.1f}" y="{top_y - 6}" width="{left + pw - mx:.1f}" height="{base_y - top_y + 6}" fill="#fdecea"/>'
    )
    out.append(f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{top_y - 6}" y2="{base_y}" stroke="{RED}" stroke-width="2"/>')
    out.append(_text(mx + 6, top_y + 8, "beyond 448: clamped", fill=RED))
    out.append(_text(left - 8, top_y + 4, "input", anchor="end", fill="#333"))
    out.append(_text(left - 8, base_y - 14, "× scale", anchor="end", fill="#333"))
    for i, m in enumerate(maps):
        y_in = top_y + 18 * i
        xv, xs = x_lin(m["value"]), x_lin(min(m["scaled"], hi))
        colour, mk = (RED, "r") if m["clipped"] else (BLUE, "b")
        out.append(f'<circle cx="{xv:.1f}" cy="{y_in}" r="4" fill="{GREY}"/>')
        out.append(_text(xv, y_in - 7, f"{m['value']:g}", anchor="middle", fill="#111"))
        out.append(
            f'<line x1="{xv:.1f}" y1="{y_in + 4}" x2="{xs:.1f}" y2="{base_y - 18}" stroke="{colour}" '
            f'stroke-width="1.5" marker-end="url(#ARROW-{mk})"/>'
        )
        label = f"{m['scaled']:.0f}"
        if m["clipped"]:
            out.append(
                f'<path d="M{xs:.1f},{base_y - 12} C{xs:.1f},{base_y + 26} {mx:.1f},{base_y + 26} {mx:.1f},{base_y + 4}" '
                f'fill="none" stroke="{RED}" stroke-width="1.5" marker-end="url(#ARROW-r)"/>'
            )
            out.append(_text(xs, base_y - 24 - 12 * i, f"{label} → {m['stored']:g}", anchor="middle", fill=RED))
        else:
            out.append(_text(xs, base_y - 24 - 12 * i, label, anchor="middle", fill=BLUE))
    out.append(
        _text(
            12,
            height - 12,
            "Orange ticks: subnormals (values below the smallest normal, fewer bits of precision).",
            fill="#444",
        )
    )
    out.append("</svg>")
    rows = [
        [
            fmt,
            f"{len(grids[fmt]) - 1}",
            _f(grids[fmt][1]),
            _f(2.0 ** calc.FP8_BITS[fmt][1]),
            f"{calc.FP8_MAX[fmt]:,.0f}",
        ]
        for fmt in ("E4M3", "E5M2")
    ]
    rows += [
        [
            f"{m['value']:g} × {scale:.4f}",
            "",
            "",
            f"{m['scaled']:.1f}",
            f"{m['stored']:g}" + (" (clipped)" if m["clipped"] else ""),
        ]
        for m in maps
    ]
    numbers: dict[str, float] = {"scale": scale, "e4m3_max": calc.FP8_MAX["E4M3"], "e5m2_max": calc.FP8_MAX["E5M2"]}
    for m in maps:
        numbers[f"scaled_{m['value']:g}"] = m["scaled"]
        numbers[f"stored_{m['value']:g}"] = m["stored"]
    return _done(
        name="fp8-number-line",
        title=title,
        svg="\n".join(out),
        alt=alt,
        columns=["format / value", "positive values", "smallest subnormal", "smallest normal / scaled", "max / stored"],
        rows=rows,
        numbers=numbers,
    )


# ---------------------------------------------------------------- the step as a timeline


class StepParams(Params):
    compute: float = Field(12, gt=0, le=1000, description="Compute in the step, ms.")
    comm: float = Field(5, gt=0, le=1000, description="The collective's duration, ms.")
    overlap: float = Field(3, ge=0, le=1000, description="Communication hidden under compute, ms.")

    @model_validator(mode="after")
    def _fits(self) -> StepParams:
        if self.overlap > min(self.compute, self.comm):
            raise ValueError(
                f"overlap <= min(compute, comm) = {min(self.compute, self.comm):g}; found {self.overlap:g}"
            )
        return self


def draw_step_timeline(p: StepParams) -> Rendered:
    step = calc.step_time(p.compute, p.comm, p.overlap)
    start = p.compute - p.overlap  # the collective launches this long before compute ends
    spans = [Span(0, "compute", "compute (GEMMs)", 0.0, p.compute)]
    if p.overlap:
        spans.append(Span(0, "communication", f"hidden {p.overlap:g} ms", start, p.compute))
    if step["exposed"]:
        spans.append(Span(0, "communication", "exposed", p.compute, step["total"]))
        spans.append(Span(0, "wait", f"wait {step['exposed']:g} ms", p.compute, step["total"]))
    m = overlap_metrics(spans, 0, (0.0, step["total"]))
    title = f"One step: {p.compute:g} + {p.comm:g} − {p.overlap:g} = {step['total']:g} ms"
    alt = (
        f"A timeline of one rank. Compute runs from 0 to {p.compute:g} ms. The collective starts at {start:g} ms and "
        f"takes {p.comm:g} ms: its first {p.overlap:g} ms run under compute (hidden), the last {step['exposed']:g} ms "
        f"run after compute has finished (exposed), while the rank waits. The step ends at {step['total']:g} ms "
        f"instead of {step['serial']:g} ms if nothing overlapped; the overlap ratio is {m['overlap_ratio'] or 0:.0%}."
    )
    svg = svg_timeline(
        spans,
        title=title,
        description=alt,
        window=(0.0, step["total"]),
        width=760,
        subtitle=f"compute {p.compute:g} ms + communication {p.comm:g} ms − overlap {p.overlap:g} ms; "
        f"exposed {step['exposed']:g} ms",
    )
    rows = [
        ["compute", "0", f"{p.compute:g}", f"{m['compute_ms']:g}"],
        ["communication", f"{start:g}", f"{step['total']:g}", f"{m['communication_ms']:g}"],
        ["  of which hidden under compute", f"{start:g}", f"{p.compute:g}", f"{m['overlap_ms']:g}"],
        [
            "  of which exposed (the rank waits)",
            f"{p.compute:g}",
            f"{step['total']:g}",
            f"{m['exposed_communication_ms']:g}",
        ],
        ["step", "0", f"{step['total']:g}", f"{m['step_ms']:g}"],
    ]
    return _done(
        name="step-timeline",
        title=title,
        svg=svg,
        alt=alt,
        columns=["lane", "from (ms)", "to (ms)", "duration (ms)"],
        rows=rows,
        numbers={
            "step": m["step_ms"],
            "compute": m["compute_ms"],
            "comm": m["communication_ms"],
            "hidden": m["overlap_ms"],
            "exposed": m["exposed_communication_ms"],
            "overlap_ratio": m["overlap_ratio"] or 0.0,
        },
    )


# ---------------------------------------------------------------- tensor-parallel MLP block


class TpBlockParams(Params):
    sequence_parallel: bool = Field(
        False, description="Draw the sequence-parallel variant (all-gather + reduce-scatter)."
    )
    tokens: int = Field(8192, ge=1, le=10_000_000, description="Tokens per step (batch × sequence), for the bytes.")
    hidden: int = Field(4096, ge=64, le=65536, description="Model width H, for the bytes.")
    degree: int = Field(8, ge=2, le=64, description="TP degree N, for the bytes each GPU sends.")


def draw_tp_block(p: TpBlockParams) -> Rendered:
    sp = p.sequence_parallel
    c = calc.tp_layer_collectives(p.tokens, p.hidden, p.degree, sequence_parallel=sp)
    width, height = 760, 318
    title = (
        "Tensor-parallel MLP with sequence parallelism: all-gather in, reduce-scatter out"
        if sp
        else "Tensor-parallel MLP: column-parallel, then row-parallel, one all-reduce each way"
    )
    f_in, f_bwd = ("all-gather", "reduce-scatter") if sp else ("identity", "all-reduce")
    g_out, g_bwd = ("reduce-scatter", "all-gather") if sp else ("all-reduce", "identity")
    alt = (
        f"Data flows left to right through one MLP block on each of the N tensor-parallel ranks. "
        f"{'X arrives split along the sequence; an all-gather makes the full X on every rank' if sp else 'X is replicated on every rank'} "
        "(backward: "
        f"{f_bwd} of the input gradient). A column-parallel linear A holds a slice of A's columns, so each rank "
        "computes its own slice of the hidden activations with no communication, then GeLU. A row-parallel linear "
        "B holds the matching rows, so each rank produces a partial sum of the full output; "
        f"{'a reduce-scatter sums them and leaves each rank a slice of the sequence' if sp else 'an all-reduce sums them'} "
        f"(backward: {g_bwd}). Attention has the same pair (heads split like A's columns, output projection like B). "
        f"Per layer: {c['all_reduce_fwd']} all-reduces forward and {c['all_reduce_bwd']} backward"
        + (
            f"; with sequence parallelism {c['all_gather_fwd']} all-gathers and {c['reduce_scatter_fwd']} "
            "reduce-scatters each way instead, moving the same bytes."
            if sp
            else "."
        )
    )
    out = svg_open(width, height, title, alt)
    out.append(_arrow_defs())
    out.append(_title_line(title))
    lanes = [("rank 0", 70), ("rank 1", 176)]
    boxes = [  # (x, w, label, sublabel, colour)
        (150, 118, "A₀ (column slice)", "X · A[:, 0:F/N]", BLUE),
        (290, 72, "GeLU", "per element", GREY),
        (384, 118, "B₀ (row slice)", "Y₀ · B[0:F/N, :]", BLUE),
    ]
    for r, (name, y) in enumerate(lanes):
        out.append(_text(12, y + 24, name, fill="#111", extra=' font-weight="600"'))
        out.append(_text(88, y + 24, "X" if not sp else f"X{'₀₁'[r]}", anchor="middle", fill="#111"))
        prev_x = 104
        for bx, bw, label, sub, colour in boxes:
            label = label.replace("₀", "₀₁"[r])
            sub = sub.replace("0:F/N", "0:F/N" if r == 0 else "F/N:2F/N").replace("Y₀", "Y" + "₀₁"[r])
            out.append(
                f'<line x1="{prev_x}" y1="{y + 20}" x2="{bx - 2}" y2="{y + 20}" stroke="#333" marker-end="url(#ARROW-k)"/>'
            )
            out.append(
                f'<rect x="{bx}" y="{y}" width="{bw}" height="40" rx="5" fill="#fff" stroke="{colour}" stroke-width="2"/>'
            )
            out.append(_text(bx + bw / 2, y + 17, label, anchor="middle", fill="#111"))
            out.append(_text(bx + bw / 2, y + 33, sub, anchor="middle", fill="#555", extra=' font-size="11"'))
            prev_x = bx + bw
        out.append(
            f'<line x1="{prev_x}" y1="{y + 20}" x2="{562}" y2="{y + 20}" stroke="#333" marker-end="url(#ARROW-k)"/>'
        )
        out.append(_text(610, y + 24, "Z" if not sp else f"Z{'₀₁'[r]}", anchor="start", fill="#111"))
        out.append(_text(534, y + 12, "partial", anchor="middle", fill="#555", extra=' font-size="11"'))
    # The collectives: f before A (input), g after B (output), spanning both ranks.
    for x, fwd, tag in ((122, f_in, "f"), (586, g_out, "g")):
        colour = ORANGE if fwd != "identity" else GREY
        out.append(
            f'<rect x="{x - 14}" y="56" width="28" height="176" rx="6" fill="{colour}" fill-opacity="0.15" stroke="{colour}"/>'
        )
        out.append(_text(x, 50, tag, anchor="middle", fill=colour, extra=' font-weight="600"'))
    out.append(_text(122, 252, f"f: forward {f_in}", anchor="middle", fill="#111", extra=' font-size="11"'))
    out.append(_text(122, 266, f"backward {f_bwd}", anchor="middle", fill="#111", extra=' font-size="11"'))
    out.append(_text(586, 252, f"g: forward {g_out}", anchor="middle", fill="#111", extra=' font-size="11"'))
    out.append(_text(586, 266, f"backward {g_bwd}", anchor="middle", fill="#111", extra=' font-size="11"'))
    if sp:
        out.append(_text(12, height - 28, "X₀, X₁ and Z₀, Z₁: each rank's slice of the sequence", fill="#444"))
    out.append(
        _text(
            12,
            height - 10,
            f"Per layer (attention + MLP): {c['collectives_per_layer']} collectives; "
            f"{c['bytes_per_gpu_per_layer'] / 1e6:,.0f} MB sent per GPU at {p.tokens:,} tokens, H = {p.hidden:,}, N = {p.degree}",
            fill="#444",
        )
    )
    out.append("</svg>")
    rows = [
        ["f (before A)", f_in, f_bwd, "2 per layer (attention, MLP)" if f_in != "identity" else "—"],
        ["column-parallel A", "none", "none", "each rank owns F/N columns"],
        ["row-parallel B", "none", "none", "each rank owns the matching F/N rows"],
        ["g (after B)", g_out, g_bwd, "2 per layer (attention, MLP)"],
    ]
    numbers = {k: float(v) for k, v in c.items()}
    return _done(
        name="tp-mlp-block",
        title=title,
        svg="\n".join(out),
        alt=alt,
        columns=["where", "forward", "backward", "how often"],
        rows=rows,
        numbers=numbers,
    )


# ---------------------------------------------------------------- ring all-reduce


class RingTrafficParams(Params):
    max_gpus: int = Field(64, ge=4, le=4096, description="Largest ring drawn.")


def draw_ring_traffic(p: RingTrafficParams) -> Rendered:
    ns = [n for n in (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096) if n <= p.max_gpus]
    factors = [calc.ring_allreduce(1.0, n)["factor"] for n in ns]
    title = "Ring all-reduce: bytes each GPU sends, in units of the array"
    alt = (
        "Each GPU sends 2(p−1)/p times the array: "
        + ", ".join(f"{f:.3g}× at p = {n}" for n, f in zip(ns, factors))
        + ". The curve flattens towards 2×: adding GPUs barely adds bytes per GPU."
    )
    svg = line_chart(
        [
            Series("2(p−1)/p", [float(n) for n in ns], factors),
            Series("limit 2×", [float(ns[0]), float(ns[-1])], [2.0, 2.0], dashed=True),
        ],
        title=title,
        xlabel="GPUs in the ring (p)",
        ylabel="bytes sent ÷ array size",
        width=600,
        description=alt,
    )
    return _done(
        name="ring-traffic",
        title=title,
        svg=svg,
        alt=alt,
        columns=["GPUs (p)", "bytes per GPU ÷ array"],
        rows=[[str(n), f"{f:.3f}"] for n, f in zip(ns, factors)],
        numbers={f"factor_{n}": f for n, f in zip(ns, factors)},
    )


class RingTimeParams(Params):
    size_mb: float = Field(256, gt=0, le=1e6, description="Array size in MB (10^6 bytes).")
    alpha_us: float = Field(5, ge=0, le=1000, description="Latency of one ring step, µs (an assumption).")
    node: Literal["H100-SXM", "H200"] = Field(
        "H100-SXM", description="Node from labs/costmodel.py for the link bandwidth."
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
    rows = [[str(n), f"{r['transfer_ms']:.3f}", f"{r['latency_ms']:.3f}", f"{r['ms']:.3f}"] for n, r in zip(p.gpus, rs)]
    numbers: dict[str, float] = {}
    for n, r in zip(p.gpus, rs):
        numbers[f"ms_{n}"], numbers[f"latency_ms_{n}"], numbers[f"transfer_ms_{n}"] = (
            r["ms"],
            r["latency_ms"],
            r["transfer_ms"],
        )
    return _done(
        name="ring-time",
        title=title,
        svg=svg,
        alt=alt,
        columns=["GPUs (p)", "bandwidth term (ms)", "latency term (ms)", "total (ms)"],
        rows=rows,
        numbers=numbers,
    )


# ---------------------------------------------------------------- TP roofline


class RooflineParams(Params):
    ffn: int = Field(14336, ge=64, le=1_000_000, description="MLP width F (Llama-3-8B: 14,336).")
    degrees: list[int] = Field(default_factory=lambda: [2, 4, 8], min_length=1, description="TP degrees marked.")
    mfu: float = Field(0.5, gt=0, le=1, description="Fraction of peak the GEMMs sustain.")
    node: Literal["H100-SXM", "H200"] = Field("H100-SXM", description="Node from labs/costmodel.py.")

    @model_validator(mode="after")
    def _degrees(self) -> RooflineParams:
        bad = [d for d in self.degrees if not 2 <= d <= 64]
        if bad:
            raise ValueError(f"degrees between 2 and 64; found {bad}")
        return self


def draw_roofline(p: RooflineParams) -> Rendered:
    fig = calc.node_figures(p.node)
    width, height = 780, 380
    left, right, top, bottom = 70, 236, 40, 56
    pw, ph = width - left - right, height - top - bottom
    x_lo, x_hi, y_lo, y_hi = 2.0, 5.0, 1.5, 3.5  # log10: 100..100k FLOP/byte; ~30..3000 TFLOP/s

    def px(i: float) -> float:
        return left + (math.log10(i) - x_lo) / (x_hi - x_lo) * pw

    def py(tf: float) -> float:
        return top + ph - (math.log10(tf) - y_lo) / (y_hi - y_lo) * ph

    title = f"Tensor-parallel MLP on {fig['gpus']}× {p.node}: where NVLink, not the GEMMs, sets the pace"
    roofs = []
    for i, (prec, dashed) in enumerate((("bf16", False), ("fp8", True))):
        peak = fig[f"{prec}_tflops"] * p.mfu
        ridge = peak * 1e12 / fig["link_bytes_per_s"]
        roofs.append((prec, peak, ridge, dashed, PALETTE[i + 1]))
    points = [(d, calc.tp_mlp_intensity(p.ffn, d, p.mfu, node=p.node, precision="bf16")) for d in p.degrees]
    fp8_points = [(d, calc.tp_mlp_intensity(p.ffn, d, p.mfu, node=p.node, precision="fp8")) for d in p.degrees]
    alt = (
        f"Log-log roofline. x: FLOPs each rank computes per byte it sends over NVLink in the MLP block, F/(N−1) "
        f"with F = {p.ffn:,}. y: attainable TFLOP/s, the lower of the GEMMs' {p.mfu:.0%}-of-peak rate and x × "
        f"{fig['link_gbs']:g} GB/s. The ridge (communication takes as long as compute) sits at "
        f"{roofs[0][2]:,.0f} FLOP/byte for BF16 ({roofs[0][1]:,.0f} TFLOP/s) and {roofs[1][2]:,.0f} for FP8 "
        f"({roofs[1][1]:,.0f} TFLOP/s). "
        + "; ".join(
            f"TP={d}: {r['intensity']:,.0f} FLOP/byte, "
            + ("communication-bound in BF16" if r["comm_bound"] else "compute-bound in BF16")
            + (", communication-bound in FP8" if f8["comm_bound"] else ", compute-bound in FP8")
            for (d, r), (_, f8) in zip(points, fp8_points)
        )
        + "."
    )
    out = svg_open(width, height, title, alt)
    out.append(_title_line(title))
    for e in range(int(x_lo), int(x_hi) + 1):
        x = px(10.0**e)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" stroke="#ddd"/>')
        out.append(_text(x, top + ph + 18, f"{10**e:,}", anchor="middle", fill="#333"))
    for tf in (30, 100, 300, 1000, 3000):
        y = py(tf)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(_text(left - 6, y + 4, f"{tf:,}", anchor="end", fill="#333"))
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    out.append(
        _text(
            left + pw / 2, height - 22, "FLOPs per byte sent over NVLink, per rank: F / (N − 1)  (log)", anchor="middle"
        )
    )
    out.append(
        f'<text transform="translate(16 {top + ph / 2:.1f}) rotate(-90)" text-anchor="middle" fill="#111">'
        "attainable TFLOP/s (log)</text>"
    )
    legend_y = top + 10
    for prec, peak, ridge, dashed, colour in roofs:
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        xs = [10 ** (x_lo + k * (x_hi - x_lo) / 60) for k in range(61)]
        pts = [(px(i), py(min(peak, i * fig["link_bytes_per_s"] / 1e12))) for i in xs]
        path = " ".join(f"{'M' if k == 0 else 'L'}{x:.1f},{y:.1f}" for k, (x, y) in enumerate(pts))
        out.append(
            f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}><title>{prec.upper()} roof</title></path>'
        )
        out.append(
            f'<line x1="{px(ridge):.1f}" x2="{px(ridge):.1f}" y1="{py(peak):.1f}" y2="{top + ph}" stroke="{colour}" stroke-dasharray="2 3"/>'
        )
        lx = left + pw + 12
        out.append(
            f'<line x1="{lx}" x2="{lx + 22}" y1="{legend_y}" y2="{legend_y}" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        out.append(_text(lx + 28, legend_y + 4, f"{prec.upper()} at {p.mfu:.0%}: {peak:,.0f} TF/s"))
        out.append(_text(lx + 28, legend_y + 18, f"ridge {ridge:,.0f} FLOP/B", fill="#444"))
        legend_y += 40
    for prec, pts_ in (("BF16", points), ("FP8", fp8_points)):
        for d, r in pts_:
            x, y = px(r["intensity"]), py(r["attainable_tflops"])
            colour = RED if r["comm_bound"] else GREEN
            fill = colour if prec == "BF16" else "#fff"
            tip = f"TP={d}, {prec}: {r['intensity']:,.0f} FLOP/byte, {r['attainable_tflops']:,.0f} TFLOP/s"
            out.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{fill}" stroke="{colour}" stroke-width="2">'
                f"<title>{escape(tip)}</title></circle>"
            )
            if prec == "BF16":
                out.append(_text(x, y + 20, f"TP={d}", anchor="middle", fill=colour, extra=' font-weight="600"'))
    lx = left + pw + 12
    out.append(f'<circle cx="{lx + 11}" cy="{legend_y}" r="5" fill="{GREEN}" stroke="{GREEN}" stroke-width="2"/>')
    out.append(_text(lx + 28, legend_y + 4, "compute-bound (BF16 filled,"))
    out.append(_text(lx + 28, legend_y + 18, "FP8 hollow)"))
    out.append(f'<circle cx="{lx + 11}" cy="{legend_y + 34}" r="5" fill="#fff" stroke="{RED}" stroke-width="2"/>')
    out.append(_text(lx + 28, legend_y + 38, "communication-bound"))
    out.append(_text(lx, legend_y + 64, f"MLP block, F = {p.ffn:,}", fill="#444"))
    out.append(_text(lx, legend_y + 80, "Predicted from datasheet", fill="#444"))
    out.append(_text(lx, legend_y + 94, "figures, not measured", fill="#444"))
    out.append("</svg>")
    rows = [
        [
            f"TP={d}",
            f"{r['intensity']:,.0f}",
            f"{r['attainable_tflops']:,.0f}",
            "yes" if r["comm_bound"] else "no",
            "yes" if f8["comm_bound"] else "no",
        ]
        for (d, r), (_, f8) in zip(points, fp8_points)
    ]
    numbers: dict[str, float] = {"ridge_bf16": roofs[0][2], "ridge_fp8": roofs[1][2]}
    for (d, r), (_, f8) in zip(points, fp8_points):
        numbers[f"intensity_{d}"] = r["intensity"]
        numbers[f"comm_bound_bf16_{d}"] = float(r["comm_bound"])
        numbers[f"comm_bound_fp8_{d}"] = float(f8["comm_bound"])
    return _done(
        name="tp-roofline",
        title=title,
        svg="\n".join(out),
        alt=alt,
        columns=[
            "degree",
            "FLOP per NVLink byte",
            "attainable TFLOP/s (BF16)",
            "comm-bound in BF16",
            "comm-bound in FP8",
        ],
        rows=rows,
        numbers=numbers,
    )


# ---------------------------------------------------------------- memory anatomy


class MemoryConfig(Params):
    label: str = Field(min_length=1, max_length=40, description="Bar label, e.g. 'ZeRO-3, 8 GPUs'.")
    dp: int = Field(1, ge=1, le=100_000)
    tp: int = Field(1, ge=1, le=64)
    pp: int = Field(1, ge=1, le=256)
    zero: int = Field(0, ge=0, le=3)
    sequence_parallel: bool = False
    recompute: Literal["none", "selective", "full"] = "selective"


class MemoryParams(Params):
    params: float = Field(7e9, gt=0, le=1e13, description="Parameters.")
    layers: int = Field(32, ge=1, le=1000)
    hidden: int = Field(4096, ge=64, le=100_000)
    heads: int = Field(32, ge=1, le=1024)
    seq: int = Field(4096, ge=1, le=1_000_000)
    micro_batch: int = Field(1, ge=1, le=4096)
    hbm_gb: float = Field(80, gt=0, le=10_000, description="GPU memory, GB (H100: 80).")
    configs: list[MemoryConfig] = Field(min_length=1, max_length=8, description="One bar per configuration.")


def draw_memory(p: MemoryParams) -> Rendered:
    parts = [
        ("weights_gb", "weights", BLUE),
        ("grads_gb", "gradients", SKY),
        ("optim_gb", "optimizer state", OCHRE),
        ("activations_gb", "activations", ORANGE),
    ]
    mems = [
        calc.memory_per_gpu(
            p.params, p.layers, p.hidden, p.heads, p.seq, p.micro_batch, c.dp, c.tp, c.pp, c.zero,
            c.sequence_parallel, c.recompute, p.hbm_gb,
        )
        for c in p.configs
    ]  # fmt: skip
    title = f"Memory per GPU, {p.params / 1e9:g}B parameters, {p.seq:,}-token sequences"
    alt = (
        f"Stacked bars of GB per GPU for each configuration, against the {p.hbm_gb:g} GB of one GPU: "
        + "; ".join(
            f"{c.label}: weights {m['weights_gb']:.1f}, gradients {m['grads_gb']:.1f}, optimizer {m['optim_gb']:.1f}, "
            f"activations {m['activations_gb']:.1f}, total {m['total_gb']:.1f} GB ({'fits' if m['fits'] else 'does not fit'})"
            for c, m in zip(p.configs, mems)
        )
        + "."
    )
    x_max = max(max(m["total_gb"] for m in mems), p.hbm_gb) * 1.08
    wide = _memory_wide(p, mems, parts, x_max, title, alt)
    narrow = _memory_narrow(p, mems, parts, x_max, title, alt)
    rows = [
        [
            c.label,
            f"{c.dp}/{c.tp}/{c.pp}",
            str(c.zero),
            c.recompute,
            f"{m['weights_gb']:.1f}",
            f"{m['grads_gb']:.1f}",
            f"{m['optim_gb']:.1f}",
            f"{m['activations_gb']:.1f}",
            f"{m['total_gb']:.1f}",
        ]
        for c, m in zip(p.configs, mems)
    ]
    numbers = {f"total_{i}": m["total_gb"] for i, m in enumerate(mems)}
    numbers.update({f"activations_{i}": m["activations_gb"] for i, m in enumerate(mems)})
    return _done(
        name="memory-anatomy",
        title=title,
        svg=wide,
        narrow_svg=narrow,
        alt=alt,
        columns=[
            "configuration",
            "DP/TP/PP",
            "ZeRO",
            "recompute",
            "weights",
            "gradients",
            "optimizer",
            "activations",
            "total GB",
        ],
        rows=rows,
        numbers=numbers,
    )


_MEMORY_AXIS = "GB per GPU (activations: first pipeline stage, one microbatch in flight per stage)"
_HALO = ' paint-order="stroke" stroke="#fff" stroke-width="4"'  # legible where the GPU's memory line crosses


def _memory_ticks(out: list[str], px: Callable[[float], float], x_max: float, y: float) -> None:
    step = 20 if x_max <= 200 else 50 if x_max <= 500 else 200
    for t in range(0, int(x_max) + 1, step):
        out.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{y}" y2="{y + 4}" stroke="#333"/>')
        out.append(_text(px(t), y + 18, str(t), anchor="middle", fill="#333"))


def _memory_wide(p: MemoryParams, mems: list[dict], parts: list, x_max: float, title: str, alt: str) -> str:
    """Labels beside the bars, the totals after them: 760 px, for a laptop."""
    width = 760
    left, right, top, bar_h, gap = 170, 40, 64, 22, 12
    height = top + len(mems) * (bar_h + gap) + 70
    pw = width - left - right

    def px(gb: float) -> float:
        return left + gb / x_max * pw

    out = svg_open(width, height, title, alt)
    out.append(_title_line(title))
    lx = left
    for _, name, colour in parts:
        out.append(f'<rect x="{lx}" y="32" width="12" height="12" fill="{colour}"/>')
        out.append(_text(lx + 16, 42, name))
        lx += 16 + 8 * len(name) + 18
    base = top + len(mems) * (bar_h + gap)
    hx = px(p.hbm_gb)
    out.append(
        f'<line x1="{hx:.1f}" x2="{hx:.1f}" y1="{top - 6}" y2="{base}" stroke="{RED}" stroke-width="2" '
        'stroke-dasharray="6 4"/>'
    )
    for i, (c, m) in enumerate(zip(p.configs, mems)):
        y = top + i * (bar_h + gap)
        out.append(
            _text(left - 8, y + bar_h - 6, c.label, anchor="end", extra=' font-weight="600"' if not m["fits"] else "")
        )
        x = _memory_bar(out, m, parts, px, left, y, bar_h)
        out.append(
            _text(x + 4, y + bar_h - 6, f"{m['total_gb']:.1f} GB", fill="#111" if m["fits"] else RED, extra=_HALO)
        )
    out.append(_text(hx, base + 14, f"{p.hbm_gb:g} GB per GPU", anchor="middle", fill=RED))
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{base + 24}" y2="{base + 24}" stroke="#333"/>')
    _memory_ticks(out, px, x_max, base + 24)
    out.append(_text(left + pw / 2, base + 58, _MEMORY_AXIS, anchor="middle", fill="#444"))
    out.append("</svg>")
    return "\n".join(out)


def _memory_narrow(p: MemoryParams, mems: list[dict], parts: list, x_max: float, title: str, alt: str) -> str:
    """The same bars for a phone, 340 px: each label and its total on a line above its bar, so the totals and
    the GPU's memory line are on screen without scrolling sideways."""
    width = 340
    left, right, top, bar_h, row = 10, 14, 100, 16, 40
    height = top + len(mems) * row + 92
    pw = width - left - right

    def px(gb: float) -> float:
        return left + gb / x_max * pw

    out = svg_open(width, height, title, alt)
    first, _, rest = title.partition(", ")
    out.append(_title_line(f"{first},", left))
    out.append(_title_line(rest, left, 38))
    for k, (_, name, colour) in enumerate(parts):  # the legend in two columns
        lx, ly = left + (k % 2) * 150, 58 + (k // 2) * 18
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{colour}"/>')
        out.append(_text(lx + 16, ly, name))
    base = top + len(mems) * row
    hx = px(p.hbm_gb)
    out.append(
        f'<line x1="{hx:.1f}" x2="{hx:.1f}" y1="{top - 4}" y2="{base}" stroke="{RED}" stroke-width="2" '
        'stroke-dasharray="6 4"/>'
    )
    for i, (c, m) in enumerate(zip(p.configs, mems)):
        y = top + i * row
        weight = ' font-weight="600"' if not m["fits"] else ""
        out.append(_text(left, y + 10, c.label, extra=weight + _HALO))
        total = f"{m['total_gb']:.1f} GB"
        out.append(_text(width - right, y + 10, total, anchor="end", fill="#111" if m["fits"] else RED, extra=_HALO))
        _memory_bar(out, m, parts, px, left, y + 15, bar_h)
    out.append(_text(hx, base + 12, f"{p.hbm_gb:g} GB per GPU", anchor="middle", fill=RED, extra=_HALO))
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{base + 20}" y2="{base + 20}" stroke="#333"/>')
    _memory_ticks(out, px, x_max, base + 20)
    axis, _, why = _MEMORY_AXIS.partition(" (")
    stage, _, flight = why.partition(", ")
    for k, line in enumerate((axis, f"({stage},", flight)):
        out.append(_text(left + pw / 2, base + 54 + 16 * k, line, anchor="middle", fill="#444"))
    out.append("</svg>")
    return "\n".join(out)


def _memory_bar(
    out: list[str], m: dict, parts: list, px: Callable[[float], float], left: float, y: float, bar_h: float
) -> float:
    """One stacked bar; returns where it ends."""
    x = float(left)
    for key, name, colour in parts:
        w = px(m[key]) - left
        if w > 0:
            out.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}"><title>{escape(name)}: {m[key]:.1f} GB</title></rect>'
            )
        x += w
    return x


# ---------------------------------------------------------------- registry

FIGURES: dict[str, FigureSpec] = {
    s.name: s
    for s in (
        FigureSpec("fp8-number-line", "E4M3/E5M2 grids, subnormals, max, and the worked scale", NumberLineParams, draw_number_line),
        FigureSpec("step-timeline", "compute + communication − overlap = step, as a timeline", StepParams, draw_step_timeline),
        FigureSpec("tp-mlp-block", "column- then row-parallel MLP and its collectives", TpBlockParams, draw_tp_block),
        FigureSpec("ring-traffic", "ring all-reduce bytes per GPU, 2(p−1)/p, as p grows", RingTrafficParams, draw_ring_traffic),
        FigureSpec("ring-time", "ring all-reduce time: bandwidth term and latency term", RingTimeParams, draw_ring_time),
        FigureSpec("tp-roofline", "TP MLP communication roofline against a node's compute and NVLink", RooflineParams, draw_roofline),
        FigureSpec("memory-anatomy", "weights, gradients, optimizer state, activations per GPU", MemoryParams, draw_memory),
    )
}  # fmt: skip


def render(name: str, params: dict, figure_id: str) -> Rendered:
    """Validate `params` for figure `name` and draw it. FigureError names each bad parameter."""
    spec = FIGURES.get(name)
    if spec is None:
        raise FigureError([(("name",), f"a figure from app/content/figures.py ({', '.join(FIGURES)})", repr(name))])
    try:
        model = spec.params.model_validate(params)
    except ValidationError as exc:
        problems = []
        for e in exc.errors(include_url=False):
            msg = e["msg"].removeprefix("Value error, ")
            expected, _, found = msg.partition("; found ")
            if e["type"] == "extra_forbidden":
                expected = f"a parameter of {name} ({', '.join(spec.params.model_fields)})"
            problems.append((("params", *e["loc"]), expected, found or repr(e.get("input"))))
        raise FigureError(problems) from None
    drawn = spec.draw(model)
    return drawn.model_copy(
        update={"svg": _scope_ids(drawn.svg, figure_id), "narrow_svg": _scope_ids(drawn.narrow_svg, f"{figure_id}-n")}
    )
