"""The tensor-parallel MLP block: column- then row-parallel linears and the collectives around them."""

from __future__ import annotations

from pydantic import Field

from labs.api import svg_open

from .. import calc
from ..schema import Rendered
from . import phone
from .base import BLUE, GREY, ORANGE, FigureSpec, Params, arrow_defs, finish, text_at, title_line

# The block's boxes, in data-flow order: (label, sublabel, width in the wide drawing, colour). Rank 0's names;
# _for_rank renames them for rank 1.
BOXES = [
    ("A₀ (column slice)", "X · A[:, 0:F/N]", 118, BLUE),
    ("GeLU", "per element", 72, GREY),
    ("B₀ (row slice)", "Y₀ · B[0:F/N, :]", 118, BLUE),
]


def _for_rank(text: str, r: int) -> str:
    return text.replace("0:F/N", "0:F/N" if r == 0 else "F/N:2F/N").replace("₀", "₀₁"[r])


class TpBlockParams(Params):
    sequence_parallel: bool = Field(
        False, description="Draw the sequence-parallel variant (all-gather + reduce-scatter)."
    )
    tokens: int = Field(8192, ge=1, le=10_000_000, description="Tokens per step (batch × sequence), for the bytes.")
    hidden: int = Field(4096, ge=64, le=65536, description="Model width H, for the bytes.")
    degree: int = Field(8, ge=2, le=64, description="TP degree N, for the bytes each GPU sends.")


def draw_tp_block(p: TpBlockParams) -> Rendered:
    sp = p.sequence_parallel
    c = calc.tp_layer_collectives(p.tokens, p.hidden, p.degree, sequence_parallel=sp)
    width, height = 760, 318
    title = (
        "Tensor-parallel MLP with sequence parallelism: all-gather in, reduce-scatter out"
        if sp
        else "Tensor-parallel MLP: column-parallel, then row-parallel, one all-reduce each way"
    )
    f_in, f_bwd = ("all-gather", "reduce-scatter") if sp else ("identity", "all-reduce")
    g_out, g_bwd = ("reduce-scatter", "all-gather") if sp else ("all-reduce", "identity")
    alt = (
        f"Data flows left to right through one MLP block on each of the N tensor-parallel ranks. "
        f"{'X arrives split along the sequence; an all-gather makes the full X on every rank' if sp else 'X is replicated on every rank'} "
        "(backward: "
        f"{f_bwd} of the input gradient). A column-parallel linear A holds a slice of A's columns, so each rank "
        "computes its own slice of the hidden activations with no communication, then GeLU. A row-parallel linear "
        "B holds the matching rows, so each rank produces a partial sum of the full output; "
        f"{'a reduce-scatter sums them and leaves each rank a slice of the sequence' if sp else 'an all-reduce sums them'} "
        f"(backward: {g_bwd}). Attention has the same pair (heads split like A's columns, output projection like B). "
        f"Per layer: {c['all_reduce_fwd']} all-reduces forward and {c['all_reduce_bwd']} backward"
        + (
            f"; with sequence parallelism {c['all_gather_fwd']} all-gathers and {c['reduce_scatter_fwd']} "
            "reduce-scatters each way instead, moving the same bytes."
            if sp
            else "."
        )
    )
    out = svg_open(width, height, title, alt)
    out.append(arrow_defs())
    out.append(title_line(title))
    lanes = [("rank 0", 70), ("rank 1", 176)]
    boxes = [(x, w, label, sub, colour) for x, (label, sub, w, colour) in zip((150, 290, 384), BOXES)]
    for r, (name, y) in enumerate(lanes):
        out.append(text_at(12, y + 24, name, fill="#111", extra=' font-weight="600"'))
        out.append(text_at(88, y + 24, "X" if not sp else f"X{'₀₁'[r]}", anchor="middle", fill="#111"))
        prev_x = 104
        for bx, bw, label, sub, colour in boxes:
            label, sub = _for_rank(label, r), _for_rank(sub, r)
            out.append(
                f'<line x1="{prev_x}" y1="{y + 20}" x2="{bx - 2}" y2="{y + 20}" stroke="#333" marker-end="url(#ARROW-k)"/>'
            )
            out.append(
                f'<rect x="{bx}" y="{y}" width="{bw}" height="40" rx="5" fill="#fff" stroke="{colour}" stroke-width="2"/>'
            )
            out.append(text_at(bx + bw / 2, y + 17, label, anchor="middle", fill="#111"))
            out.append(text_at(bx + bw / 2, y + 33, sub, anchor="middle", fill="#555", extra=' font-size="11"'))
            prev_x = bx + bw
        out.append(
            f'<line x1="{prev_x}" y1="{y + 20}" x2="{562}" y2="{y + 20}" stroke="#333" marker-end="url(#ARROW-k)"/>'
        )
        out.append(text_at(610, y + 24, "Z" if not sp else f"Z{'₀₁'[r]}", anchor="start", fill="#111"))
        out.append(text_at(534, y + 12, "partial", anchor="middle", fill="#555", extra=' font-size="11"'))
    # The collectives: f before A (input), g after B (output), spanning both ranks.
    for x, fwd, tag in ((122, f_in, "f"), (586, g_out, "g")):
        colour = ORANGE if fwd != "identity" else GREY
        out.append(
            f'<rect x="{x - 14}" y="56" width="28" height="176" rx="6" fill="{colour}" fill-opacity="0.15" stroke="{colour}"/>'
        )
        out.append(text_at(x, 50, tag, anchor="middle", fill=colour, extra=' font-weight="600"'))
    out.append(text_at(122, 252, f"f: forward {f_in}", anchor="middle", fill="#111", extra=' font-size="11"'))
    out.append(text_at(122, 266, f"backward {f_bwd}", anchor="middle", fill="#111", extra=' font-size="11"'))
    out.append(text_at(586, 252, f"g: forward {g_out}", anchor="middle", fill="#111", extra=' font-size="11"'))
    out.append(text_at(586, 266, f"backward {g_bwd}", anchor="middle", fill="#111", extra=' font-size="11"'))
    if sp:
        out.append(text_at(12, height - 28, "X₀, X₁ and Z₀, Z₁: each rank's slice of the sequence", fill="#444"))
    per_layer = (
        f"Per layer (attention + MLP): {c['collectives_per_layer']} collectives; "
        f"{c['bytes_per_gpu_per_layer'] / 1e6:,.0f} MB sent per GPU at {p.tokens:,} tokens, H = {p.hidden:,}, N = {p.degree}"
    )
    out.append(text_at(12, height - 10, per_layer, fill="#444"))
    out.append("</svg>")
    narrow = _narrow(sp, title, alt, (f_in, f_bwd), (g_out, g_bwd), per_layer)
    rows = [
        ["f (before A)", f_in, f_bwd, "2 per layer (attention, MLP)" if f_in != "identity" else "—"],
        ["column-parallel A", "none", "none", "each rank owns F/N columns"],
        ["row-parallel B", "none", "none", "each rank owns the matching F/N rows"],
        ["g (after B)", g_out, g_bwd, "2 per layer (attention, MLP)"],
    ]
    numbers = {k: float(v) for k, v in c.items()}
    return finish(
        name="tp-mlp-block",
        title=title,
        svg="\n".join(out),
        narrow_svg=narrow,
        alt=alt,
        columns=["where", "forward", "backward", "how often"],
        rows=rows,
        numbers=numbers,
    )


