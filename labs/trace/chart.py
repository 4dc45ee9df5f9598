"""What a chart shows, computed once for both of its drawings: axis ranges, ticks and their labels, colours,
marker shapes and sizes, readout words and overlap windows.

A lab's SVG artifact (labs/trace/svgplot.py) and the page's interactive view (static/plot.js, static/timeline.js)
draw the same plan: the SVG at its own size, the page at the width it has. The page adds hover, keys, zoom,
pan and the overlay of two runs, and keeps no tick, number-formatting, palette or overlap rule of its own.

    spec = ChartSpec(series, title=..., xlabel=..., ylabel=..., log_y=True)
    plan = plan_line_chart(spec)       # Axis ranges in axis units (log10 on a log axis), Tick labels, Lines
    plans = plan_panels(read_specs(svg_text))   # what a chart SVG carries, planned again
    both = overlay([("A · #12", spec_a), ("B · #14", spec_b)])   # two runs on one axis, or None
    time_ticks(0.0, 12.5)              # a timeline's axis: the TickSet for that window, with the widths it suits

A line chart's SVG carries its ChartSpec as JSON in a <metadata> element, so the server can plan it again
(app/services/jobs/charts.py serves that plan to static/plot.js, and the overlay of two runs' charts).
Torch-free; the app reaches it through labs.api.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from typing import Any, TypeGuard

from labs.words import number

# Colour-blind-safe palette (Okabe-Ito), dark enough for 3:1 contrast on white.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#8a6d00", "#56B4E9", "#333333"]

# Timeline lanes in the chart palette; each lane is also labelled in words, so colour is never the only cue. `ink` is
# the text drawn on a lane's bars (white on this orange is 3.9:1, so dark ink there), `short` a lane's name where
# the page has little room.
LANE_COLOURS = {"compute": PALETTE[0], "communication": PALETTE[1], "wait": "#8a8a8a"}
LANE_INK = {"compute": "#ffffff", "communication": "#16181d", "wait": "#16181d"}
LANE_SHORT = {"compute": "compute", "communication": "comm", "wait": "wait"}
# Where compute and communication of one rank overlap: a translucent band over its lanes, edged so it reads on
# any bar colour; `css` is the same fill for a page's background colour.
_BAND, _BAND_OPACITY = "#f3d36b", 0.35
OVERLAP_COLOURS = {
    "fill": _BAND,
    "opacity": _BAND_OPACITY,
    "edge": "#b58900",
    "css": f"rgba({int(_BAND[1:3], 16)}, {int(_BAND[3:5], 16)}, {int(_BAND[5:7], 16)}, {_BAND_OPACITY})",
}

# A series marks its points with its own shape when every series has at most this many: a sweep's few points
# then read without colour (a colour-blind learner tells lines apart by shape), while a loss curve's hundred
# points stay a clean line that a 390 px phone can read (markers that close together become a smudge).
MARKER_MAX_POINTS = 16
SHAPES = ("circle", "square", "triangle", "diamond")
MARKER_R = 4.5  # px, the first shape's radius; each next shape is MARKER_GROWTH larger
MARKER_GROWTH = 1.2  # so the outlines of coinciding points nest instead of hiding each other
MARKER_STROKE = 1.8
DASH = "6 4"
# A ring around points a lab calls out (fp8-step's most-clipped steps), and what its key says.
RING = {"colour": "#c00", "r": 6.0, "stroke_width": 2.0}

# Tick steps are 1, 2, 2.5 or 5 times a power of ten, so every label is a round number.
NICE = (1.0, 2.0, 2.5, 5.0)
TIME_TICKS = 6  # a timeline's axis has at most about this many tick intervals across the window
# A timeline's tick labels must not overlap where the axis is narrowest: the page's viewer on a 390 px phone, whose
# axis is 261 px of .72rem (11.5 px) labels, 22.7 em; the drawn SVG's is wider, and both show the same ticks. Label
# widths are estimated per character in em, at DejaVu Sans's widths (the widest of the common sans faces), rounded up.
TICK_AXIS_EM = 22.5
TICK_GAP_EM = 0.6  # the least space between two labels
# Room right of the axis's end (the viewer's plot padding, static/timeline.css), into which the last label may reach:
# a label that would pass it is drawn ending there, up to half a label further left than its tick (static/timeline.js).
TICK_END_EM = 1.3
TICK_UNIT = " ms"  # what the page's labels carry and the fit is measured with, whatever `unit` a drawing asks for
_CHAR_EM = {**dict.fromkeys("0123456789µ", 0.64), **dict.fromkeys(".,: ", 0.32), "m": 0.98, "s": 0.53}


# ---- what both drawings share ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Tick:
    at: float  # in axis units: log10 of the value on a log axis
    label: str


@dataclass(frozen=True)
class Axis:
    lo: float  # the range drawn, in axis units
    hi: float
    log: bool
    title: str
    ticks: list[Tick]


@dataclass(frozen=True)
class Marker:
    """A hollow outline around a point: a circle of radius `r`, or a polygon whose `points` are offsets from the
    point in px (each drawing translates it there), unfilled so a point under it still shows."""

    shape: str
    r: float
    stroke_width: float
    points: list[tuple[float, float]]


@dataclass
class Series:
    """One line of a chart, as a lab hands it over."""

    name: str
    xs: Sequence[float]
    ys: Sequence[float | None]  # None leaves a gap (a diverged step, a value a log axis cannot show)
    dashed: bool = False
    rings: list[int] = field(default_factory=list)  # indices to ring in red (fp8-step: the most-clipped steps)
    style: int | None = None  # colour and shape index; its position in the chart when None (an overlay repeats it)


@dataclass
class ChartSpec:
    """Everything a line chart is drawn from: what a chart SVG carries in its <metadata>."""

    series: list[Series]
    title: str
    xlabel: str
    ylabel: str
    subject: str = ""  # what the chart is of, when the title names a run's own setting (overlays match on it)
    log_x: bool = False
    log_y: bool = False
    xticks: list[float] | None = None  # ticks at these x values (a sweep's degrees) instead of round steps
    min_left: int = 64  # the least y-axis margin: stacked panels pass the widest one's, so their plots line up
    ring_label: str = "clipped step"


@dataclass(frozen=True)
class Line:
    name: str
    colour: str
    dash: str  # an SVG stroke-dasharray, "" for solid
    marker: Marker | None
    points: list[tuple[float, float | None]]  # (x, y) in axis units; y None is a gap
    values: list[str]  # the readout's words for each point's y
    rings: list[int]  # indices into points


@dataclass(frozen=True)
class LinePlan:
    title: str
    subject: str
    x: Axis
    y: Axis
    left: int  # px the y axis's tick labels and title need
    lines: list[Line]
    steps: list[Tick]  # the x positions a readout visits, left to right, with their words
    xlabel: str  # the readout's name for x ("step 3 · ...")
    ring: dict[str, Any] | None  # RING and its label, when a line has rings

    def to_json(self) -> dict:
        return asdict(self)


# ---- ticks -----------------------------------------------------------------------------------------------


def nice_step(raw: float) -> float:
    """The smallest round step (1, 2, 2.5 or 5 times a power of ten) at least `raw`."""
    if not math.isfinite(raw) or raw <= 0:
        return 1.0
    mag = 10.0 ** math.floor(math.log10(raw))
    return next((m * mag for m in (*NICE, 10.0) if m * mag >= raw * (1 - 1e-12)), 10 * mag)


def _step_below(step: float) -> float:
    """The round step just smaller than `step` (itself round)."""
    mag = 10.0 ** math.floor(math.log10(step) + 1e-12)
    candidates = [m * mag / 10 for m in NICE] + [m * mag for m in NICE]
    return max(c for c in candidates if c < step * (1 - 1e-9))


def _step_above(step: float) -> float:
    """The round step just larger than `step` (itself round)."""
    return nice_step(step * (1 + 1e-6))


def _multiples(lo: float, hi: float, step: float) -> list[float]:
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    return [round(k * step, 10) + 0.0 for k in range(first, last + 1)]


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About `n` round ticks from at or below `lo` to at or above `hi` (a value axis reaches its ticks)."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0]
    if hi == lo:
        hi = lo + (abs(lo) or 1.0)
    step = nice_step((hi - lo) / max(n - 1, 1))
    start = math.floor(lo / step + 1e-9) * step
    ticks: list[float] = []
    t = start
    while t <= hi + step * 0.5 and len(ticks) < 12:
        ticks.append(round(t, 10) + 0.0)
        t += step
    return ticks


def decades(lo: float, hi: float) -> list[float]:
    """Whole powers of ten (as exponents) from below `lo` to above `hi`, both log10 values: a log axis labelled
    1, 10, 100 reads as orders of magnitude. Every other decade when there would be more than eight."""
    first, last = math.floor(lo), math.ceil(hi)
    if last == first:
        last += 1
    step = 1 if last - first <= 8 else 2
    return [float(k) for k in range(first, last + 1, step)]


def axis_label(v: float) -> str:
    """A tick label: three significant digits, a power of ten outside [0.001, 100000) ("2.5 × 10⁻⁴") so a
    label stays within about nine characters; the y axis's margin grows to fit the longest."""
    return number(v, 3, tiny=1e-3, huge=1e5)


