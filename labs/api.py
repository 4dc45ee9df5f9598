"""The door from the app into the labs: everything `app` uses from `labs`, besides labs/catalog.py, is here.

The app imports `labs.api` and `labs.catalog` only (an import-linter contract in .importlinter says so), so
the rest of `labs` can be moved and renamed without reading the app. Everything here is torch-free: the
web tier imports it at start-up and must never import torch (tests/app/test_torch_free.py).

    wording      numbers, byte sizes, durations and counts as people read them (labs/words.py), the one
                 formatter of result cards, practice prompts, refusals and plot axes
    resources    what a job may use: MIB, the CPU rank slots a CPU host offers, a host's Capacity and the
                 per-job memory budget when the deployment sets none
    exits        how `python -m labs run` says it ended: exits.OK, BAD_PARAMS, STOPPED, EXTERNAL_STOPS,
                 signal_of (labs/exits.py), read by app/executors/labproc.py
    host state   release_host_state(pid): delete what a lab process left on the host when it could not clean up
                 itself (the collectives lab's network namespaces and veths, labs/collectives/topo.py), and
                 host_state_left(pid) to see it; called by the executor once the process group is gone
    jsonbounds   JSON from outside the course (uploads) parsed within bounds, in linear time: loads, RESULT,
                 TRACE, TooMuch
    checks       the automatic checks of a lab report's evidence (labs/checks/ and each lab's checks.py):
                 check_item, schema_problem, Source, STATUSES
    params       the base model of every lab's parameters and pydantic errors in the learner's terms
    results      validate_result: the check a result.json passes before the app shows or grades it
    cost model   NODES and predict_sweep: the predicted tensor-parallel step the lessons' tools share
    comm         the communication model (labs/parallel/comm.py): bus factors, hops, α-β time, node egress
                 (flat ring or hierarchical) and the all-to-all split, one implementation for the lessons'
                 calculators and the labs' predictions
    result parts the typed summary items and tables every lab's results hold (labs/result_common.py), and
                 their readers for the page: read_summary_item, read_table
    charts       what a chart shows, planned once for the SVG and the page (labs/trace/chart.py: ticks,
                 labels, palette, lane colours, markers, the overlay of two runs), the SVG line chart and
                 per-rank timeline (labs/trace/svgplot.py) and the timeline's lanes, spans and overlap
                 arithmetic (labs/trace/timeline.py), drawn by the lessons' figures too
"""

from __future__ import annotations

from labs import checks, exits, jsonbounds
from labs.collectives.topo import leftovers as host_state_left
from labs.collectives.topo import release as release_host_state
from labs.parallel import comm
from labs.parallel.costmodel import NODES, Node, predict_sweep
from labs.params import LabParams, describe_error
from labs.resources import MIB, MIN_CPU_SLOTS, Capacity, default_job_memory_bytes
from labs.result_common import SummaryItem, Table, read_summary_item, read_table
from labs.runtime import validate_result
from labs.trace.chart import (
    LANE_COLOURS,
    LANE_INK,
    LANE_SHORT,
    OVERLAP_COLOURS,
    PALETTE,
    ChartSpec,
    LinePlan,
    Series,
    TickSet,
    overlay,
    plan_line_chart,
    plan_panels,
    read_specs,
    time_ticks,
)
from labs.trace.svgplot import line_chart, svg_open, svg_timeline
from labs.trace.timeline import LANES, Span, overlap_metrics, overlap_windows
from labs.words import byte_size, count, duration, number, percent, power_of_ten

__all__ = [
    # wording
    "byte_size",
    "count",
    "duration",
    "number",
    "percent",
    "power_of_ten",
    # resources
    "MIB",
    "MIN_CPU_SLOTS",
    "Capacity",
    "default_job_memory_bytes",
    # exits
    "exits",
    # host state
    "host_state_left",
    "release_host_state",
    # grading
    "checks",
    "jsonbounds",
    # params
    "LabParams",
    "describe_error",
    # results
    "validate_result",
    # cost model
    "NODES",
    "Node",
    "predict_sweep",
    # communication model
    "comm",
    # result parts
    "SummaryItem",
    "Table",
    "read_summary_item",
    "read_table",
    # charts
    "LANES",
    "LANE_COLOURS",
    "LANE_INK",
    "LANE_SHORT",
    "OVERLAP_COLOURS",
    "PALETTE",
    "ChartSpec",
    "LinePlan",
    "Series",
    "Span",
    "TickSet",
    "line_chart",
    "overlap_metrics",
    "overlap_windows",
    "overlay",
    "plan_line_chart",
    "plan_panels",
    "read_specs",
    "svg_open",
    "svg_timeline",
    "time_ticks",
]
