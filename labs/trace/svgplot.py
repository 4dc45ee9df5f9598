"""Small, dependency-free SVG charts for lab artifacts: line charts and per-rank timelines.

Charts are inline-able on the learner's page: real <text> (selectable, screen-reader friendly),
a <title>/<desc> pair, a legend beside the plot, and no scripts. Every string is escaped.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from labs.trace.timeline import LANES, Interval
from labs.words import byte_size, number

# Colour-blind-safe palette (Okabe-Ito), dark enough for 3:1 contrast on white.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#8a6d00", "#56B4E9", "#333333"]
# Timeline lanes in the same palette; each lane is also labelled in words, so colour is never the only cue.
LANE_COLOURS = {"compute": "#0072B2", "communication": "#D55E00", "wait": "#8a8a8a"}


@dataclass
class Series:
    name: str
    xs: Sequence[float]
    ys: Sequence[float | None]  # None leaves a gap (a diverged step, a value a log axis cannot show)
    dashed: bool = False
    markers: list[int] = field(default_factory=list)  # indices to mark with a red ring (e.g. clipping)


def svg_open(width: int, height: int, title: str, description: str = "") -> list[str]:
    """The opening lines every course SVG shares: accessible title/desc and a white background."""
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'font-family="system-ui, sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f"<desc>{escape(description or title)}</desc>",
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
    ]


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0]
    if hi == lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(n - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = math.floor(lo / step) * step
    ticks: list[float] = []
    t = start
    while t <= hi + step * 0.5 and len(ticks) < 12:
        ticks.append(round(t, 10))
        t += step
    return ticks


def _decades(lo: float, hi: float) -> list[float]:
    """Whole powers of ten (as exponents) from below `lo` to above `hi`, both log10 values: a log axis labelled
    1, 10, 100 reads as orders of magnitude. Every other decade when there would be more than eight."""
    first, last = math.floor(lo), math.ceil(hi)
    if last == first:
        last += 1
    step = 1 if last - first <= 8 else 2
    return [float(k) for k in range(first, last + 1, step)]


def _json_number(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None  # JSON has no NaN or infinity: a gap, as drawn


def _marker(shape: int | None, cx: float, cy: float, colour: str) -> str:
    """A point: a small filled dot, or with `shape` the series' hollow outline (circle, square, triangle, diamond),
    unfilled so a point under it still shows."""
    if shape is None:
        return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.5" fill="{colour}"/>'
    paint = f'fill="none" stroke="{colour}" stroke-width="1.6"'
    r = 4.5 + 1.2 * (shape % 4)  # each shape a little larger than the one before, so stacked outlines nest
    match shape % 4:
        case 0:
            return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" {paint}/>'
        case 1:
            return f'<rect x="{cx - r:.1f}" y="{cy - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}" {paint}/>'
        case 2:
            pts = f"{cx:.1f},{cy - r:.1f} {cx + r:.1f},{cy + r * 0.8:.1f} {cx - r:.1f},{cy + r * 0.8:.1f}"
            return f'<polygon points="{pts}" {paint}/>'
        case _:
            pts = f"{cx:.1f},{cy - r:.1f} {cx + r:.1f},{cy:.1f} {cx:.1f},{cy + r:.1f} {cx - r:.1f},{cy:.1f}"
            return f'<polygon points="{pts}" {paint}/>'


def _y_ticks(ys: Sequence[float], log_y: bool) -> tuple[list[float], list[str]]:
    """Tick positions (log10 values on a log axis) and their labels for y values already on the axis's scale."""
    yt = _decades(min(ys), max(ys)) if log_y else _nice_ticks(min(ys), max(ys))
    return yt, [_axis_label(10**t if log_y else t) for t in yt]


def y_axis_margin(labels: Sequence[str]) -> int:
    """The left margin tick labels need: they end 6 px left of the plot and must clear the rotated axis title
    (~22 px), ~6.5 px a character at this size, so a long label ("2.5 × 10⁻⁴") widens the margin."""
    return max(64, 28 + math.ceil(6.5 * max(map(len, labels), default=0)))