def y_axis_margin(labels: Sequence[str]) -> int:
    """The left margin tick labels need: they end 6 px left of the plot and must clear the rotated axis title
    (~22 px), ~6.5 px a character at this size, so a long label ("2.5 × 10⁻⁴") widens the margin."""
    return max(64, 28 + math.ceil(6.5 * max(map(len, labels), default=0)))


@dataclass(frozen=True)
class TickSet:
    """A timeline axis's ticks from `lo` to `hi` (ms), `step` apart: the ones a window of a width in
    (min_width, max_width] shows, the same step static/timeline.js keeps while zoom stays in that band."""

    lo: float
    hi: float
    step: float
    min_width: float
    max_width: float
    ticks: list[Tick]

    def to_json(self) -> dict:
        return asdict(self)


def label_em(text: str) -> float:
    """About how wide `text` is, in em of its font (_CHAR_EM; other characters count as a full em)."""
    return sum(_CHAR_EM.get(c, 1.0) for c in text)


def time_label(t: float, step: float) -> str:
    """Time `t` (ms) on an axis ticked `step` apart, with every decimal the step needs and no more: ticks 0.025
    apart read "1.025", "1.05", "1.075", each its own time ("2.5" steps need one decimal more than the power of ten)."""
    exponent = math.floor(math.log10(step) + 1e-12)
    places = max(0, 1 - exponent if round(step / 10.0**exponent, 9) == 2.5 else -exponent)
    text = f"{t:,.{places}f}"
    return text.rstrip("0").rstrip(".") if places else text


