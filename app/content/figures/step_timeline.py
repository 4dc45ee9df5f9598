"""One training step as a timeline: compute + communication − overlap = step."""

from __future__ import annotations

from pydantic import Field, model_validator

from labs.api import Span, overlap_metrics, svg_timeline

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
