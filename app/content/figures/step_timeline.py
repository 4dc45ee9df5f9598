"""One training step as a timeline: compute + communication − overlap = step."""

from __future__ import annotations

from pydantic import Field, model_validator

from labs.api import Span, number, overlap_metrics, percent, svg_timeline

from .. import calc
from ..schema import Rendered
from .base import FigureSpec, Params, finish


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
    svg = svg_timeline(
        spans,
        title=title,
        description=alt,
        window=(0.0, step["total"]),
        width=760,
        subtitle=f"compute {number(p.compute)} ms + communication {number(p.comm)} ms − overlap {number(p.overlap)} ms; "
        f"exposed {number(step['exposed'])} ms",
    )
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


SPEC = FigureSpec(
    "step-timeline", "compute + communication − overlap = step, as a timeline", StepParams, draw_step_timeline
)
