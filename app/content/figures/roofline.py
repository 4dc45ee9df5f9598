"""The tensor-parallel MLP's arithmetic intensity on the link against a node's compute and NVLink.

Intensity here is FLOPs each rank computes per byte it sends over NVLink. calc.tp_mlp_intensity gives the
forward pass, F/(N−1). Over a training step the backward runs two GEMMs per forward GEMM (the input's gradient
and the weight's) and one mirror all-reduce, at the block's input (Megatron-LM 2019, the `f` operator): three
times the FLOPs for twice the bytes, so 1.5·F/(N−1). The ridge of each roof is peak FLOP/s × MFU ÷ link bytes/s;
at MFU = 1 it is the datasheet ridge, 989 TFLOP/s ÷ 450 GB/s ≈ 2,198 FLOP/byte for BF16 on H100.
"""

from __future__ import annotations

import math
from html import escape
from typing import Literal

from pydantic import Field, model_validator

from labs.api import PALETTE, svg_open

from .. import calc
from ..schema import Rendered
from .base import GREEN, RED, FigureSpec, Params, finish, text_at, title_line


class RooflineParams(Params):
    ffn: int = Field(14336, ge=64, le=1_000_000, description="MLP width F (Llama-3-8B: 14,336).")
    degrees: list[int] = Field(default_factory=lambda: [2, 4, 8], min_length=1, description="TP degrees marked.")
    mfu: float = Field(1.0, gt=0, le=1, description="Fraction of peak the GEMMs sustain; 1 draws the datasheet ridges.")
    per: Literal["step", "forward"] = Field("step", description="Count a whole training step or the forward only.")
    node: Literal["H100-SXM", "H200"] = Field("H100-SXM", description="Node from labs/parallel/costmodel.py.")

    @model_validator(mode="after")
    def _degrees(self) -> RooflineParams:
        bad = [d for d in self.degrees if not 2 <= d <= 64]
        if bad:
            raise ValueError(f"degrees between 2 and 64; found {bad}")
        return self


STEP_OVER_FORWARD = 1.5  # a step: 3× the forward's FLOPs (forward + dgrad + wgrad) for 2× its all-reduce bytes


def intensity(ffn: float, degree: int, mfu: float, node: str, precision: str, per: str) -> dict:
    """calc.tp_mlp_intensity for the forward, or scaled to a whole step, with the ridge it is compared to."""
    r = calc.tp_mlp_intensity(ffn, degree, mfu, node=node, precision=precision)
    factor = STEP_OVER_FORWARD if per == "step" else 1.0
    value = factor * r["intensity"]
    link = calc.node_figures(node)["link_bytes_per_s"]
    return {
        "intensity": value,
        "ridge": r["ridge"],
        "comm_bound": value < r["ridge"],
        "attainable_tflops": min(r["peak_tflops"], value * link / 1e12),
    }


