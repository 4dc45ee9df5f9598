"""Small, dependency-free SVG charts for lab artifacts: line charts and per-rank timelines.

Charts are inline-able on the learner's page: real <text> (selectable, screen-reader friendly),
a <title>/<desc> pair, a legend beside the plot, and no scripts. Every string is escaped. What a chart
shows (ranges, ticks, labels, colours, markers, overlap windows) is labs/trace/chart.py's plan, the
same one the page's scripts draw; this module only places it in pixels.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from html import escape

from labs.trace.chart import (
    LANE_COLOURS,
    LANE_INK,
    OVERLAP_COLOURS,
    ChartSpec,
    Marker,
    Series,
    plan_line_chart,
    spec_json,
    time_ticks,
)
from labs.trace.timeline import LANES, Interval, overlap_windows
from labs.words import byte_size, number


def svg_open(width: int, height: int, title: str, description: str = "") -> list[str]:
    """The opening lines every course SVG shares: accessible title/desc and a white background."""
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'font-family="system-ui, sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f"<desc>{escape(description or title)}</desc>",
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
    ]


def marker_svg(m: Marker, cx: float, cy: float, colour: str, cls: str = "marker") -> str:
    """A marker of the plan at (cx, cy): its outline drawn about the origin and moved there, as static/plot.js
    draws it."""
    paint = f'fill="none" stroke="{colour}" stroke-width="{m.stroke_width:g}"'
    if m.shape == "circle":
        shape = f'<circle r="{m.r:g}" {paint}/>'
    else:
        shape = f'<polygon points="{" ".join(f"{x:g},{y:g}" for x, y in m.points)}" {paint}/>'
    return f'<g class="{cls}" data-shape="{m.shape}" transform="translate({cx:.1f} {cy:.1f})">{shape}</g>'


def ring_svg(ring: dict, cx: float, cy: float, cls: str = "ring") -> str:
    return (
        f'<circle class="{cls}" cx="{cx:.1f}" cy="{cy:.1f}" r="{ring["r"]:g}" fill="none" stroke="{ring["colour"]}" '
        f'stroke-width="{ring["stroke_width"]:g}"/>'
    )


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
    min_left: int = 64,
    subject: str = "",
    description: str = "",
    ring_label: str = "clipped step",
) -> str:
    """Return an SVG document with one line per series, drawn from labs.trace.chart's plan of it.

    `log_y` draws the y axis in powers of ten, ticked and labelled at each decade; values at or below zero leave a
    gap. `log_x` spaces x by ratio (TP degrees 1, 2, 4, 8 evenly); `xticks` puts the x ticks at those values (a
    sweep's degrees) instead of round steps. Series of few points carry their own hollow marker shapes (the
    plan's rule), so lines that coincide are still both seen. `min_left` is the least y-axis margin: panels
    stacked with stack() pass the widest one's, so their plots line up. The chart's spec rides along as JSON in a
    <metadata> element: the server plans it again for static/plot.js (hover values, the overlay of two runs'
    charts of one `subject`: the title by default; a title that names a run's own setting, such as its recipe,
    passes what the chart is of instead).
    """
    spec = ChartSpec(
        list(series),
        title=title,
        xlabel=xlabel,
        ylabel=ylabel,
        subject=subject,
        log_x=log_x,
        log_y=log_y,
        xticks=list(xticks) if xticks else None,
        min_left=min_left,
        ring_label=ring_label,
    )
    plan = plan_line_chart(spec)
    # The legend sits right of the plot; widen the picture so the longest name fits (~7 px a character).
    keys = [s.name for s in series] + ([ring_label] if plan.ring is not None else [])
    longest = max((len(k) for k in keys), default=0)
    right = max(170, 40 + 7 * longest)
    left = plan.left
    width += right - 170 + left - 64
    top, bottom = 36, 46
    pw, ph = width - left - right, height - top - bottom
    x, y = plan.x, plan.y

    def px(v: float) -> float:
        return left + (v - x.lo) / (x.hi - x.lo) * pw

    def py(v: float) -> float:
        return top + ph - (v - y.lo) / (y.hi - y.lo) * ph

    out = svg_open(width, height, title, description)
    out.append(f'<text x="{left}" y="20" font-size="14" font-weight="600" fill="#111">{escape(title)}</text>')
    for t in y.ticks:
        ty = py(t.at)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#ddd"/>')
        out.append(
            f'<text class="tick-y" x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end" fill="#333">{escape(t.label)}</text>'
        )
    for t in x.ticks:
        tx = px(t.at)
        out.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{top + ph}" y2="{top + ph + 4}" stroke="#333"/>')
        out.append(
            f'<text class="tick-x" x="{tx:.1f}" y="{top + ph + 18}" text-anchor="middle" fill="#333">'
            f"{escape(t.label)}</text>"
        )
    out.append(f'<rect class="frame" x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="#111">{escape(x.title)}</text>'
    )
    out.append(
        f'<text transform="translate(14 {top + ph / 2:.1f}) rotate(-90)" text-anchor="middle" fill="#111">'
        f"{escape(y.title)}</text>"
    )
    out.append(spec_json(spec))
    lx = left + pw + 12
    for i, line in enumerate(plan.lines):
        coords = [(px(a), None if b is None else py(b)) for a, b in line.points]
        d, pen = [], "M"
        for cx, cy in coords:
            if cy is None:
                pen = "M"  # a gap
                continue
            d.append(f"{pen}{cx:.1f},{cy:.1f}")
            pen = "L"
        if d:
            dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
            out.append(f'<path d="{" ".join(d)}" fill="none" stroke="{line.colour}" stroke-width="2"{dash}>')
            out.append(f"<title>{escape(line.name)}</title></path>")
        if line.marker is not None:
            out += [marker_svg(line.marker, cx, cy, line.colour) for cx, cy in coords if cy is not None]
        if plan.ring is not None:
            out += [ring_svg(plan.ring, coords[j][0], coords[j][1] or 0.0) for j in line.rings]
        ly = top + 10 + i * 20
        dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
        out.append(
            f'<line x1="{lx}" x2="{lx + 22}" y1="{ly}" y2="{ly}" stroke="{line.colour}" stroke-width="2"{dash}/>'
        )
        if line.marker is not None:
            out.append(marker_svg(line.marker, lx + 11, ly, line.colour, "key"))
        out.append(f'<text x="{lx + 28}" y="{ly + 4}" fill="#111">{escape(line.name)}</text>')
    if plan.ring is not None:
        ly = top + 10 + len(plan.lines) * 20
        out.append(ring_svg(plan.ring, lx + 11, ly, "key"))
        out.append(f'<text x="{lx + 28}" y="{ly + 4}" fill="#111">{escape(plan.ring["label"])}</text>')
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


def svg_timeline(
    spans,
    *,
    title: str,
    description: str = "",
    window: Interval | None = None,
    width: int = 900,
    subtitle: str = "",
    overlap: bool = True,
) -> str:
    """One row group per rank with lanes compute / communication / wait, x axis in ms.

    Lanes are labelled in words at the left of every rank group, so no legend is needed. Each bar
    carries a <title> (its name, duration and any bytes it moved) for hover and screen readers, and bars wide enough
    for text show their name. With `overlap`, each rank's overlap windows (compute ∩ communication,
    labs.trace.timeline.overlap_windows) are shaded across its lanes, as the page's timeline viewer shades them,
    and a key under the axis says so. All text is escaped.
    """
    spans = list(spans)
    ranks = sorted({s.rank for s in spans}) or [0]
    if window is None:
        lo = min((s.start_ms for s in spans), default=0.0)
        hi = max((s.end_ms for s in spans), default=1.0)
    else:
        lo, hi = window
    hi = hi if hi > lo else lo + 1.0
    windows = {r: overlap_windows(spans, r, (lo, hi)) for r in ranks} if overlap else {}
    keyed = any(windows.values())
    # The subtitle wraps onto as many lines as it needs (~6.5 px a character at this size) instead of being cut.
    sub_lines = textwrap.wrap(subtitle, max(20, int((width - 24) / 6.5))) if subtitle else []
    left, right, top = 170, 20, 44 + 16 * len(sub_lines)
    lane_h, lane_gap, group_gap = 18, 4, 14
    group_h = len(LANES) * (lane_h + lane_gap)
    plot_h = len(ranks) * (group_h + group_gap)
    height = top + plot_h + 48 + (20 if keyed else 0)
    pw = width - left - right

    def px(t: float) -> float:
        return left + (t - lo) / (hi - lo) * pw

    out = svg_open(width, height, title, description or (f"{title}. {subtitle}" if subtitle else ""))
    out.append(f'<text x="12" y="22" font-size="14" font-weight="600" fill="#111">{escape(title)}</text>')
    for i, line in enumerate(sub_lines):
        out.append(f'<text x="12" y="{40 + 16 * i}" fill="#444">{escape(line)}</text>')
    axis_y = top + plot_h
    # The axis reads time since the window's start, so the ticks are round in that time, not in the clock's.
    for t in time_ticks(0.0, hi - lo, unit="").ticks:
        x = px(lo + t.at)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 4}" y2="{axis_y}" stroke="#e4e4e4"/>')
        out.append(
            f'<text class="tick-x" x="{x:.1f}" y="{axis_y + 16}" text-anchor="middle" fill="#333">{t.label}</text>'
        )
    out.append(f'<line class="axis" x1="{left}" x2="{left + pw}" y1="{axis_y}" y2="{axis_y}" stroke="#333"/>')
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{axis_y + 36}" text-anchor="middle" fill="#111">'
        f"time since start of window (ms)</text>"
    )
    band = OVERLAP_COLOURS
    paint = f'fill="{band["fill"]}" fill-opacity="{band["opacity"]}" stroke="{band["edge"]}" stroke-width="1.5"'
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
                        f'<text x="{x0 + 4:.1f}" y="{ly + lane_h - 5}" fill="{LANE_INK[lane_name]}" pointer-events="none">'
                        f"{escape(s.name)}</text>"
                    )
        for a, b in windows.get(rank, []):
            out.append(
                f'<rect class="overlap" data-rank="{rank}" x="{px(a):.1f}" y="{gy}" width="{max(px(b) - px(a), 1.0):.1f}" '
                f'height="{group_h - lane_gap}" {paint} pointer-events="none"/>'
            )
    if keyed:
        ky = axis_y + 56
        out.append(f'<rect x="{left}" y="{ky - 10}" width="18" height="12" {paint}/>')
        out.append(
            f'<text x="{left + 24}" y="{ky}" fill="#111">overlap window: compute and communication at once</text>'
        )
    out.append("</svg>")
    return "\n".join(out)
