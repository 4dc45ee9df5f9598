"""Ring all-reduce, step by step: a reduce-scatter leaves each GPU one summed chunk, an all-gather shares them.

Drawn for a phone's width (340 px), which a laptop scales up: one small GPU × chunk grid per step, four to a
row. A cell's number is how many GPUs' values its chunk already holds; N means the full sum.
"""

from __future__ import annotations

from html import escape

from pydantic import Field

from labs.api import svg_open

from .. import calc
from ..schema import Rendered
from .base import BLUE, FigureSpec, Params, finish, text_at, title_line

WIDTH = 340


class RingPhasesParams(Params):
    gpus: int = Field(4, ge=2, le=6, description="GPUs in the ring (each holds as many chunks).")


def ring_states(n: int) -> list[tuple[str, list[list[int]]]]:
    """(label, held[gpu][chunk] = how many GPUs' values that copy sums) after every step of both phases."""
    held = [[1 << g for _ in range(n)] for g in range(n)]  # bit g: GPU g's values are in the sum
    states = [("start", held)]
    for s in range(n - 1):  # reduce-scatter: GPU g passes chunk (g − s) to g + 1, which adds its own
        nxt = [row[:] for row in held]
        for g in range(n):
            c = (g - s) % n
            nxt[(g + 1) % n][c] = held[(g + 1) % n][c] | held[g][c]
        held = nxt
        states.append((f"reduce-scatter {s + 1}", held))
    for s in range(n - 1):  # all-gather: GPU g passes its full chunk (g + 1 − s) to g + 1, which keeps it
        nxt = [row[:] for row in held]
        for g in range(n):
            c = (g + 1 - s) % n
            nxt[(g + 1) % n][c] = held[g][c]
        held = nxt
        states.append((f"all-gather {s + 1}", held))
    return [(label, [[bin(v).count("1") for v in row] for row in grid]) for label, grid in states]


def _shade(k: int, n: int) -> str:
    """Lighter for a partial sum, the palette's blue for the full sum."""
    if k == n:
        return BLUE
    level = int(235 - 120 * (k - 1) / max(n - 1, 1))
    return f"rgb({level},{level + 8},{min(level + 20, 255)})"


def draw_ring_phases(p: RingPhasesParams) -> Rendered:
    n = p.gpus
    states = ring_states(n)
    traffic = calc.ring_allreduce(float(n), n)  # an array of n chunks: chunks each GPU sends
    title = f"Ring all-reduce on {n} GPUs, step by step"
    alt = (
        f"{n} GPUs each hold {n} chunks. In {n - 1} reduce-scatter steps each GPU passes one chunk to the next, "
        f"which adds its own, until GPU g holds the full sum of chunk g + 1. In {n - 1} all-gather steps the "
        f"full sums travel round the ring. Each GPU sends {traffic['half']:g} chunks per phase, "
        f"{traffic['per_gpu']:g} in all: 2(N−1)/N of the array."
    )
    cell, per_row, gap_x, gap_y = 15, 4, 14, 40
    grid_w = n * cell
    left = (WIDTH - per_row * grid_w - (per_row - 1) * gap_x) / 2 + 8
    rows = (len(states) + per_row - 1) // per_row
    top = 74
    height = top + rows * (n * cell + gap_y) + 12
    out = svg_open(WIDTH, height, title, alt)
    out.append(title_line(title, 10))
    out.append(text_at(10, 40, "rows: GPUs 0…; columns: chunks 0…", fill="#444"))
    out.append(text_at(10, 56, f"a cell's number: GPUs summed into it ({n} = done)", fill="#444"))
    for i, (label, grid) in enumerate(states):
        x0 = left + (i % per_row) * (grid_w + gap_x)
        y0 = top + (i // per_row) * (n * cell + gap_y) + 14
        out.append(
            text_at(
                x0 + grid_w / 2,
                y0 - 4,
                label.replace("reduce-scatter", "RS").replace("all-gather", "AG"),
                anchor="middle",
            )
        )
        for g, row in enumerate(grid):
            for c, k in enumerate(row):
                x, y = x0 + c * cell, y0 + g * cell
                out.append(
                    f'<rect x="{x:.1f}" y="{y:.1f}" width="{cell}" height="{cell}" fill="{_shade(k, n)}" stroke="#fff">'
                    f"<title>{escape(f'{label}: GPU {g}, chunk {c}: {k} of {n}')}</title></rect>"
                )
                out.append(
                    text_at(x + cell / 2, y + cell - 4, str(k), anchor="middle", fill="#fff" if k == n else "#111",
                            extra=' font-size="10"')
                )  # fmt: skip
    out.append(
        text_at(
            10, height - 12,
            f"each GPU sends {traffic['half']:g} + {traffic['half']:g} chunks: {traffic['factor']:g}× its {n}-chunk array",
            fill="#444",
        )
    )  # fmt: skip
    out.append("</svg>")
    final = states[-1][1]
    return finish(
        name="ring-phases",
        title=title,
        svg="\n".join(out),
        alt=alt,
        columns=["step", *[f"GPU {g}" for g in range(n)]],
        rows=[[label, *[" ".join(map(str, row)) for row in grid]] for label, grid in states],
        numbers={
            "chunks_sent_per_gpu": traffic["per_gpu"],
            "steps": float(len(states) - 1),
            "all_done": float(all(k == n for row in final for k in row)),
        },
    )


SPEC = FigureSpec(
    "ring-phases", "ring all-reduce step by step: reduce-scatter, then all-gather", RingPhasesParams, draw_ring_phases
)