def draw_roofline(p: RooflineParams) -> Rendered:
    fig = calc.node_figures(p.node)
    width, height = 780, 390
    left, right, top, bottom = 70, 236, 40, 62
    pw, ph = width - left - right, height - top - bottom
    x_lo, x_hi, y_lo, y_hi = 2.0, 5.0, 1.5, 3.5  # log10: 100..100k FLOP/byte; ~30..3000 TFLOP/s

    def px(i: float) -> float:
        return left + (math.log10(i) - x_lo) / (x_hi - x_lo) * pw

    def py(tf: float) -> float:
        return top + ph - (math.log10(tf) - y_lo) / (y_hi - y_lo) * ph

    formula = "1.5·F/(N−1)" if p.per == "step" else "F/(N−1)"
    scope = "a training step" if p.per == "step" else "the forward pass"
    at = "at datasheet peak" if p.mfu == 1 else f"at {p.mfu:.0%} MFU"
    title = f"Arithmetic intensity of a TP MLP on {fig['gpus']}× {p.node}, over {scope}, {at}"
    roofs = []
    for i, (prec, dashed) in enumerate((("bf16", False), ("fp8", True))):
        peak = fig[f"{prec}_tflops"] * p.mfu
        ridge = peak * 1e12 / fig["link_bytes_per_s"]
        roofs.append((prec, peak, ridge, dashed, PALETTE[i + 1]))
    points = [(d, intensity(p.ffn, d, p.mfu, p.node, "bf16", p.per)) for d in p.degrees]
    fp8_points = [(d, intensity(p.ffn, d, p.mfu, p.node, "fp8", p.per)) for d in p.degrees]
    alt = (
        f"Log-log roofline. x: arithmetic intensity on the link, the FLOPs each rank computes per byte it sends "
        f"over NVLink in the MLP block over {scope}, {formula} with F = {p.ffn:,}. y: attainable TFLOP/s, the "
        f"lower of the GEMMs' rate ({at}) and x × {fig['link_gbs']:g} GB/s. Each ridge is peak FLOP/s ÷ link "
        f"bandwidth, where communication takes as long as compute: {roofs[0][2]:,.0f} FLOP/byte for BF16 "
        f"({roofs[0][1]:,.0f} TFLOP/s ÷ {fig['link_gbs']:g} GB/s) and {roofs[1][2]:,.0f} for FP8 "
        f"({roofs[1][1]:,.0f} TFLOP/s). "
        + "; ".join(
            f"TP={d}: {r['intensity']:,.0f} FLOP/byte, "
            + ("communication-bound in BF16" if r["comm_bound"] else "compute-bound in BF16")
            + (", communication-bound in FP8" if f8["comm_bound"] else ", compute-bound in FP8")
            for (d, r), (_, f8) in zip(points, fp8_points)
        )
        + "."
    )
    out = svg_open(width, height, title, alt)
    out.append(title_line(title))
    for e in range(int(x_lo), int(x_hi) + 1):
        x = px(10.0**e)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" stroke="#ddd"/>')
        out.append(text_at(x, top + ph + 18, f"{10**e:,}", anchor="middle", fill="#333"))
    for tf in (30, 100, 300, 1000, 3000):
        y = py(tf)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(text_at(left - 6, y + 4, f"{tf:,}", anchor="end", fill="#333"))
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    out.append(
        text_at(
            left + pw / 2,
            height - 26,
            f"arithmetic intensity: FLOPs per byte sent over NVLink, per rank, {formula}  (log)",
            anchor="middle",
        )
    )
    out.append(
        f'<text transform="translate(16 {top + ph / 2:.1f}) rotate(-90)" text-anchor="middle" fill="#111">'
        "attainable TFLOP/s (log)</text>"
    )
    legend_y = top + 10
    for prec, peak, ridge, dashed, colour in roofs:
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        xs = [10 ** (x_lo + k * (x_hi - x_lo) / 60) for k in range(61)]
        pts = [(px(i), py(min(peak, i * fig["link_bytes_per_s"] / 1e12))) for i in xs]
        path = " ".join(f"{'M' if k == 0 else 'L'}{x:.1f},{y:.1f}" for k, (x, y) in enumerate(pts))
        out.append(
            f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}><title>{prec.upper()} roof</title></path>'
        )
        out.append(
            f'<line x1="{px(ridge):.1f}" x2="{px(ridge):.1f}" y1="{py(peak):.1f}" y2="{top + ph}" stroke="{colour}" stroke-dasharray="2 3"/>'
        )
        lx = left + pw + 12
        out.append(
            f'<line x1="{lx}" x2="{lx + 22}" y1="{legend_y}" y2="{legend_y}" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        out.append(text_at(lx + 28, legend_y + 4, f"{prec.upper()}: {peak:,.0f} TF/s {'peak' if p.mfu == 1 else ''}"))
        out.append(text_at(lx + 28, legend_y + 18, f"{prec.upper()} ridge {ridge:,.0f} FLOP/B", fill="#444"))
        legend_y += 40
    for prec, pts_ in (("BF16", points), ("FP8", fp8_points)):
        for d, r in pts_:
            x, y = px(r["intensity"]), py(r["attainable_tflops"])
            colour = RED if r["comm_bound"] else GREEN
            fill = colour if prec == "BF16" else "#fff"
            tip = f"TP={d}, {prec}: {r['intensity']:,.0f} FLOP/byte, {r['attainable_tflops']:,.0f} TFLOP/s"
            out.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{fill}" stroke="{colour}" stroke-width="2">'
                f"<title>{escape(tip)}</title></circle>"
            )
            if prec == "BF16":
                out.append(text_at(x, y + 20, f"TP={d}", anchor="middle", fill=colour, extra=' font-weight="600"'))
    lx = left + pw + 12
    out.append(f'<circle cx="{lx + 11}" cy="{legend_y}" r="5" fill="{GREEN}" stroke="{GREEN}" stroke-width="2"/>')
    out.append(text_at(lx + 28, legend_y + 4, "compute-bound (BF16 filled,"))
    out.append(text_at(lx + 28, legend_y + 18, "FP8 hollow)"))
    out.append(f'<circle cx="{lx + 11}" cy="{legend_y + 34}" r="5" fill="#fff" stroke="{RED}" stroke-width="2"/>')
    out.append(text_at(lx + 28, legend_y + 38, "communication-bound"))
    out.append(text_at(lx, legend_y + 64, f"MLP block, F = {p.ffn:,}", fill="#444"))
    for k, (d, r) in enumerate(points):
        out.append(text_at(lx, legend_y + 82 + 16 * k, f"TP={d}: {r['intensity']:,.0f} FLOP/B", fill="#444"))
    ly = legend_y + 82 + 16 * len(points) + 6
    out.append(text_at(lx, ly, "Predicted from datasheet", fill="#444"))
    out.append(text_at(lx, ly + 14, f"figures {at},", fill="#444"))
    out.append(text_at(lx, ly + 28, "not measured", fill="#444"))
    out.append("</svg>")
    rows = [
        [
            f"TP={d}",
            f"{r['intensity']:,.0f}",
            f"{r['attainable_tflops']:,.0f}",
            "yes" if r["comm_bound"] else "no",
            "yes" if f8["comm_bound"] else "no",
        ]
        for (d, r), (_, f8) in zip(points, fp8_points)
    ]
    numbers: dict[str, float] = {"ridge_bf16": roofs[0][2], "ridge_fp8": roofs[1][2], "mfu": p.mfu}
    for (d, r), (_, f8) in zip(points, fp8_points):
        numbers[f"intensity_{d}"] = r["intensity"]
        numbers[f"comm_bound_bf16_{d}"] = float(r["comm_bound"])
        numbers[f"comm_bound_fp8_{d}"] = float(f8["comm_bound"])
    narrow = _narrow(p, fig, roofs, points, fp8_points, title, alt, formula, at)
    return finish(
        name="tp-roofline",
        narrow_svg=narrow,
        title=title,
        svg="\n".join(out),
        alt=alt,
        columns=[
            "degree",
            f"arithmetic intensity, {formula} (FLOP per NVLink byte)",
            "attainable TFLOP/s (BF16)",
            "comm-bound in BF16",
            "comm-bound in FP8",
        ],
        rows=rows,
        numbers=numbers,
    )