def _room(lo: float, hi: float, step: float) -> float:
    """The widest window whose ticks `step` apart, from `lo` to `hi`, TIME_TICKS at most, keep their labels apart on
    the narrowest axis: each takes the widest one's width and a gap, and the last up to half a label more
    (pulled back inside the plot) than the room past the axis's end."""
    times = _multiples(lo, hi, step) or [hi]
    widest = max(label_em(time_label(t, step) + TICK_UNIT) for t in times)
    need = max(widest, 1.5 * widest - TICK_END_EM) + TICK_GAP_EM
    return step * min(TIME_TICKS, TICK_AXIS_EM / need)


def time_ticks(lo: float, hi: float, *, width: float | None = None, unit: str = " ms") -> TickSet:
    """The ticks a timeline window `width` ms wide shows, for every tick time from `lo` to `hi`; `width` defaults to
    hi - lo. The step is the finest round one that puts at most TIME_TICKS intervals across the window and whose
    labels, the time and `unit` ("2.5 ms"), do not overlap on the narrowest axis (TICK_AXIS_EM). The set suits the
    windows for which this rule, over this range, gives its step: wider than any finer step has room for, and no
    wider than its own has."""
    span = (hi - lo) if width is None else width
    span = span if span > 0 else 1.0
    slack = 1 + 1e-9  # nice_step's own tolerance, so a window exactly at a band's edge is inside it
    step = nice_step(span / (TIME_TICKS * slack))
    for _ in range(64):  # each step up gains room; a few always suffice
        if span <= _room(lo, hi, step) * slack:
            break
        step = _step_above(step)
    widest_finer, finer = 0.0, step
    while TIME_TICKS * (finer := _step_below(finer)) > widest_finer:  # finer steps have at most this much room
        widest_finer = max(widest_finer, _room(lo, hi, finer))
    ticks = [Tick(t, f"{time_label(t, step)}{unit}") for t in _multiples(lo, hi, step)]
    return TickSet(lo, hi, step, widest_finer * slack, _room(lo, hi, step) * slack, ticks)


# ---- line charts ---------------------------------------------------------------------------------------


def marker(style: int) -> Marker:
    """The hollow shape of series `style`: circle, square, triangle, diamond, each a little larger than the one
    before, so stacked outlines nest."""
    k = style % len(SHAPES)
    r = MARKER_R + MARKER_GROWTH * k
    shape = SHAPES[k]
    pts: list[tuple[float, float]] = {
        "circle": [],
        "square": [(-r, -r), (r, -r), (r, r), (-r, r)],
        "triangle": [(0.0, -r), (r, 0.8 * r), (-r, 0.8 * r)],
        "diamond": [(0.0, -r), (r, 0.0), (0.0, r), (-r, 0.0)],
    }[shape]
    return Marker(shape, round(r, 2), MARKER_STROKE, [(round(x, 2) + 0.0, round(y, 2) + 0.0) for x, y in pts])


