"""Ring all-reduce traffic: the bytes each GPU sends, 2(p−1)/p of the array, as the ring grows."""

from __future__ import annotations

from pydantic import Field

from labs.api import Series, line_chart

from .. import calc
from ..schema import Rendered
from . import phone
from .base import FigureSpec, Params, finish


class RingTrafficParams(Params):
    max_gpus: int = Field(64, ge=4, le=4096, description="Largest ring drawn.")


def draw_ring_traffic(p: RingTrafficParams) -> Rendered:
    ns = [n for n in (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096) if n <= p.max_gpus]
    factors = [calc.ring_allreduce(1.0, n)["factor"] for n in ns]
    title = "Ring all-reduce: bytes each GPU sends, in units of the array"
    alt = (
        "Each GPU sends 2(p−1)/p times the array: "
        + ", ".join(f"{f:.3g}× at p = {n}" for n, f in zip(ns, factors))
        + ". The curve flattens towards 2×: adding GPUs barely adds bytes per GPU."
    )
    svg = line_chart(
        [
            Series("2(p−1)/p", [float(n) for n in ns], factors),
            Series("limit 2×", [float(ns[0]), float(ns[-1])], [2.0, 2.0], dashed=True),
        ],
        title=title,
        xlabel="GPUs in the ring (p)",
        ylabel="bytes sent ÷ array size",
        width=600,
        description=alt,
    )
    narrow = phone.line_chart(
        [
            ("2(p−1)/p", [float(n) for n in ns], factors, False),
            ("limit 2×", [float(ns[0]), float(ns[-1])], [2.0, 2.0], True),
        ],
        title=title,
        alt=alt,
        xlabel="GPUs in the ring (p)",
        ylabel="bytes sent ÷ array size",
    )
    return finish(
        name="ring-traffic",
        title=title,
        svg=svg,
        narrow_svg=narrow,
        alt=alt,
        columns=["GPUs (p)", "bytes per GPU ÷ array"],
        rows=[[str(n), f"{f:.3f}"] for n, f in zip(ns, factors)],
        numbers={f"factor_{n}": f for n, f in zip(ns, factors)},
    )


SPEC = FigureSpec(
    "ring-traffic", "ring all-reduce bytes per GPU, 2(p−1)/p, as p grows", RingTrafficParams, draw_ring_traffic
)