def _narrow(p: RooflineParams, fig: dict, roofs: list, points: list, fp8_points: list, title: str, alt: str,
            formula: str, at: str) -> str:  # fmt: skip
    """The same roofline for a phone, 340 px: the title on three lines, the legend under the plot, the points
    named by degree only (their intensities are in the legend lines and the table)."""
    width, left, right, top, ph = 340, 46, 22, 86, 220
    pw = width - left - right
    x_lo, x_hi, y_lo, y_hi = 2.0, 5.0, 1.5, 3.5
    legend_top = top + ph + 64
    height = legend_top + 18 * (len(roofs) * 2 + len(points)) + 56

    def px(i: float) -> float:
        return left + (math.log10(i) - x_lo) / (x_hi - x_lo) * pw

    def py(tf: float) -> float:
        return top + ph - (math.log10(tf) - y_lo) / (y_hi - y_lo) * ph

    out = svg_open(width, height, title, alt)
    head, _, tail = title.partition(", over ")
    out.append(title_line(head.replace(f" on {fig['gpus']}× {p.node}", ""), 10))
    out.append(title_line(f"on {fig['gpus']}× {p.node}, over {tail.rsplit(', ', 1)[0]},", 10, 38))
    out.append(title_line(at, 10, 56))
    for e in range(int(x_lo), int(x_hi) + 1):
        x = px(10.0**e)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" stroke="#ddd"/>')
        label = {2: "100", 3: "1k", 4: "10k", 5: "100k"}[e]
        # the end labels start and end at the plot's corners: the first would sit on the y axis's lowest label
        anchor, dx = {int(x_lo): ("start", -2), int(x_hi): ("end", 6)}.get(e, ("middle", 0))
        out.append(text_at(x + dx, top + ph + 16, label, anchor=anchor, fill="#333"))
    for tf in (30, 100, 300, 1000, 3000):
        y = py(tf)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(text_at(left - 4, y + 4, f"{tf:,}", anchor="end", fill="#333"))
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    out.append(text_at(left + pw / 2, top + ph + 34, f"FLOP per NVLink byte, {formula} (log)", anchor="middle"))
    out.append(text_at(4, top - 8, "TFLOP/s (log)", fill="#111"))
    for prec, peak, ridge, dashed, colour in roofs:
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        xs = [10 ** (x_lo + k * (x_hi - x_lo) / 60) for k in range(61)]
        pts = [(px(i), py(min(peak, i * fig["link_bytes_per_s"] / 1e12))) for i in xs]
        path = " ".join(f"{'M' if k == 0 else 'L'}{x:.1f},{y:.1f}" for k, (x, y) in enumerate(pts))
        out.append(
            f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}><title>{prec.upper()} roof</title></path>'
        )
        out.append(
            f'<line x1="{px(ridge):.1f}" x2="{px(ridge):.1f}" y1="{py(peak):.1f}" y2="{top + ph}" stroke="{colour}" stroke-dasharray="2 3"/>'
        )
    for prec, pts_ in (("BF16", points), ("FP8", fp8_points)):
        for d, r in pts_:
            x, y = px(r["intensity"]), py(r["attainable_tflops"])
            colour = RED if r["comm_bound"] else GREEN
            fill = colour if prec == "BF16" else "#fff"
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{fill}" stroke="{colour}" stroke-width="2"/>')
            if prec == "BF16":  # the degree alone: "TP=8" labels would overlap at this width
                out.append(text_at(x, y + 18, f"{d}", anchor="middle", fill=colour, extra=' font-weight="600"'))
    y = legend_top
    for prec, peak, ridge, dashed, colour in roofs:
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(f'<line x1="10" x2="32" y1="{y - 4}" y2="{y - 4}" stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(text_at(38, y, f"{prec.upper()} roof: {peak:,.0f} TF/s"))
        out.append(text_at(38, y + 18, f"{prec.upper()} ridge: {ridge:,.0f} FLOP/B", fill="#444"))
        y += 36
    for (d, r), (_, f8) in zip(points, fp8_points):
        bound = lambda b: "comm" if b else "compute"  # noqa: E731
        out.append(
            text_at(
                10,
                y,
                f"TP={d}: {r['intensity']:,.0f} FLOP/B · BF16 {bound(r['comm_bound'])}, FP8 {bound(f8['comm_bound'])}",
            )  # fmt: skip
        )
        y += 18
    out.append(text_at(10, y + 6, "Numbers under the points: TP degree. Filled BF16,", fill="#444"))
    out.append(text_at(10, y + 22, "hollow FP8; red: communication-bound.", fill="#444"))
    y += 16
    out.append(text_at(10, y + 22, "Predicted from datasheet figures, not measured", fill="#444"))
    out.append("</svg>")
    return "\n".join(out)


SPEC = FigureSpec(
    "tp-roofline",
    "Arithmetic intensity of a TP MLP on the link against a node's compute and NVLink",
    RooflineParams,
    draw_roofline,
)
