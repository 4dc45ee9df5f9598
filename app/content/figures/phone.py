"""What the phone layouts share: a 340 px column, wrapped text, and a line chart with its legend underneath.

A figure's `narrow_svg` is the same picture redrawn for a phone: templates/lessons/_figure.html puts both in the
page and static/app.css shows this one where the figure's box is under 600 px wide (the other is display: none, so
a screen reader meets the title and description once). Drawn 340 units wide, it is shown at about its own size in
a 390 px phone's column (about 335 px), so its 12 px labels are about 11.8 px on screen: none is drawn smaller.

Text widths are estimates (system-ui at 12 px averages ~7 px a character, bold 14 px ~8.6): the layouts leave
room for the wider fonts a phone may pick, and tests/browser/test_figure_phone_layouts.py measures what Chromium
actually drew (no text smaller than 11 px, none overlapping, none cut off).
"""

from __future__ import annotations

import math
import re
import textwrap
from html import escape

from labs.api import PALETTE, number, svg_open

from .base import text_at, title_line

PHONE_W = 340  # drawn width of every phone layout
MARGIN = 10  # left and right edge of the text column
CHAR_W = {12: 7.0, 14: 8.6}  # average advance per character, px: labels (12) and bold titles (14)


def text_width(s: str, size: int = 12) -> float:
    return len(s) * CHAR_W[size]


def wrap(s: str, size: int = 12, width: float = PHONE_W - 2 * MARGIN) -> list[str]:
    """`s` broken at spaces into lines that fit `width` px at font `size`; a number keeps its short unit
    ("450 GB/s", "14 ms") and an equation its sides ("H = 4,096") on one line."""
    glued = re.sub(r"(?<=\d) (?=[^\s\d=]{1,5}(\s|$))", "\u00a0", s.replace(" = ", "\u00a0=\u00a0"))
    return textwrap.wrap(glued, max(8, int(width / CHAR_W[size])), break_on_hyphens=False)


def title_block(out: list[str], title: str, y: float = 20) -> float:
    """The title, bold, on as many lines as it needs, their lengths balanced (no last word alone on a line);
    returns the baseline of its last line."""
    lines = wrap(title, 14)
    width: float = PHONE_W - 2 * MARGIN
    while width > 120 and len(shorter := wrap(title, 14, width - CHAR_W[14])) == len(lines):
        lines, width = shorter, width - CHAR_W[14]
    for k, line in enumerate(lines):
        out.append(title_line(line, MARGIN, y + 18 * k))
    return y + 18 * (len(lines) - 1)


def note_block(out: list[str], s: str, y: float, *, fill: str = "#444") -> float:
    """A paragraph of notes from baseline `y`; returns the baseline after its last line."""
    for line in wrap(s):
        out.append(text_at(MARGIN, y, line, fill=fill))
        y += 16
    return y


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi], about `n` of them (1, 2, 2.5 or 5 times a power of ten apart)."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(n - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    t = math.floor(lo / step) * step
    ticks: list[float] = []
    while t <= hi + step * 0.5 and len(ticks) < 12:
        ticks.append(round(t, 10))
        t += step
    return ticks


def line_chart(
    series: list[tuple[str, list[float], list[float], bool]],
    *,
    title: str,
    alt: str,
    xlabel: str,
    ylabel: str,
    x_ticks: int = 5,
) -> str:
    """A phone's line chart: (name, xs, ys, dashed) per series in the lab plots' palette. The y axis is named
    above the plot (not rotated up its side) and the legend sits under it, so the plot gets the full width."""
    xs = [x for _, sx, _, _ in series for x in sx]
    ys = [y for _, _, sy, _ in series for y in sy]
    xt, yt = nice_ticks(min(xs), max(xs), x_ticks), nice_ticks(min(ys), max(ys))
    x0, x1 = min(xt[0], min(xs)), max(xt[-1], max(xs))
    y0, y1 = min(yt[0], min(ys)), max(yt[-1], max(ys))
    ylabels = [number(t, 3) for t in yt]
    out_head: list[str] = []
    y = title_block(out_head, title)
    left = MARGIN + 8 + max(text_width(s) for s in ylabels)
    right, top, ph = 16, y + 40, 190
    pw = PHONE_W - left - right
    legend_top = top + ph + 56
    height = legend_top + 20 * len(series) + 4

    def px(v: float) -> float:
        return left + (v - x0) / (x1 - x0) * pw

    def py(v: float) -> float:
        return top + ph - (v - y0) / (y1 - y0) * ph

    out = svg_open(PHONE_W, round(height), title, alt)
    out += out_head
    out.append(text_at(MARGIN, top - 10, ylabel))
    for t, label in zip(yt, ylabels):
        out.append(f'<line x1="{left:.1f}" x2="{left + pw:.1f}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#ddd"/>')
        out.append(text_at(left - 6, py(t) + 4, label, anchor="end", fill="#333"))
    for t in xt:
        out.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{top + ph}" y2="{top + ph + 4}" stroke="#333"/>')
        # the last label ends at the plot's edge instead of running past the picture's
        anchor, dx = ("end", 4) if t == xt[-1] and text_width(number(t, 3)) / 2 > right else ("middle", 0)
        out.append(text_at(px(t) + dx, top + ph + 18, number(t, 3), anchor=anchor, fill="#333"))
    out.append(f'<rect x="{left:.1f}" y="{top}" width="{pw:.1f}" height="{ph}" fill="none" stroke="#333"/>')
    out.append(text_at(left + pw / 2, top + ph + 38, xlabel, anchor="middle"))
    for i, (name, sx, sy, dashed) in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        d = " ".join(f"{'M' if j == 0 else 'L'}{px(a):.1f},{py(b):.1f}" for j, (a, b) in enumerate(zip(sx, sy)))
        out.append(
            f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="2"{dash}><title>{escape(name)}</title></path>'
        )
        out += [f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="2.5" fill="{colour}"/>' for a, b in zip(sx, sy)]
        ly = legend_top + 20 * i
        out.append(
            f'<line x1="{MARGIN}" x2="{MARGIN + 22}" y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        out.append(text_at(MARGIN + 28, ly, name))
    out.append("</svg>")
    return "\n".join(out)