def _finite(v: object) -> TypeGuard[float]:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _readout(v: float | None) -> str:
    return number(v, 4) if _finite(v) else "no value (not finite)"


def plan_line_chart(spec: ChartSpec) -> LinePlan:
    """The chart's axes, ticks, lines and markers in axis units, from its spec alone.

    A log axis ticks each decade the values span; a log x without `xticks` ticks the series' own x values
    when there are at most 12 of them (a sweep's degrees), else decades. A value axis reaches its round ticks; a
    linear x axis spans the data (steps 0 to 49) with round ticks inside it. x axes ticked at the data's own
    values keep 4% of the range clear at each end, so the first and last markers do not sit on the frame.
    """

    def tx(v: float) -> float:
        return math.log10(v) if spec.log_x else float(v)

    def ty(v: float) -> float:
        return math.log10(v) if spec.log_y else float(v)

    def x_ok(x: Any) -> bool:
        return _finite(x) and (not spec.log_x or x > 0)

    def y_ok(y: object) -> TypeGuard[float]:
        return _finite(y) and (not spec.log_y or y > 0)

    pts = [(tx(x), ty(y)) for s in spec.series for x, y in zip(s.xs, s.ys) if x_ok(x) and y_ok(y)]
    xs = [p[0] for p in pts] or [0.0, 1.0]
    ys = [p[1] for p in pts] or [0.0, 1.0]
    own = sorted({float(x) for s in spec.series for x in s.xs if x_ok(x)})
    swept = _swept(spec)
    if spec.xticks:
        xt = [Tick(tx(v), axis_label(v)) for v in sorted(v for v in spec.xticks if x_ok(v))]
    elif swept:
        xt = [Tick(tx(v), axis_label(v)) for v in swept]
    elif spec.log_x:
        xt = [Tick(t, axis_label(10**t)) for t in decades(min(xs), max(xs))]
    else:
        xt = [Tick(t, axis_label(t)) for t in nice_ticks(min(xs), max(xs)) if min(xs) - 1e-9 <= t <= max(xs) + 1e-9]
    if spec.log_y:
        yt = [Tick(t, axis_label(10**t)) for t in decades(min(ys), max(ys))]
    else:
        yt = [Tick(t, axis_label(t)) for t in nice_ticks(min(ys), max(ys))]
    x0, x1 = min([t.at for t in xt] + xs), max([t.at for t in xt] + xs)
    x1 = x1 if x1 > x0 else x0 + 1
    if spec.xticks or spec.log_x:
        pad = 0.04 * (x1 - x0)
        x0, x1 = x0 - pad, x1 + pad
    y0, y1 = min([t.at for t in yt] + ys), max([t.at for t in yt] + ys)
    y1 = y1 if y1 > y0 else y0 + 1
    shaped = all(len(s.xs) <= MARKER_MAX_POINTS for s in spec.series)
    lines = []
    for i, s in enumerate(spec.series):
        style = i if s.style is None else s.style
        points: list[tuple[float, float | None]] = []
        values: list[str] = []
        index: dict[int, int] = {}
        for j, (x, y) in enumerate(zip(s.xs, s.ys)):
            if not x_ok(x):
                continue
            index[j] = len(points)
            points.append((tx(x), ty(y) if y_ok(y) else None))
            values.append(_readout(y))
        lines.append(
            Line(
                name=s.name,
                colour=PALETTE[style % len(PALETTE)],
                dash=DASH if s.dashed else "",
                marker=marker(style) if shaped else None,
                points=points,
                values=values,
                rings=[index[j] for j in s.rings if j in index and points[index[j]][1] is not None],
            )
        )
    steps = [Tick(tx(v), number(v, 6)) for v in own]
    return LinePlan(
        title=spec.title,
        subject=spec.subject or spec.title,
        x=Axis(x0, x1, spec.log_x, spec.xlabel, xt),
        y=Axis(y0, y1, spec.log_y, spec.ylabel + (" (log scale)" if spec.log_y else ""), yt),
        left=max(spec.min_left, y_axis_margin([t.label for t in yt])),
        lines=lines,
        steps=steps,
        xlabel=spec.xlabel or "x",
        ring={**RING, "label": spec.ring_label} if any(line.rings for line in lines) else None,
    )


def _swept(spec: ChartSpec) -> list[float] | None:
    """The x values a log-x chart without `xticks` is ticked at: its series' own, when there are at most 12."""
    own = sorted({float(x) for s in spec.series for x in s.xs if _finite(x) and x > 0})
    return own if spec.log_x and 0 < len(own) <= 12 else None


