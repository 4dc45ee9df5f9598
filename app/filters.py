"""Jinja filters and globals of the templates: dates, numbers, authored Markdown, highlighted code, and the
bounded excerpt of a lab result (app/result_view.py).

`install(env)` registers them; app/web.py calls it once for the app's template environment.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from jinja2 import Environment
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name

from app.content import render_inline, render_markdown
from app.result_view import excerpt


def when(dt: datetime | None) -> str:
    if dt is None:
        return ""
    return dt.strftime("%Y-%m-%d %H:%M:%S UTC")


@lru_cache(maxsize=256)
def _highlighted(code: str, language: str) -> tuple[Markup, ...]:
    lexer = get_lexer_by_name({"cuda": "cuda", "cpp": "cpp", "bash": "bash", "text": "text"}.get(language, language))
    html = highlight(code.rstrip("\n"), lexer, HtmlFormatter(nowrap=True, classprefix="tok-"))
    return tuple(Markup(line) for line in html.rstrip("\n").split("\n"))


def code_lines(code: str, language: str) -> list[Markup]:
    """Highlighted HTML, one entry per source line (Pygments escapes the code itself).

    Cached by source: authored code is immutable per lesson version, and highlighting is slow.
    """
    return list(_highlighted(code, language))


def line_span(lines: list[int]) -> str:
    if not lines:
        return ""
    if len(lines) == 1:
        return f"line {lines[0]}"
    if lines == list(range(lines[0], lines[-1] + 1)):
        return f"lines {lines[0]}–{lines[-1]}"
    return "lines " + ", ".join(map(str, lines))


# Authored text is immutable per lesson version, so rendered Markdown is cached by its source.
@lru_cache(maxsize=8192)
def md(text: str | None) -> Markup:
    return Markup(render_markdown(text))


@lru_cache(maxsize=8192)
def md_inline(text: str | None) -> Markup:
    return Markup(render_inline(text))


def num(v: Any) -> Any:
    """Floats to 4 significant digits for tables and summaries; everything else unchanged."""
    if isinstance(v, float):
        return f"{v:.4g}"
    return v


def two(n: Any) -> str:
    return f"{int(n):02d}"


def install(env: Environment) -> None:
    from app.services.queue import fmt_duration  # the job card's ETA

    env.filters.update(
        when=when, md=md, md_inline=md_inline, num=num, two=two, duration=fmt_duration, result_excerpt=excerpt
    )
    env.globals.update(code_lines=code_lines, line_span=line_span)
