"""One training step as a timeline: compute + communication − overlap = step."""

from __future__ import annotations

from html import escape

from pydantic import Field, model_validator

from labs.api import LANE_COLOURS, Span, number, overlap_metrics, percent, svg_open, svg_timeline

from .. import calc
from ..schema import Rendered
from . import phone
from .base import FigureSpec, Params, finish, text_at


class StepParams(Params):
    compute: float = Field(12, gt=0, le=1000, description="Compute in the step, ms.")
    comm: float = Field(5, gt=0, le=1000, description="The collective's duration, ms.")
    overlap: float = Field(3, ge=0, le=1000, description="Communication hidden under compute, ms.")

    @model_validator(mode="after")
    def _fits(self) -> StepParams:
        if self.overlap > min(self.compute, self.comm):
            raise ValueError(
                f"overlap <= min(compute, comm) = {number(min(self.compute, self.comm))}; found {number(self.overlap)}"
            )
        return self


def draw_step_timeline(p: StepParams) -> Rendered:
    step = calc.step_time(p.compute, p.comm, p.overlap)
    start = p.compute - p.overlap  # the collective launches this long before compute ends
    spans = [Span(0, "compute", "compute (GEMMs)", 0.0, p.compute)]
    if p.overlap:
        spans.append(Span(0, "communication", f"hidden {number(p.overlap)} ms", start, p.compute))
    if step["exposed"]:
        spans.append(Span(0, "communication", "exposed", p.compute, step["total"]))
        spans.append(Span(0, "wait", f"wait {number(step['exposed'])} ms", p.compute, step["total"]))
    m = overlap_metrics(spans, 0, (0.0, step["total"]))
    title = f"One step: {number(p.compute)} + {number(p.comm)} − {number(p.overlap)} = {number(step['total'])} ms"
    alt = (
        f"A timeline of one rank. Compute runs from 0 to {number(p.compute)} ms. The collective starts at {number(start)} ms and "
        f"takes {number(p.comm)} ms: its first {number(p.overlap)} ms run under compute (hidden), the last {number(step['exposed'])} ms "
        f"run after compute has finished (exposed), while the rank waits. The step ends at {number(step['total'])} ms "
        f"instead of {number(step['serial'])} ms if nothing overlapped; the overlap ratio is {percent(m['overlap_ratio'] or 0, 0)}."
    )
    subtitle = (
        f"compute {number(p.compute)} ms + communication {number(p.comm)} ms − overlap {number(p.overlap)} ms; "
        f"exposed {number(step['exposed'])} ms"
    )
    svg = svg_timeline(
        spans,
        title=title,
        description=alt,
        window=(0.0, step["total"]),
        width=760,
        subtitle=subtitle,
        overlap=False,  # the figure draws the hidden part of the collective as its own span instead
    )
    sum_line, _, rest = subtitle.partition(" − ")
    narrow = _narrow(spans, step["total"], title, (sum_line, f"− {rest}"), alt)
    rows = [
        ["compute", "0", f"{number(p.compute)}", f"{number(m['compute_ms'])}"],
        ["communication", f"{number(start)}", f"{number(step['total'])}", f"{number(m['communication_ms'])}"],
        ["  of which hidden under compute", f"{number(start)}", f"{number(p.compute)}", f"{number(m['overlap_ms'])}"],
        [
            "  of which exposed (the rank waits)",
            f"{number(p.compute)}",
            f"{number(step['total'])}",
            f"{number(m['exposed_communication_ms'])}",
        ],
        ["step", "0", f"{number(step['total'])}", f"{number(m['step_ms'])}"],
    ]
    return finish(
        name="step-timeline",
        title=title,
        svg=svg,
        narrow_svg=narrow,
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


def _narrow(spans: list[Span], total: float, title: str, subtitle: tuple[str, str], alt: str) -> str:
    """The same timeline for a phone, 340 px: each lane named above its bar, so the bars get the full width; a
    span whose name does not fit inside its bar is named under the lane, on a line of its own if two would touch."""
    x0, x1 = phone.MARGIN, phone.PHONE_W - phone.MARGIN - 4

    def px(t: float) -> float:
        return x0 + t / total * (x1 - x0)

    body: list[str] = []
    y = phone.title_block(body, title)
    for line in subtitle:
        y += 16
        body.append(text_at(x0, y, line, fill="#444"))
    y += 4
    body.append(text_at(x0, y + 16, "rank 0", extra=' font-weight="600"'))
    y += 24
    grid_at = len(body)  # the time grid goes under the lanes, drawn once their height is known
    lane_top = y
    for lane, colour in LANE_COLOURS.items():
        body.append(text_at(x0, y + 14, lane, fill=colour))
        bar_y = y + 20
        body.append(f'<rect x="{x0}" y="{bar_y}" width="{x1 - x0}" height="18" fill="#f6f6f6"/>')
        below: list[list[tuple[float, float]]] = []  # per line under the lane: the x intervals taken
        for s in (s for s in spans if s.lane == lane):
            a, b = px(s.start_ms), px(s.end_ms)
            tip = f"rank 0 · {lane} · {s.name}: {number(s.duration_ms, 3)} ms"
            body.append(
                f'<rect x="{a:.1f}" y="{bar_y}" width="{max(b - a, 1):.1f}" height="18" fill="{colour}" '
                f'fill-opacity="0.85" stroke="#fff"><title>{escape(tip)}</title></rect>'
            )
            w = phone.text_width(s.name)
            if b - a > w + 8:
                body.append(text_at(a + 4, bar_y + 13, s.name, fill="#fff"))
                continue
            left = min(max((a + b - w) / 2, x0), x1 - w)
            row = next(
                (k for k, taken in enumerate(below) if all(left > r + 8 or left + w < q - 8 for q, r in taken)),
                len(below),
            )
            if row == len(below):
                below.append([])
            below[row].append((left, left + w))
            mid = min(max((a + b) / 2, a + 1), b - 1)
            ty = bar_y + 18 + 15 * (row + 1)
            body.append(f'<line x1="{mid:.1f}" x2="{mid:.1f}" y1="{bar_y + 18}" y2="{ty - 11}" stroke="{colour}"/>')
            body.append(text_at(left, ty, s.name, fill="#333"))
        y = bar_y + 18 + 15 * len(below) + 8
    axis = y + 4
    ticks = [t for t in phone.nice_ticks(0, total, 5) if t <= total + 1e-9]
    if px(total) - px(ticks[-1]) > 30:  # the step's end, where the step-time sum lands
        ticks.append(total)
    grid = [f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{lane_top}" y2="{axis}" stroke="#e4e4e4"/>' for t in ticks]
    body[grid_at:grid_at] = grid
    for t in ticks:
        end = px(t) > x1 - 10
        body.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{axis}" y2="{axis + 4}" stroke="#333"/>')
        label = number(t, 3)
        body.append(
            text_at(px(t) + (4 if end else 0), axis + 18, label, anchor="end" if end else "middle", fill="#333")
        )
    body.append(f'<line x1="{x0}" x2="{x1}" y1="{axis}" y2="{axis}" stroke="#333"/>')
    body.append(text_at((x0 + x1) / 2, axis + 38, "time since the step began (ms)", anchor="middle"))
    out = svg_open(phone.PHONE_W, round(axis + 50), title, alt)
    out += body
    out.append("</svg>")
    return "\n".join(out)


SPEC = FigureSpec(
    "step-timeline", "compute + communication − overlap = step, as a timeline", StepParams, draw_step_timeline
)
