"""The FP8 number line: where E4M3 and E5M2 have values, subnormals, max, and the worked scale."""

from __future__ import annotations

import math

from pydantic import Field, model_validator

from labs.api import svg_open

from .. import calc
from ..schema import Rendered
from . import phone
from .base import BLUE, GREY, ORANGE, RED, FigureSpec, Params, arrow_defs, finish, num, text_at, title_line

SUBNORMAL_NOTE = "Orange ticks: subnormals (values below the smallest normal, fewer bits of precision)."


class NumberLineParams(Params):
    amax: float = Field(240, gt=0, le=1e4, description="amax the worked example's scale comes from.")
    values: list[float] = Field(
        default_factory=lambda: [120.0, 300.0],
        min_length=1,
        max_length=4,
        description="Values mapped with that scale (positive, shown on the E4M3 zoom).",
    )

    @model_validator(mode="after")
    def _positive(self) -> NumberLineParams:
        bad = [v for v in self.values if not 0 < v <= 1e4]
        if bad:
            raise ValueError(f"values in (0, 10000]; found {bad}")
        return self


def _pow2_label(e: int) -> str:
    sup = str(e).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"2{sup}"


def draw_number_line(p: NumberLineParams) -> Rendered:
    width, height = 760, 372
    left, right = 70, 24
    pw = width - left - right
    scale = calc.fp8_scale(p.amax, "E4M3")["scale"]
    maps = [calc.fp8_map(v, scale=scale, fmt="E4M3") for v in p.values]
    grids = {fmt: calc.fp8_grid(fmt) for fmt in ("E4M3", "E5M2")}
    title = "FP8 number lines: where E4M3 and E5M2 have values, and the worked scale"
    alt = (
        f"Top: the positive values of both formats on a log₂ axis. E4M3 has {len(grids['E4M3']) - 1} positive "
        f"values from {num(grids['E4M3'][1])} (smallest subnormal) to {num(calc.FP8_MAX['E4M3'], ',.0f')}; E5M2 has "
        f"{len(grids['E5M2']) - 1} from {num(grids['E5M2'][1])} to {num(calc.FP8_MAX['E5M2'], ',.0f')}, with coarser "
        f"steps. Bottom: E4M3 from 0 to 600 on a linear axis, the scale {scale:.3f} = 448 ÷ {p.amax:g} applied "
        "to "
        + "; ".join(
            f"{m['value']:g} → {m['scaled']:.0f}"
            + (f", beyond 448, clipped to {m['stored']:g}" if m["clipped"] else "")
            for m in maps
        )
        + "."
    )
    out = svg_open(width, height, title, alt)
    out.append(arrow_defs())
    out.append(title_line(title))

    # Panel 1: both formats on a log2 axis.
    lo_e, hi_e = -17, 17

    def lx(v: float) -> float:
        return left + (math.log2(v) - lo_e) / (hi_e - lo_e) * pw

    out.append(text_at(12, 44, "Every positive value of each format (log₂ scale); subnormals in orange", fill="#444"))
    for e in range(lo_e + 1, hi_e, 4):
        x = lx(2.0**e)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="54" y2="150" stroke="#e4e4e4"/>')
        out.append(text_at(x, 166, _pow2_label(e), anchor="middle", fill="#333"))
    for fmt, y in (("E4M3", 78), ("E5M2", 124)):
        mant, emin = calc.FP8_BITS[fmt]
        smallest_normal = 2.0**emin
        out.append(text_at(left - 8, y + 4, fmt, anchor="end", fill="#111", extra=' font-weight="600"'))
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y}" y2="{y}" stroke="#333"/>')
        for v in grids[fmt][1:]:
            colour = ORANGE if v < smallest_normal else BLUE
            out.append(f'<line x1="{lx(v):.1f}" x2="{lx(v):.1f}" y1="{y - 9}" y2="{y + 9}" stroke="{colour}"/>')
        top = calc.FP8_MAX[fmt]
        out.append(
            f'<line x1="{lx(top):.1f}" x2="{lx(top):.1f}" y1="{y - 14}" y2="{y + 14}" stroke="{RED}" stroke-width="2"/>'
        )
        right_room = left + pw - lx(top) > 70
        out.append(
            text_at(
                lx(top) + (5 if right_room else -5),
                y - 12 + (9 if right_room else 0),
                f"max {top:,.0f}",
                anchor="start" if right_room else "end",
                fill=RED,
            )
        )
        first = grids[fmt][1]
        out.append(text_at(lx(first) - 3, y + 21, f"smallest {_pow2_label(round(math.log2(first)))}", fill=ORANGE))
    # Panel 2: E4M3 zoom, linear, with the worked example.
    top_y, base_y = 214, 300
    hi = 600.0

    def x_lin(v: float) -> float:
        return left + v / hi * pw

    out.append(
        text_at(
            12, 196, f"E4M3, 0 to 600 (linear): scale = 448 ÷ {p.amax:g} = {scale:.3f}; each value × scale", fill="#444"
        )
    )
    for t in range(0, 601, 100):
        x = x_lin(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base_y}" y2="{base_y + 4}" stroke="#333"/>')
        out.append(text_at(x, base_y + 18, str(t), anchor="middle", fill="#333"))
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{base_y}" y2="{base_y}" stroke="#333"/>')
    for v in grids["E4M3"]:
        out.append(f'<line x1="{x_lin(v):.1f}" x2="{x_lin(v):.1f}" y1="{base_y - 7}" y2="{base_y}" stroke="{BLUE}"/>')
    mx = x_lin(calc.FP8_MAX["E4M3"])
    out.append(
        f'<rect x="{mx:.1f}" y="{top_y - 6}" width="{left + pw - mx:.1f}" height="{base_y - top_y + 6}" fill="#fdecea"/>'
    )
    out.append(f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{top_y - 6}" y2="{base_y}" stroke="{RED}" stroke-width="2"/>')
    out.append(text_at(mx + 6, top_y + 8, "beyond 448: clamped", fill=RED))
    out.append(text_at(left - 8, top_y + 4, "input", anchor="end", fill="#333"))
    out.append(text_at(left - 8, base_y - 14, "× scale", anchor="end", fill="#333"))
    for i, m in enumerate(maps):
        y_in = top_y + 18 * i
        xv, xs = x_lin(m["value"]), x_lin(min(m["scaled"], hi))
        colour, mk = (RED, "r") if m["clipped"] else (BLUE, "b")
        out.append(f'<circle cx="{xv:.1f}" cy="{y_in}" r="4" fill="{GREY}"/>')
        out.append(text_at(xv, y_in - 7, f"{m['value']:g}", anchor="middle", fill="#111"))
        out.append(
            f'<line x1="{xv:.1f}" y1="{y_in + 4}" x2="{xs:.1f}" y2="{base_y - 18}" stroke="{colour}" '
            f'stroke-width="1.5" marker-end="url(#ARROW-{mk})"/>'
        )
        label = f"{m['scaled']:.0f}"
        if m["clipped"]:
            out.append(
                f'<path d="M{xs:.1f},{base_y - 12} C{xs:.1f},{base_y + 26} {mx:.1f},{base_y + 26} {mx:.1f},{base_y + 4}" '
                f'fill="none" stroke="{RED}" stroke-width="1.5" marker-end="url(#ARROW-r)"/>'
            )
            out.append(text_at(xs, base_y - 24 - 12 * i, f"{label} → {m['stored']:g}", anchor="middle", fill=RED))
        else:
            out.append(text_at(xs, base_y - 24 - 12 * i, label, anchor="middle", fill=BLUE))
    out.append(
        text_at(
            12,
            height - 12,
            SUBNORMAL_NOTE,
            fill="#444",
        )
    )
    out.append("</svg>")
    rows = [
        [
            fmt,
            f"{len(grids[fmt]) - 1}",
            num(grids[fmt][1]),
            num(2.0 ** calc.FP8_BITS[fmt][1]),
            f"{calc.FP8_MAX[fmt]:,.0f}",
        ]
        for fmt in ("E4M3", "E5M2")
    ]
    rows += [
        [
            f"{m['value']:g} × {scale:.4f}",
            "",
            "",
            f"{m['scaled']:.1f}",
            f"{m['stored']:g}" + (" (clipped)" if m["clipped"] else ""),
        ]
        for m in maps
    ]
    numbers: dict[str, float] = {"scale": scale, "e4m3_max": calc.FP8_MAX["E4M3"], "e5m2_max": calc.FP8_MAX["E5M2"]}
    for m in maps:
        numbers[f"scaled_{m['value']:g}"] = m["scaled"]
        numbers[f"stored_{m['value']:g}"] = m["stored"]
    return finish(
        name="fp8-number-line",
        title=title,
        svg="\n".join(out),
        narrow_svg=_narrow(p, scale, maps, grids, title, alt),
        alt=alt,
        columns=["format / value", "positive values", "smallest subnormal", "smallest normal / scaled", "max / stored"],
        rows=rows,
        numbers=numbers,
    )


def _fit(x: float, s: str) -> float:
    """The centre for text `s` near `x` that keeps it inside the phone's column."""
    half = phone.text_width(s) / 2
    return min(max(x, phone.MARGIN + half), phone.PHONE_W - phone.MARGIN - half)


def _narrow(p: NumberLineParams, scale: float, maps: list[dict], grids: dict, title: str, alt: str) -> str:
    """The same two panels for a phone, 340 px: each format named above its line instead of beside it, the
    exponents labelled every 2⁸, the notes wrapped, and the labels near the right edge pulled inside it."""
    x0, x1 = 14, phone.PHONE_W - 14
    body: list[str] = [arrow_defs()]
    y = phone.title_block(body, title)
    y = phone.note_block(body, "Every positive value of each format (log₂ scale); subnormals in orange", y + 22)

    # Panel 1: both formats on a log2 axis.
    lo_e, hi_e = -17, 17

    def lx(v: float) -> float:
        return x0 + (math.log2(v) - lo_e) / (hi_e - lo_e) * (x1 - x0)

    rows = {"E4M3": y + 24, "E5M2": y + 80}
    grid_top, axis = y + 4, rows["E5M2"] + 30
    for e in range(lo_e + 1, hi_e, 4):
        body.append(f'<line x1="{lx(2.0**e):.1f}" x2="{lx(2.0**e):.1f}" y1="{grid_top}" y2="{axis}" stroke="#e4e4e4"/>')
        if e % 8 == 0:
            body.append(text_at(lx(2.0**e), axis + 16, _pow2_label(e), anchor="middle", fill="#333"))
    for fmt, ly in rows.items():
        mant, emin = calc.FP8_BITS[fmt]
        body.append(text_at(phone.MARGIN, ly - 14, fmt, extra=' font-weight="600"'))
        body.append(f'<line x1="{x0}" x2="{x1}" y1="{ly}" y2="{ly}" stroke="#333"/>')
        for v in grids[fmt][1:]:
            colour = ORANGE if v < 2.0**emin else BLUE
            body.append(f'<line x1="{lx(v):.1f}" x2="{lx(v):.1f}" y1="{ly - 9}" y2="{ly + 9}" stroke="{colour}"/>')
        top = calc.FP8_MAX[fmt]
        body.append(
            f'<line x1="{lx(top):.1f}" x2="{lx(top):.1f}" y1="{ly - 14}" y2="{ly + 14}" stroke="{RED}" stroke-width="2"/>'
        )
        label = f"max {top:,.0f}"
        room = x1 - lx(top) > phone.text_width(label) + 8
        body.append(
            text_at(lx(top) + (5 if room else -5), ly - 3 if room else ly - 14, label, anchor="start" if room else "end", fill=RED)
        )  # fmt: skip
        first = grids[fmt][1]
        body.append(text_at(lx(first) - 3, ly + 24, f"smallest {_pow2_label(round(math.log2(first)))}", fill=ORANGE))

    # Panel 2: E4M3 zoom, linear, with the worked example.
    y = phone.note_block(
        body, f"E4M3, 0 to 600 (linear): scale = 448 ÷ {p.amax:g} = {scale:.3f}; each input (dot) × scale (arrow)", axis + 48
    )  # fmt: skip
    top_y = y + 22
    base_y = top_y + 18 * len(maps) + 84
    hi = 600.0

    def x_lin(v: float) -> float:
        return x0 + v / hi * (x1 - x0)

    mx = x_lin(calc.FP8_MAX["E4M3"])
    body.append(
        f'<rect x="{mx:.1f}" y="{top_y - 6}" width="{x1 - mx:.1f}" height="{base_y - top_y + 6}" fill="#fdecea"/>'
    )
    body.append(f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{top_y - 6}" y2="{base_y}" stroke="{RED}" stroke-width="2"/>')
    body.append(text_at(x1, top_y - 12, "beyond 448: clamped", anchor="end", fill=RED))
    for t in range(0, 601, 100):
        body.append(f'<line x1="{x_lin(t):.1f}" x2="{x_lin(t):.1f}" y1="{base_y}" y2="{base_y + 4}" stroke="#333"/>')
        body.append(text_at(x_lin(t), base_y + 18, str(t), anchor="middle", fill="#333"))
    body.append(f'<line x1="{x0}" x2="{x1}" y1="{base_y}" y2="{base_y}" stroke="#333"/>')
    for v in grids["E4M3"]:
        body.append(f'<line x1="{x_lin(v):.1f}" x2="{x_lin(v):.1f}" y1="{base_y - 7}" y2="{base_y}" stroke="{BLUE}"/>')
    for i, m in enumerate(maps):
        y_in = top_y + 18 * i + 12
        xv, xs = x_lin(m["value"]), x_lin(min(m["scaled"], hi))
        colour, mk = (RED, "r") if m["clipped"] else (BLUE, "b")
        body.append(f'<circle cx="{xv:.1f}" cy="{y_in}" r="4" fill="{GREY}"/>')
        body.append(text_at(xv - 8, y_in + 4, f"{m['value']:g}", anchor="end"))
        body.append(
            f'<line x1="{xv:.1f}" y1="{y_in + 4}" x2="{xs:.1f}" y2="{base_y - 18}" stroke="{colour}" '
            f'stroke-width="1.5" marker-end="url(#ARROW-{mk})"/>'
        )
        label = f"{m['scaled']:.0f} → {m['stored']:g}" if m["clipped"] else f"{m['scaled']:.0f}"
        if m["clipped"]:
            body.append(
                f'<path d="M{xs:.1f},{base_y - 12} C{xs:.1f},{base_y + 26} {mx:.1f},{base_y + 26} {mx:.1f},{base_y + 4}" '
                f'fill="none" stroke="{RED}" stroke-width="1.5" marker-end="url(#ARROW-r)"/>'
            )
        if m["clipped"]:  # above its arrowhead, where the clamp's curve leaves room
            body.append(text_at(_fit(xs, label), base_y - 24 - 14 * i, label, anchor="middle", fill=colour))
        else:  # beside its arrowhead, on the side the arrow does not come from
            side = 1 if xv <= xs else -1
            body.append(text_at(xs + 8 * side, base_y - 14, label, anchor="start" if side > 0 else "end", fill=colour))
    y = phone.note_block(body, SUBNORMAL_NOTE, base_y + 46)
    out = svg_open(phone.PHONE_W, round(y - 6), title, alt)
    out += body
    out.append("</svg>")
    return "\n".join(out)


SPEC = FigureSpec(
    "fp8-number-line", "E4M3/E5M2 grids, subnormals, max, and the worked scale", NumberLineParams, draw_number_line
)
