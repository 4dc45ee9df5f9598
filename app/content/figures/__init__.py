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
from app/content/calc/ (the lesson's one arithmetic) or from the lab code it pictures (the overlap metrics
of labs/trace/timeline.py, the node figures of labs/parallel/costmodel.py); `Rendered.numbers` exposes
them to the tests.

One module per figure, each with its parameter model, its drawing function and its `SPEC`; base.py holds
what they share. Drawing reuses labs/trace/svgplot.py (svg_open's title/desc/background, the Okabe-Ito
palette, line_chart, svg_timeline), so a lesson figure looks like the plots the labs hand back. Text stays
real <text> (selectable, read by screen readers); the text alternative repeats the numbers as a table.
"""

from __future__ import annotations

from pydantic import ValidationError

from ..schema import Rendered
from . import (
    device_mesh,
    memory,
    number_line,
    pipeline_schedule,
    ring_phases,
    ring_time,
    ring_traffic,
    roofline,
    step_timeline,
    tp_block,
    zero_stages,
)
from .base import FigureError, FigureSpec, Params, scope_ids

__all__ = ["FIGURES", "FigureError", "FigureSpec", "Params", "render"]

# The order authors see them in: the template README and the unknown-name error list them so.
FIGURES: dict[str, FigureSpec] = {
    m.SPEC.name: m.SPEC
    for m in (
        number_line,
        step_timeline,
        tp_block,
        device_mesh,
        ring_traffic,
        ring_time,
        ring_phases,
        roofline,
        memory,
        zero_stages,
        pipeline_schedule,
    )
}


def render(name: str, params: dict, figure_id: str) -> Rendered:
    """Validate `params` for figure `name` and draw it. FigureError names each bad parameter."""
    spec = FIGURES.get(name)
    if spec is None:
        raise FigureError([(("name",), f"a figure from app/content/figures/ ({', '.join(FIGURES)})", repr(name))])
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
        update={"svg": scope_ids(drawn.svg, figure_id), "narrow_svg": scope_ids(drawn.narrow_svg, f"{figure_id}-n")}
    )
