"""Memory anatomy: weights, gradients, optimizer state and activations per GPU, one bar per configuration."""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Literal

from pydantic import Field

from labs.api import svg_open

from .. import calc
from ..schema import Rendered
from .base import BLUE, OCHRE, ORANGE, RED, SKY, FigureSpec, Params, finish, text_at, title_line


class MemoryConfig(Params):
    label: str = Field(min_length=1, max_length=40, description="Bar label, e.g. 'ZeRO-3, 8 GPUs'.")
    dp: int = Field(1, ge=1, le=100_000)
    tp: int = Field(1, ge=1, le=64)
    pp: int = Field(1, ge=1, le=256)
    zero: int = Field(0, ge=0, le=3)
    sequence_parallel: bool = False
    recompute: Literal["none", "selective", "full"] = "selective"


class MemoryParams(Params):
    params: float = Field(7e9, gt=0, le=1e13, description="Parameters.")
    layers: int = Field(32, ge=1, le=1000)
    hidden: int = Field(4096, ge=64, le=100_000)
    heads: int = Field(32, ge=1, le=1024)
    seq: int = Field(4096, ge=1, le=1_000_000)
    micro_batch: int = Field(1, ge=1, le=4096)
    hbm_gb: float = Field(80, gt=0, le=10_000, description="GPU memory, GB (H100: 80).")
    configs: list[MemoryConfig] = Field(min_length=1, max_length=8, description="One bar per configuration.")


def draw_memory(p: MemoryParams) -> Rendered:
    parts = [
        ("weights_gb", "weights", BLUE),
        ("grads_gb", "gradients", SKY),
        ("optim_gb", "optimizer state", OCHRE),
        ("activations_gb", "activations", ORANGE),
    ]
    mems = [
        calc.memory_per_gpu(
            p.params,
            p.layers,
            p.hidden,
            p.heads,
            p.seq,
            p.micro_batch,
            c.dp,
            c.tp,
            c.pp,
            c.zero,
            c.sequence_parallel,
            c.recompute,
            p.hbm_gb,
        )
        for c in p.configs
    ]
    title = f"Memory per GPU, {p.params / 1e9:g}B parameters, {p.seq:,}-token sequences"
    alt = (
        f"Stacked bars of GB per GPU for each configuration, against the {p.hbm_gb:g} GB of one GPU: "
        + "; ".join(
            f"{c.label}: weights {m['weights_gb']:.1f}, gradients {m['grads_gb']:.1f}, optimizer {m['optim_gb']:.1f}, "
            f"activations {m['activations_gb']:.1f}, total {m['total_gb']:.1f} GB ({'fits' if m['fits'] else 'does not fit'})"
            for c, m in zip(p.configs, mems)
        )
        + "."
    )
    x_max = max(max(m["total_gb"] for m in mems), p.hbm_gb) * 1.08
    wide = _memory_wide(p, mems, parts, x_max, title, alt)
    narrow = _memory_narrow(p, mems, parts, x_max, title, alt)
    rows = [
        [
            c.label,
            f"{c.dp}/{c.tp}/{c.pp}",
            str(c.zero),
            c.recompute,
            f"{m['weights_gb']:.1f}",
            f"{m['grads_gb']:.1f}",
            f"{m['optim_gb']:.1f}",
            f"{m['activations_gb']:.1f}",
            f"{m['total_gb']:.1f}",
        ]
        for c, m in zip(p.configs, mems)
    ]
    numbers = {f"total_{i}": m["total_gb"] for i, m in enumerate(mems)}
    numbers.update({f"activations_{i}": m["activations_gb"] for i, m in enumerate(mems)})
    return finish(
        name="memory-anatomy",
        title=title,
        svg=wide,
        narrow_svg=narrow,
        alt=alt,
        columns=[
            "configuration",
            "DP/TP/PP",
            "ZeRO",
            "recompute",
            "weights",
            "gradients",
            "optimizer",
            "activations",
            "total GB",
        ],
        rows=rows,
        numbers=numbers,
    )


_MEMORY_AXIS = "GB per GPU (activations: first pipeline stage, one microbatch in flight per stage)"
_HALO = ' paint-order="stroke" stroke="#fff" stroke-width="4"'  # legible where the GPU's memory line crosses


def _memory_ticks(out: list[str], px: Callable[[float], float], x_max: float, y: float) -> None:
    step = 20 if x_max <= 200 else 50 if x_max <= 500 else 200
    for t in range(0, int(x_max) + 1, step):
        out.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{y}" y2="{y + 4}" stroke="#333"/>')
        out.append(text_at(px(t), y + 18, str(t), anchor="middle", fill="#333"))


