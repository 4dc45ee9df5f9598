"""A lab's chart artifact, planned for the page's interactive plot (static/plot.js).

A chart SVG (labs/trace/svgplot.py line_chart, one panel or a stack of them) carries what it was drawn from
as JSON in its <metadata>; labs.api plans it again (axis ranges, ticks and their words, colours, marker
shapes and sizes, the readout's words) with the code that drew the SVG, so the page and the picture agree
and the page does no arithmetic of its own; stacked panels share their left margin and x ticks
(labs.api plan_panels). Two runs' charts of one subject are planned on one axis here
too. A chart from an uploaded bundle is untrusted: it is bounded in size and validated, and a file that is
not one of these charts is a NotFound that says why.

    panels(artifact)                            {"panels": [plan, ...]}: one plan per panel
    overlaid([("A · #12", a), ("B · #14", b)])  {"panels": [plan]}, or {"panels": [], "why": ...} when the
                                                runs' charts cannot share an axis (the page keeps both drawings)
"""

from __future__ import annotations

from app.services.errors import NotFound
from app.services.jobs.artifacts import Artifact
from labs.api import ChartSpec, byte_size, overlay, plan_line_chart, plan_panels, read_specs

MAX_BYTES = 8 * 1024 * 1024  # a lab's largest chart (a long loss curve) is a few hundred KiB


def _specs(artifact: Artifact) -> list[ChartSpec]:
    name = artifact.path.name
    if artifact.media_type != "image/svg+xml":
        raise NotFound(f"{name} is not a chart (it is {artifact.media_type}).")
    if artifact.path.stat().st_size > MAX_BYTES:
        raise NotFound(f"{name} is larger than {byte_size(MAX_BYTES)}: open the drawn chart instead.")
    try:
        return read_specs(artifact.path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise NotFound(f"{name} cannot be redrawn: {exc}.") from None


def panels(artifact: Artifact) -> dict:
    return {"panels": [plan.to_json() for plan in plan_panels(_specs(artifact))]}


def overlaid(runs: list[tuple[str, Artifact]]) -> dict:
    files = [(run, _specs(artifact)) for run, artifact in runs]
    if any(len(specs) != 1 for _, specs in files):
        return {"panels": [], "why": "a chart of several panels is shown as each run drew it"}
    both = overlay([(run, specs[0]) for run, specs in files])
    if both is None:
        return {"panels": [], "why": "the runs' charts are of different things, so each stays as drawn"}
    return {"panels": [plan_line_chart(both).to_json()]}