def log_axis_margin(series: Sequence[Series]) -> int:
    """y_axis_margin of a log_y line_chart of these series: what stack()ed panels share as `min_left`."""
    ys = [math.log10(y) for s in series for y in s.ys if y is not None and math.isfinite(y) and y > 0]
    return y_axis_margin(_y_ticks(ys or [0.0, 1.0], True)[1])


def _axis_label(v: float) -> str:
    """A tick label: three significant digits, a power of ten outside [0.001, 100000) ("2.5 × 10⁻⁴") so a
    label stays within about nine characters; the y axis's margin grows to fit the longest."""
    return number(v, 3, tiny=1e-3, huge=1e5)


def line_chart(
    series: list[Series],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    width: int = 640,
    height: int = 320,
    log_y: bool = False,
    log_x: bool = False,
    xticks: Sequence[float] | None = None,
    shapes: bool = False,
    min_left: int = 64,
    subject: str = "",
    description: str = "",
) -> str:
    """Return an SVG document with one line per series.

    `log_y` draws the y axis in powers of ten, ticked and labelled at each decade; values at or below zero leave a
    gap. `log_x` spaces x by ratio (TP degrees 1, 2, 4, 8 evenly); `xticks` puts the x ticks at those values (a
    sweep's degrees) instead of round steps. `shapes` gives each series its own hollow marker (circle, square,
    triangle, diamond), so lines that coincide (collective and exposed communication when nothing is hidden) are
    still both seen. `min_left` is the least y-axis margin: panels stacked with stack() pass the widest one's, so
    their plots line up. The series ride along as JSON in a <metadata> element, which static/plot.js reads to
    redraw the chart with hover values and to overlay two runs' charts of one `subject` (the title by default;
    a title that names a run's own setting, such as its recipe, passes what the chart is of instead).
    """
    # The legend sits right of the plot; widen the picture so the longest name fits (~7 px a character).
    longest = max((len(s.name) for s in series), default=0)
    right = max(170, 40 + 7 * longest)
    width += right - 170

    def ty(v: float) -> float:
        return math.log10(v) if log_y else v

    def tx(v: float) -> float:
        return math.log10(v) if log_x else v

    def shown(x: float, y: float | None) -> bool:
        ok = y is not None and math.isfinite(x) and math.isfinite(y)
        return ok and (not log_y or y > 0) and (not log_x or x > 0)  # type: ignore[operator]

    pts = [(tx(x), ty(y)) for s in series for x, y in zip(s.xs, s.ys) if shown(x, y)]  # type: ignore[arg-type]
    xs = [p[0] for p in pts] or [0.0, 1.0]
    ys = [p[1] for p in pts] or [0.0, 1.0]
    xt_values = sorted(xticks) if xticks else None
    xt = [tx(v) for v in xt_values] if xt_values else _nice_ticks(min(xs), max(xs))
    xlabels = [_axis_label(v) for v in xt_values] if xt_values else [_axis_label(t) for t in xt]
    yt, ylabels = _y_ticks(ys, log_y)
    left = max(min_left, y_axis_margin(ylabels))
    width += left - 64
    top, bottom = 36, 46
    pw, ph = width - left - right, height - top - bottom
    x0, x1 = min(xt[0], min(xs)), max(xt[-1], max(xs))
    y0, y1 = min(yt[0], min(ys)), max(yt[-1], max(ys))
    x1 = x1 if x1 > x0 else x0 + 1
    y1 = y1 if y1 > y0 else y0 + 1

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + ph - (y - y0) / (y1 - y0) * ph

    out = svg_open(width, height, title, description)
    out.append(f'<text x="{left}" y="20" font-size="14" font-weight="600" fill="#111">{escape(title)}</text>')
    for t, label in zip(yt, ylabels):
        y = py(t)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#333">{label}</text>')
    for t, label in zip(xt, xlabels):
        x = px(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + ph}" y2="{top + ph + 4}" stroke="#333"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle" fill="#333">{label}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="#111">{escape(xlabel)}</text>'
    )
    out.append(
        f'<text transform="translate(14 {top + ph / 2:.1f}) rotate(-90)" text-anchor="middle" fill="#111">'
        f"{escape(ylabel)}{' (log scale)' if log_y else ''}</text>"
    )
    data = {
        "title": title,
        "subject": subject or title,
        "xlabel": xlabel,
        "ylabel": ylabel,
        "log_y": log_y,
        "log_x": log_x,
        "series": [
            {"name": s.name, "xs": list(s.xs), "ys": [_json_number(y) for y in s.ys], "dashed": s.dashed}
            for s in series
        ],
    }
    out.append(
        f'<metadata data-plot="line-chart">{escape(json.dumps(data, separators=(",", ":")), quote=False)}</metadata>'
    )
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        coords = [(px(tx(x)), py(ty(y))) for x, y in zip(s.xs, s.ys) if shown(x, y)]  # type: ignore[arg-type]
        if coords:
            d = " ".join(f"{'M' if j == 0 else 'L'}{cx:.1f},{cy:.1f}" for j, (cx, cy) in enumerate(coords))
            dash = ' stroke-dasharray="6 4"' if s.dashed else ""
            out.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="2"{dash}>')
            out.append(f"<title>{escape(s.name)}</title></path>")
            if len(coords) <= 40:
                for cx, cy in coords:
                    out.append(_marker(i if shapes else None, cx, cy, colour))
        for j in s.markers:
            yj = s.ys[j] if 0 <= j < len(s.xs) else None
            if yj is not None and shown(s.xs[j], yj):
                cx, cy = px(tx(s.xs[j])), py(ty(yj))
                out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="none" stroke="#c00" stroke-width="2"/>')
        ly = top + 10 + i * 20
        lx = left + pw + 12
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        out.append(f'<line x1="{lx}" x2="{lx + 22}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>')
        if shapes:
            out.append(_marker(i, lx + 11, ly, colour))
        out.append(f'<text x="{lx + 28}" y="{ly + 4}" fill="#111">{escape(s.name)}</text>')
    if any(s.markers for s in series):
        ly = top + 10 + len(series) * 20
        lx = left + pw + 12
        out.append(f'<circle cx="{lx + 11}" cy="{ly}" r="6" fill="none" stroke="#c00" stroke-width="2"/>')
        out.append(f'<text x="{lx + 28}" y="{ly + 4}" fill="#111">clipped step</text>')
    out.append("</svg>")
    return "\n".join(out)


