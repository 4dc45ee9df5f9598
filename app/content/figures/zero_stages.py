"""What each ZeRO stage removes: the training state per GPU under DDP and ZeRO-1, -2 and -3, one bar each.

Drawn for a phone's width (340 px), which a laptop scales up: each stage's label and total above its bar.
Every number comes from calc.zero_memory.
"""

from __future__ import annotations

from html import escape

from pydantic import Field

from labs.api import svg_open

from .. import calc
from ..schema import Rendered
from .base import BLUE, OCHRE, RED, SKY, FigureSpec, Params, finish, text_at, title_line

WIDTH = 340
PARTS = (("weights", "weights", 2.0, BLUE), ("grads", "gradients", 2.0, SKY), ("optim", "optimizer state", 12.0, OCHRE))
NAMES = ("DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3")


class ZeroStagesParams(Params):
    params: float = Field(7e9, gt=0, le=1e13, description="Parameters.")
    gpus: int = Field(4, ge=2, le=100_000, description="Data-parallel GPUs the state is sharded over.")
    hbm_gb: float = Field(80, gt=0, le=10_000, description="GPU memory, GB (H100: 80).")


def _split(params: float, gpus: int, stage: int) -> dict[str, float]:
    """GB per GPU of each part: calc.zero_memory with the other two parts set to 0 bytes."""
    out = {}
    for key, _, nbytes, _ in PARTS:
        only = {k: (nbytes if k == key else 0.0) for k, _, _, _ in PARTS}
        out[key] = calc.zero_memory(params, gpus, stage, only["weights"], only["grads"], only["optim"])["gb"]
    return out


def draw_zero_stages(p: ZeroStagesParams) -> Rendered:
    totals = [calc.zero_memory(p.params, p.gpus, s)["gb"] for s in range(4)]
    splits = [_split(p.params, p.gpus, s) for s in range(4)]
    title = f"Training state per GPU, {p.params / 1e9:g}B parameters"
    subtitle = f"on {p.gpus:,} GPUs, mixed precision with Adam"
    alt = (
        f"Stacked bars of GB per GPU for {p.params / 1e9:g}B parameters on {p.gpus:,} GPUs: "
        + "; ".join(
            f"{name}: weights {s['weights']:.1f}, gradients {s['grads']:.1f}, optimizer {s['optim']:.1f}, total {t:.1f} GB"
            for name, s, t in zip(NAMES, splits, totals)
        )
        + f". ZeRO-1 shards the optimizer state, ZeRO-2 the gradients too, ZeRO-3 the weights as well; one GPU holds {p.hbm_gb:g} GB."
    )
    left, right, top, bar_h, row = 10, 14, 100, 16, 40
    x_max = max(max(totals), p.hbm_gb) * 1.08
    pw = WIDTH - left - right
    height = top + 4 * row + 40

    def px(gb: float) -> float:
        return left + gb / x_max * pw

    out = svg_open(WIDTH, height, title, alt)
    out.append(title_line(title, left))
    out.append(text_at(left, 38, subtitle, fill="#444"))
    for k, (_, name, _, colour) in enumerate(PARTS):
        lx, ly = left + (k % 2) * 150, 60 + (k // 2) * 18
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{colour}"/>')
        out.append(text_at(lx + 16, ly, name))
    base = top + 4 * row
    hx = px(p.hbm_gb)
    out.append(
        f'<line x1="{hx:.1f}" x2="{hx:.1f}" y1="{top - 4}" y2="{base}" stroke="{RED}" stroke-width="2" stroke-dasharray="6 4"/>'
    )
    halo = ' paint-order="stroke" stroke="#fff" stroke-width="4"'
    for i, (name, split, total) in enumerate(zip(NAMES, splits, totals)):
        y = top + i * row
        out.append(text_at(left, y + 10, name, extra=halo))
        fits = total <= p.hbm_gb
        out.append(
            text_at(WIDTH - right, y + 10, f"{total:.1f} GB", anchor="end", fill="#111" if fits else RED, extra=halo)
        )
        x = float(left)
        for key, label, _, colour in PARTS:
            w = px(split[key]) - left
            out.append(
                f'<rect x="{x:.1f}" y="{y + 15}" width="{w:.1f}" height="{bar_h}" fill="{colour}">'
                f"<title>{escape(f'{name}, {label}: {split[key]:.1f} GB')}</title></rect>"
            )
            x += w
    out.append(text_at(hx, base + 14, f"{p.hbm_gb:g} GB per GPU", anchor="middle", fill=RED, extra=halo))
    out.append(text_at(left, base + 32, "GB per GPU, activations not counted", fill="#444"))
    out.append("</svg>")
    return finish(
        name="zero-stages",
        title=title,
        svg="\n".join(out),
        alt=alt,
        columns=["stage", "weights", "gradients", "optimizer", "total GB"],
        rows=[
            [name, f"{s['weights']:.1f}", f"{s['grads']:.1f}", f"{s['optim']:.1f}", f"{t:.1f}"]
            for name, s, t in zip(NAMES, splits, totals)
        ],
        numbers={f"total_{k}": t for k, t in enumerate(totals)},
    )


SPEC = FigureSpec("zero-stages", "training state per GPU under DDP and ZeRO-1/2/3", ZeroStagesParams, draw_zero_stages)