def _memory_wide(p: MemoryParams, mems: list[dict], parts: list, x_max: float, title: str, alt: str) -> str:
    """Labels beside the bars, the totals after them: 760 px, for a laptop."""
    width = 760
    left, right, top, bar_h, gap = 170, 40, 64, 22, 12
    height = top + len(mems) * (bar_h + gap) + 70
    pw = width - left - right

    def px(gb: float) -> float:
        return left + gb / x_max * pw

    out = svg_open(width, height, title, alt)
    out.append(title_line(title))
    lx = left
    for _, name, colour in parts:
        out.append(f'<rect x="{lx}" y="32" width="12" height="12" fill="{colour}"/>')
        out.append(text_at(lx + 16, 42, name))
        lx += 16 + 8 * len(name) + 18
    base = top + len(mems) * (bar_h + gap)
    hx = px(p.hbm_gb)
    out.append(
        f'<line x1="{hx:.1f}" x2="{hx:.1f}" y1="{top - 6}" y2="{base}" stroke="{RED}" stroke-width="2" '
        'stroke-dasharray="6 4"/>'
    )
    for i, (c, m) in enumerate(zip(p.configs, mems)):
        y = top + i * (bar_h + gap)
        out.append(
            text_at(left - 8, y + bar_h - 6, c.label, anchor="end", extra=' font-weight="600"' if not m["fits"] else "")
        )
        x = _memory_bar(out, m, parts, px, left, y, bar_h)
        out.append(
            text_at(x + 4, y + bar_h - 6, f"{m['total_gb']:.1f} GB", fill="#111" if m["fits"] else RED, extra=_HALO)
        )
    out.append(text_at(hx, base + 14, f"{p.hbm_gb:g} GB per GPU", anchor="middle", fill=RED))
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{base + 24}" y2="{base + 24}" stroke="#333"/>')
    _memory_ticks(out, px, x_max, base + 24)
    out.append(text_at(left + pw / 2, base + 58, _MEMORY_AXIS, anchor="middle", fill="#444"))
    out.append("</svg>")
    return "\n".join(out)


def _memory_narrow(p: MemoryParams, mems: list[dict], parts: list, x_max: float, title: str, alt: str) -> str:
    """The same bars for a phone, 340 px: each label and its total on a line above its bar, so the totals and
    the GPU's memory line are on screen without scrolling sideways."""
    width = 340
    left, right, top, bar_h, row = 10, 14, 100, 16, 40
    height = top + len(mems) * row + 92
    pw = width - left - right

    def px(gb: float) -> float:
        return left + gb / x_max * pw

    out = svg_open(width, height, title, alt)
    first, _, rest = title.partition(", ")
    out.append(title_line(f"{first},", left))
    out.append(title_line(rest, left, 38))
    for k, (_, name, colour) in enumerate(parts):  # the legend in two columns
        lx, ly = left + (k % 2) * 150, 58 + (k // 2) * 18
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{colour}"/>')
        out.append(text_at(lx + 16, ly, name))
    base = top + len(mems) * row
    hx = px(p.hbm_gb)
    out.append(
        f'<line x1="{hx:.1f}" x2="{hx:.1f}" y1="{top - 4}" y2="{base}" stroke="{RED}" stroke-width="2" '
        'stroke-dasharray="6 4"/>'
    )
    for i, (c, m) in enumerate(zip(p.configs, mems)):
        y = top + i * row
        weight = ' font-weight="600"' if not m["fits"] else ""
        out.append(text_at(left, y + 10, c.label, extra=weight + _HALO))
        total = f"{m['total_gb']:.1f} GB"
        out.append(text_at(width - right, y + 10, total, anchor="end", fill="#111" if m["fits"] else RED, extra=_HALO))
        _memory_bar(out, m, parts, px, left, y + 15, bar_h)
    out.append(text_at(hx, base + 12, f"{p.hbm_gb:g} GB per GPU", anchor="middle", fill=RED, extra=_HALO))
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{base + 20}" y2="{base + 20}" stroke="#333"/>')
    _memory_ticks(out, px, x_max, base + 20)
    axis, _, why = _MEMORY_AXIS.partition(" (")
    stage, _, flight = why.partition(", ")
    for k, line in enumerate((axis, f"({stage},", flight)):
        out.append(text_at(left + pw / 2, base + 54 + 16 * k, line, anchor="middle", fill="#444"))
    out.append("</svg>")
    return "\n".join(out)


def _memory_bar(
    out: list[str], m: dict, parts: list, px: Callable[[float], float], left: float, y: float, bar_h: float
) -> float:
    """One stacked bar; returns where it ends."""
    x = float(left)
    for key, name, colour in parts:
        w = px(m[key]) - left
        if w > 0:
            out.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}"><title>{escape(name)}: {m[key]:.1f} GB</title></rect>'
            )
        x += w
    return x


SPEC = FigureSpec(
    "memory-anatomy", "weights, gradients, optimizer state, activations per GPU", MemoryParams, draw_memory
)