def stack(charts: list[str], *, title: str, description: str = "", gap: int = 8) -> str:
    """Charts from line_chart drawn one under the other in one picture, each keeping its own axes: panels whose
    values lie orders of magnitude apart (a CPU measurement and a GPU prediction) each get a readable scale."""
    sizes = []
    for chart in charts:
        m = re.search(r'viewBox="0 0 ([0-9.]+) ([0-9.]+)"', chart)
        if m is None:
            raise ValueError("stack() takes SVG documents from line_chart (a viewBox of 0 0 width height)")
        sizes.append((float(m.group(1)), float(m.group(2))))
    width = max(w for w, _ in sizes)
    height = sum(h for _, h in sizes) + gap * (len(charts) - 1)
    out = svg_open(round(width), round(height), title, description)
    y = 0.0
    for chart, (w, h) in zip(charts, sizes):
        # The panel's own <svg> opening becomes a placed viewport; its title, desc and shapes stay as drawn.
        body = chart.split("\n", 1)[1]
        out.append(f'<svg x="0" y="{y:g}" width="{w:g}" height="{h:g}" viewBox="0 0 {w:g} {h:g}">')
        out.append(body)
        y += h + gap
    out.append("</svg>")
    return "\n".join(out)


# ---- per-rank timelines ---------------------------------------------------------------------


