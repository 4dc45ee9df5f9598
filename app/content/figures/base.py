"""What every figure shares: the parameter base, the registry entry, the error, the palette and SVG text."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Any

from pydantic import BaseModel, ConfigDict

from labs.api import PALETTE

from ..schema import Rendered

BLUE, ORANGE, GREEN, PINK, OCHRE, SKY, GREY = PALETTE
RED = "#c00"  # the lab plots' clipping marker


class Params(BaseModel):
    """Base of every figure's parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class FigureSpec:
    name: str
    about: str  # one line for authors (the template README lists them)
    params: type[Params]
    draw: Callable[[Any], Rendered]


class FigureError(ValueError):
    """Bad parameters: `problems` are (field path, expected, found) triples in the author's terms."""

    def __init__(self, problems: list[tuple[tuple, str, str]]):
        super().__init__("; ".join(f"{'.'.join(map(str, loc))}: expected {e}, found {f}" for loc, e, f in problems))
        self.problems = problems


def finish(
    *,
    name: str,
    title: str,
    svg: str,
    alt: str,
    columns: list[str],
    rows: list[list[str]],
    numbers: dict[str, float],
    narrow_svg: str = "",
) -> Rendered:
    box = re.search(r'viewBox="0 0 (\d+) \d+"', svg)
    width = int(box.group(1)) if box else 0
    return Rendered(
        name=name, title=title, svg=svg, narrow_svg=narrow_svg, width=width, alt=alt, columns=columns, rows=rows,
        numbers=numbers,
    )  # fmt: skip


def num(v: float, spec: str = ".4g") -> str:
    return format(v, spec)


def text_at(x: float, y: float, s: str, *, anchor: str = "start", fill: str = "#111", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{fill}"{extra}>{escape(s)}</text>'


def title_line(title: str, x: float = 12, y: float = 20) -> str:
    return f'<text x="{x}" y="{y}" font-size="14" font-weight="600" fill="#111">{escape(title)}</text>'


def arrow_defs() -> str:
    """Arrowhead markers, one per colour used; ids are scoped by figure name at render time."""
    out = ["<defs>"]
    for key, colour in (("k", "#333"), ("r", RED), ("b", BLUE), ("o", ORANGE)):
        out.append(
            f'<marker id="ARROW-{key}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
        )
    out.append("</defs>")
    return "".join(out)


def scope_ids(svg: str, scope: str) -> str:
    """Marker ids must be unique in a page that inlines several figures: prefix them with the figure id."""
    return svg.replace("ARROW-", f"{scope}-arrow-")