def plan_panels(specs: Sequence[ChartSpec]) -> list[LinePlan]:
    """The plans of charts stacked in one picture (svgplot.stack), sharing what lets them be read together: one
    left margin, so their plots start at one x, and, for panels ticked at their x values (a sweep's degrees), the
    union of those ticks, so a degree sits at one x in every panel though only one panel reaches it."""
    specs = list(specs)
    if len(specs) > 1:
        ticked = [s.xticks or _swept(s) for s in specs]
        if len({s.log_x for s in specs}) == 1 and all(ticked):
            shared = sorted({v for t in ticked for v in t or []})
            specs = [replace(s, xticks=shared) for s in specs]
        left = max(plan_line_chart(s).left for s in specs)
        specs = [replace(s, min_left=left) for s in specs]
    return [plan_line_chart(s) for s in specs]


def log_axis_margin(series: Sequence[Series]) -> int:
    """The y-axis margin of a log_y chart of these series: what stacked panels share as `min_left`."""
    return plan_line_chart(ChartSpec(list(series), "", "", "", log_y=True)).left


# ---- a chart's spec in its SVG, and two runs on one axis --------------------------------------------------


METADATA = re.compile(r'<metadata data-plot="line-chart">([^<]*)</metadata>')
MAX_POINTS = 200_000  # every series of one file together; a lab's longest chart has a few thousand


def spec_json(spec: ChartSpec) -> str:
    """The <metadata> element a chart SVG carries its spec in (JSON, never markup; non-finite values as null)."""
    data = asdict(spec)
    for s in data["series"]:
        s["xs"] = [float(x) if _finite(x) else None for x in s["xs"]]
        s["ys"] = [float(y) if _finite(y) else None for y in s["ys"]]
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return f'<metadata data-plot="line-chart">{html.escape(text, quote=False)}</metadata>'


@cache
def _spec_adapter() -> Any:
    from pydantic import TypeAdapter  # only the server reads specs back

    return TypeAdapter(ChartSpec)


def read_specs(svg_text: str) -> list[ChartSpec]:
    """The spec of every chart an SVG holds (a stacked file holds one per panel), validated; ValueError saying
    what is wrong with a file that is not one of these charts."""
    found = METADATA.findall(svg_text)
    if not found:
        raise ValueError("it holds no line chart")
    adapter, specs = _spec_adapter(), []
    for text in found:
        try:
            data = json.loads(html.unescape(text))
        except ValueError:
            raise ValueError("its chart data is not JSON") from None
        if isinstance(data, dict) and isinstance(data.get("series"), list):
            for s in data["series"]:
                if isinstance(s, dict) and isinstance(s.get("xs"), list):
                    s["xs"] = [math.nan if x is None else x for x in s["xs"]]  # a gap, as drawn
        try:
            specs.append(adapter.validate_python(data))
        except Exception as exc:  # pydantic's ValidationError, named without importing pydantic at import time
            raise ValueError(f"its chart data is not a chart ({str(exc).splitlines()[0]})") from None
    if sum(len(s.xs) for spec in specs for s in spec.series) > MAX_POINTS:
        raise ValueError(f"it holds more than {MAX_POINTS:,} points")
    return specs


def overlay(runs: Sequence[tuple[str, ChartSpec]]) -> ChartSpec | None:
    """Two or more runs' charts of one subject on one axis: each series named "<run> · <series>", keeping its
    colour and shape across runs, the first run solid and the others dashed. None when the charts are of
    different things or on different scales (an amax history of two tensors): one axis would mix them."""
    first = runs[0][1]
    for _, spec in runs:
        same = (spec.subject or spec.title, spec.log_x, spec.log_y) == (
            first.subject or first.title,
            first.log_x,
            first.log_y,
        )
        if not same:
            return None
    series = [
        Series(
            f"{run} · {s.name}", s.xs, s.ys, dashed=r > 0, rings=list(s.rings), style=j if s.style is None else s.style
        )
        for r, (run, spec) in enumerate(runs)
        for j, s in enumerate(spec.series)
    ]
    xticks = sorted({v for _, spec in runs for v in spec.xticks or []}) or None
    return ChartSpec(
        series,
        title=f"{first.title}: {' and '.join(run for run, _ in runs)}",
        xlabel=first.xlabel,
        ylabel=first.ylabel,
        subject=first.subject or first.title,
        log_x=first.log_x,
        log_y=first.log_y,
        xticks=xticks,
        min_left=max(spec.min_left for _, spec in runs),
        ring_label=first.ring_label,
    )