def _ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    span = hi - lo if hi > lo else 1.0
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def svg_timeline(
    spans,
    *,
    title: str,
    description: str = "",
    window: Interval | None = None,
    width: int = 900,
    subtitle: str = "",
) -> str:
    """One row group per rank with lanes compute / communication / wait, x axis in ms.

    Lanes are labelled in words at the left of every rank group, so no legend is needed. Each bar
    carries a <title> (its name, duration and any bytes it moved) for hover and screen readers, and bars wide enough
    for text show their name. All text is escaped.
    """
    spans = list(spans)
    ranks = sorted({s.rank for s in spans}) or [0]
    if window is None:
        lo = min((s.start_ms for s in spans), default=0.0)
        hi = max((s.end_ms for s in spans), default=1.0)
    else:
        lo, hi = window
    hi = hi if hi > lo else lo + 1.0
    # The subtitle wraps onto as many lines as it needs (~6.5 px a character at this size) instead of being cut.
    sub_lines = textwrap.wrap(subtitle, max(20, int((width - 24) / 6.5))) if subtitle else []
    left, right, top = 170, 20, 44 + 16 * len(sub_lines)
    lane_h, lane_gap, group_gap = 18, 4, 14
    group_h = len(LANES) * (lane_h + lane_gap)
    plot_h = len(ranks) * (group_h + group_gap)
    height = top + plot_h + 48
    pw = width - left - right

    def px(t: float) -> float:
        return left + (t - lo) / (hi - lo) * pw

    out = svg_open(width, height, title, description or (f"{title}. {subtitle}" if subtitle else ""))
    out.append(f'<text x="12" y="22" font-size="14" font-weight="600" fill="#111">{escape(title)}</text>')
    for i, line in enumerate(sub_lines):
        out.append(f'<text x="12" y="{40 + 16 * i}" fill="#444">{escape(line)}</text>')
    axis_y = top + plot_h
    # The axis reads time since the window's start, so the ticks are round in that time, not in the clock's.
    for t in _ticks(0.0, hi - lo):
        x = px(lo + t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 4}" y2="{axis_y}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{x:.1f}" y="{axis_y + 16}" text-anchor="middle" fill="#333">{number(t, 3)}</text>')
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{axis_y}" y2="{axis_y}" stroke="#333"/>')
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{axis_y + 36}" text-anchor="middle" fill="#111">'
        f"time since start of window (ms)</text>"
    )
    for gi, rank in enumerate(ranks):
        gy = top + gi * (group_h + group_gap)
        out.append(f'<text x="12" y="{gy + group_h / 2 + 4:.1f}" font-weight="600" fill="#111">rank {rank}</text>')
        for li, lane_name in enumerate(LANES):
            ly = gy + li * (lane_h + lane_gap)
            colour = LANE_COLOURS[lane_name]
            out.append(f'<rect x="{left}" y="{ly}" width="{pw}" height="{lane_h}" fill="#f6f6f6"/>')
            out.append(
                f'<text x="{left - 8}" y="{ly + lane_h - 5}" text-anchor="end" fill="{colour}">{lane_name}</text>'
            )
            for s in spans:
                if s.rank != rank or s.lane != lane_name or s.end_ms < lo or s.start_ms > hi:
                    continue
                x0, x1 = px(max(s.start_ms, lo)), px(min(s.end_ms, hi))
                w = max(x1 - x0, 1.0)  # a zero-length wait still shows as a hairline
                tip = f"rank {rank} · {lane_name} · {s.name}: {number(s.duration_ms, 3)} ms"
                if isinstance(s.args.get("bytes"), int | float):
                    tip += f" · {byte_size(s.args['bytes'])}"
                out.append(
                    f'<rect x="{x0:.1f}" y="{ly}" width="{w:.1f}" height="{lane_h}" fill="{colour}" '
                    f'fill-opacity="0.85"><title>{escape(tip)}</title></rect>'
                )
                if w > 7 * len(s.name) + 6:
                    out.append(
                        f'<text x="{x0 + 4:.1f}" y="{ly + lane_h - 5}" fill="#fff" pointer-events="none">'
                        f"{escape(s.name)}</text>"
                    )
    out.append("</svg>")
    return "\n".join(out)
