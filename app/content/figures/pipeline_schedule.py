"""A pipeline schedule: p stages, m microbatches, forwards then backwards (GPipe), the bubble in grey.

Drawn for a phone's width (340 px), which a laptop scales up. A backward is drawn as long as a forward
(really about twice as long; the bubble's share is the same). The idle share of the step the drawing
shows is counted from its own cells and must equal calc.pipeline_bubble's (p − 1)/(m + p − 1).
"""

from __future__ import annotations

from html import escape

from pydantic import Field, model_validator

from labs.api import svg_open

from .. import calc
from ..schema import Rendered
from .base import BLUE, ORANGE, FigureSpec, Params, finish, text_at, title_line

WIDTH = 340
IDLE = "#e6e6e6"


class PipelineParams(Params):
    stages: int = Field(4, ge=2, le=8, description="Pipeline stages (p).")
    microbatches: int = Field(8, ge=1, le=16, description="Microbatches per step (m).")

    @model_validator(mode="after")
    def _fits(self):
        if 2 * (self.microbatches + self.stages - 1) > 30:
            raise ValueError(
                "2·(m + p − 1) of at most 30 time slots, to stay legible at a phone's width; "
                f"found {2 * (self.microbatches + self.stages - 1)}"
            )
        return self


def schedule(p: int, m: int) -> list[list[str]]:
    """cells[stage][slot]: "F3" (forward of microbatch 3), "B3", or "" (idle). GPipe: all forwards, then all
    backwards in reverse stage order."""
    slots = 2 * (m + p - 1)
    cells = [["" for _ in range(slots)] for _ in range(p)]
    for s in range(p):
        for k in range(m):
            cells[s][s + k] = f"F{k + 1}"
            cells[s][(m + p - 1) + (p - 1 - s) + k] = f"B{k + 1}"
    return cells


def draw_pipeline(p: PipelineParams) -> Rendered:
    n, m = p.stages, p.microbatches
    cells = schedule(n, m)
    slots = len(cells[0])
    idle = sum(c == "" for row in cells for c in row) / (n * slots)
    bubble = calc.pipeline_bubble(n, m)
    title = f"Pipeline: {n} stages, {m} microbatches"
    alt = (
        f"Each of {n} stages runs {m} forwards, then {m} backwards; stage s starts s slots late and finishes its "
        f"backwards s slots early. Each stage idles {2 * (n - 1)} of {slots} slots: the bubble is "
        f"(p − 1)/(m + p − 1) = {bubble['percent']:.1f}% of the step, or (p − 1)/m = {bubble['overhead_percent']:.1f}% "
        "measured against the compute alone."
    )
    left, top = 30, 78
    cell = min(14.0, (WIDTH - left - 8) / slots)
    row_h = 22
    height = top + n * row_h + 50
    out = svg_open(WIDTH, height, title, alt)
    out.append(title_line(title, 10))
    legend = (("forward", BLUE), ("backward", ORANGE), ("idle (bubble)", IDLE))
    for k, (name, colour) in enumerate(legend):
        lx = 10 + k * 100
        out.append(f'<rect x="{lx}" y="34" width="12" height="12" fill="{colour}"/>')
        out.append(text_at(lx + 16, 44, name))
    out.append(text_at(10, 64, "time →  (one slot per microbatch pass)", fill="#444"))
    for s, row in enumerate(cells):
        y = top + s * row_h
        out.append(text_at(left - 6, y + 14, f"S{s + 1}", anchor="end"))
        for t, c in enumerate(row):
            colour = BLUE if c.startswith("F") else ORANGE if c.startswith("B") else IDLE
            what = f"stage {s + 1}, slot {t + 1}: " + (
                ("forward " if c[0] == "F" else "backward ") + c[1:] if c else "idle"
            )
            out.append(
                f'<rect x="{left + t * cell:.1f}" y="{y}" width="{cell - 1:.1f}" height="{row_h - 4}" fill="{colour}">'
                f"<title>{escape(what)}</title></rect>"
            )
    y = top + n * row_h
    out.append(text_at(10, y + 18, f"bubble: {bubble['percent']:.1f}% of the step (p − 1)/(m + p − 1)", fill="#111"))
    out.append(text_at(10, y + 36, f"= {bubble['overhead_percent']:.1f}% of the compute time, (p − 1)/m", fill="#444"))
    out.append("</svg>")
    return finish(
        name="pipeline-schedule",
        title=title,
        svg="\n".join(out),
        alt=alt,
        columns=["stage", *[str(t + 1) for t in range(slots)]],
        rows=[[f"S{s + 1}", *[c or "·" for c in row]] for s, row in enumerate(cells)],
        numbers={"idle_fraction": idle, "bubble_fraction": bubble["fraction"], "overhead": bubble["overhead"]},
    )


SPEC = FigureSpec(
    "pipeline-schedule", "a GPipe schedule of p stages and m microbatches, bubble shaded", PipelineParams, draw_pipeline
)
