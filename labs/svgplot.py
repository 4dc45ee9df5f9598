"""Small, dependency-free SVG charts for lab artifacts.

Charts are inline-able on the learner's page: real <text> (selectable, screen-reader friendly),
a <title>/<desc> pair, a legend beside the plot, and no scripts. Every string is escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

# Colour-blind-safe palette (Okabe-Ito), dark enough for 3:1 contrast on white.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#8a6d00", "#56B4E9", "#333333"]


@dataclass
class Series:
    name: str
    xs: list[float]
    ys: list[float]
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
    ticks, t = [], start
    while t <= hi + step * 0.5 and len(ticks) < 12:
        ticks.append(round(t, 10))
        t += step
    return ticks


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        return f"{v:.1e}"
    return f"{v:.4g}"  # 1500 stays "1500", 0.25 stays "0.25"


def line_chart(
    series: list[Series],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    width: int = 640,
    height: int = 320,
    log_y: bool = False,
    description: str = "",
) -> str:
    """Return an SVG document with one line per series."""
    # The legend sits right of the plot; widen the picture so the longest name fits (~7 px a character).
    longest = max((len(s.name) for s in series), default=0)
    right = max(170, 40 + 7 * longest)
    width += right - 170
    left, top, bottom = 64, 36, 46
    pw, ph = width - left - right, height - top - bottom

    def ty(v: float) -> float:
        return math.log10(v) if log_y else v

    pts = [(x, ty(y)) for s in series for x, y in zip(s.xs, s.ys) if y is not None and (not log_y or y > 0)]
    pts = [(x, y) for x, y in pts if math.isfinite(x) and math.isfinite(y)]
    xs = [p[0] for p in pts] or [0.0, 1.0]
    ys = [p[1] for p in pts] or [0.0, 1.0]
    xt, yt = _nice_ticks(min(xs), max(xs)), _nice_ticks(min(ys), max(ys))
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
    for t in yt:
        y = py(t)
        label = _fmt(10**t if log_y else t)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#333">{label}</text>')
    for t in xt:
        x = px(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + ph}" y2="{top + ph + 4}" stroke="#333"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle" fill="#333">{_fmt(t)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="#111">{escape(xlabel)}</text>'
    )
    out.append(
        f'<text transform="translate(14 {top + ph / 2:.1f}) rotate(-90)" text-anchor="middle" fill="#111">'
        f"{escape(ylabel)}{' (log scale)' if log_y else ''}</text>"
    )
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        coords = [
            (px(x), py(ty(y)))
            for x, y in zip(s.xs, s.ys)
            if y is not None and math.isfinite(x) and math.isfinite(y) and (not log_y or y > 0)
        ]
        if coords:
            d = " ".join(f"{'M' if j == 0 else 'L'}{cx:.1f},{cy:.1f}" for j, (cx, cy) in enumerate(coords))
            dash = ' stroke-dasharray="6 4"' if s.dashed else ""
            out.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="2"{dash}>')
            out.append(f"<title>{escape(s.name)}</title></path>")
            if len(coords) <= 40:
                for cx, cy in coords:
                    out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.5" fill="{colour}"/>')
        for j in s.markers:
            if 0 <= j < len(s.xs) and s.ys[j] is not None and (not log_y or s.ys[j] > 0):
                cx, cy = px(s.xs[j]), py(ty(s.ys[j]))
                out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="none" stroke="#c00" stroke-width="2"/>')
        ly = top + 10 + i * 20
        lx = left + pw + 12
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        out.append(f'<line x1="{lx}" x2="{lx + 22}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{lx + 28}" y="{ly + 4}" fill="#111">{escape(s.name)}</text>')
    if any(s.markers for s in series):
        ly = top + 10 + len(series) * 20
        lx = left + pw + 12
        out.append(f'<circle cx="{lx + 11}" cy="{ly}" r="6" fill="none" stroke="#c00" stroke-width="2"/>')
        out.append(f'<text x="{lx + 28}" y="{ly + 4}" fill="#111">clipped step</text>')
    out.append("</svg>")
    return "\n".join(out)
