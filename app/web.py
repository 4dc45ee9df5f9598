"""Template rendering: a page and its htmx fragment come from the same template.

When a request carries `HX-Request`, only the named block is rendered; otherwise the whole
page (extending base.html) is. All text is autoescaped.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import Request
from jinja2_fragments.fastapi import Jinja2Blocks

from app.config import ROOT
from app.security import csrf_token_for

templates = Jinja2Blocks(directory=str(ROOT / "templates"))


def _when(dt: datetime | None) -> str:
    if dt is None:
        return ""
    return dt.strftime("%Y-%m-%d %H:%M:%S UTC")


templates.env.filters["when"] = _when


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def render(
    request: Request, name: str, context: dict | None = None, *, block: str | None = None, status_code: int = 200
):
    """Render `name`; with HX-Request and a `block`, only that block (the fragment)."""
    ctx = dict(context or {})
    ctx.setdefault("user", getattr(request.state, "user", None))
    ctx["csrf_token"] = csrf_token_for(request.session)
    kwargs = {"status_code": status_code}
    if block and is_htmx(request):
        kwargs["block_name"] = block
    return templates.TemplateResponse(request, name, ctx, **kwargs)


# ---------------------------------------------------------------- lesson rendering helpers

from functools import lru_cache  # noqa: E402

from markupsafe import Markup  # noqa: E402
from pygments import highlight  # noqa: E402
from pygments.formatters import HtmlFormatter  # noqa: E402
from pygments.lexers import get_lexer_by_name  # noqa: E402

from app.content import render_inline, render_markdown  # noqa: E402


def code_lines(code: str, language: str) -> list[Markup]:
    """Highlighted HTML, one entry per source line (Pygments escapes the code itself)."""
    lexer = get_lexer_by_name({"cuda": "cuda", "cpp": "cpp", "bash": "bash", "text": "text"}.get(language, language))
    html = highlight(code.rstrip("\n"), lexer, HtmlFormatter(nowrap=True, classprefix="tok-"))
    return [Markup(line) for line in html.rstrip("\n").split("\n")]


def line_span(lines: list[int]) -> str:
    if not lines:
        return ""
    if len(lines) == 1:
        return f"line {lines[0]}"
    if lines == list(range(lines[0], lines[-1] + 1)):
        return f"lines {lines[0]}–{lines[-1]}"
    return "lines " + ", ".join(map(str, lines))


@lru_cache(maxsize=8192)
def _md(text: str | None) -> Markup:
    return Markup(render_markdown(text))


@lru_cache(maxsize=8192)
def _md_inline(text: str | None) -> Markup:
    return Markup(render_inline(text))


# Authored text is immutable per lesson version, so rendered Markdown is cached by its source.
templates.env.filters["md"] = _md
templates.env.filters["md_inline"] = _md_inline


def _num(v):
    """Floats to 4 significant digits for tables and summaries; everything else unchanged."""
    if isinstance(v, float):
        return f"{v:.4g}"
    return v


templates.env.filters["num"] = _num
templates.env.filters["two"] = lambda n: f"{int(n):02d}"
templates.env.globals["code_lines"] = code_lines
templates.env.globals["line_span"] = line_span