def _narrow(sp: bool, title: str, alt: str, f: tuple[str, str], g: tuple[str, str], per_layer: str) -> str:
    """The same block for a phone, 340 px: data flows down instead of across, the two ranks side by side, and
    each collective a band across both ranks that the data enters and leaves, its forward and backward named
    inside. Text is 12 px throughout: the picture is shown a little under its drawn size on a 390 px phone."""
    centres, box_w = (86, 254), 148
    body: list[str] = [arrow_defs()]
    y = phone.title_block(body, title) + 30
    for r, cx in enumerate(centres):
        body.append(text_at(cx, y, f"rank {r}", anchor="middle", extra=' font-weight="600"'))
        body.append(text_at(cx, y + 20, f"X{'₀₁'[r]}" if sp else "X", anchor="middle"))
    y += 26  # the top of the first arrow

    def arrows(y0: float, y1: float) -> None:
        for cx in centres:
            body.append(f'<line x1="{cx}" y1="{y0}" x2="{cx}" y2="{y1 - 2}" stroke="#333" marker-end="url(#ARROW-k)"/>')

    def band(y0: float, tag: str, fwd: str, bwd: str) -> None:
        colour = ORANGE if fwd != "identity" else GREY
        body.append(
            f'<rect x="{phone.MARGIN}" y="{y0}" width="{phone.PHONE_W - 2 * phone.MARGIN}" height="40" rx="6" '
            f'fill="{colour}" fill-opacity="0.15" stroke="{colour}"/>'
        )
        body.append(text_at(phone.MARGIN + 8, y0 + 25, tag, fill=colour, extra=' font-weight="600"'))
        mid = phone.PHONE_W / 2
        body.append(text_at(mid, y0 + 17, f"forward {fwd}", anchor="middle"))
        body.append(text_at(mid, y0 + 33, f"backward {bwd}", anchor="middle"))

    band(y + 16, "f", *f)
    arrows(y, y + 16)  # into the band, and out of it into A
    arrows(y + 56, y + 76)
    y += 76
    for k, (label, sub, _, colour) in enumerate(BOXES):
        for r, cx in enumerate(centres):
            w = box_w if colour == BLUE else 90
            body.append(
                f'<rect x="{cx - w / 2}" y="{y}" width="{w}" height="40" rx="5" fill="#fff" stroke="{colour}" '
                'stroke-width="2"/>'
            )
            body.append(text_at(cx, y + 17, _for_rank(label, r), anchor="middle"))
            body.append(text_at(cx, y + 33, _for_rank(sub, r), anchor="middle", fill="#555"))
        if k < len(BOXES) - 1:
            arrows(y + 40, y + 60)
            y += 60
    y += 40
    band(y + 34, "g", *g)
    arrows(y, y + 34)
    arrows(y + 74, y + 96)
    for cx in centres:
        body.append(text_at(cx + 6, y + 22, "partial", fill="#555"))
    y += 96
    for r, cx in enumerate(centres):
        body.append(text_at(cx, y + 16, f"Z{'₀₁'[r]}" if sp else "Z", anchor="middle"))
    y += 40
    if sp:
        y = phone.note_block(body, "X₀, X₁ and Z₀, Z₁: each rank's slice of the sequence.", y)
    y = phone.note_block(body, per_layer, y)
    out = svg_open(phone.PHONE_W, round(y - 4), title, alt)
    out += body
    out.append("</svg>")
    return "\n".join(out)


SPEC = FigureSpec("tp-mlp-block", "column- then row-parallel MLP and its collectives", TpBlockParams, draw_tp_block)
