"""Jinja filters and globals of the templates: dates, numbers, authored Markdown, highlighted code, and the
lab results as a learner reads them (app/web/views/result_view.py).

`install(env)` registers them; app/web/templates.py calls it once for the app's template environment.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from jinja2 import Environment
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name

from app.content import render_inline, render_markdown
from app.content.errors import code_spans
from app.core.models import utcnow
from app.services.learning.lesson_export import changed_files
from app.web import notice_session
from app.web.views import result_view
from labs import api

FLOAT_HUGE = 1e6  # see num


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


def ticks(text: str | None) -> Markup:
    """A plain message with `code` spans (a command, a form field) as HTML: the spans as <code>, everything escaped.
    The same sentence reads right as text in the JSON API and on the command line."""
    return Markup("").join(
        Markup("<code>{}</code>").format(t) if is_code else t for t, is_code in code_spans(text or "")
    )


def num(v: Any, digits: int = 4, **options: Any) -> Any:
    """A number as labs/words.py writes it (grades, calculator outputs); anything else unchanged. A whole int
    keeps every digit; a float is a power of ten from FLOAT_HUGE, as a calculator's outputs span many orders
    of magnitude (a scale of 448 million reads "4.48 × 10⁸", not nine digits). `{{ x|num(huge=1e15) }}`."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return v
    if isinstance(v, float):
        options.setdefault("huge", FLOAT_HUGE)
    return api.number(v, digits, **options)


def two(n: Any) -> str:
    return f"{int(n):02d}"


def span(seconds: float | timedelta | None) -> str:
    """A duration as people say it (labs/words.py): '0.4 s', '17 s', '2 min 05 s', '1 h 03 min'."""
    return "" if seconds is None else api.duration(seconds)


def eta(seconds: float | None) -> str:
    """The job card's estimate: 'under a minute', 'about 3 min', 'unknown' when there is none."""
    return "unknown" if seconds is None else api.duration(seconds, about=True)


def job_duration(job: Any) -> str:
    """How long a job ran (started to finished), or has been running so far; '' before it starts."""
    start, end = getattr(job, "started_at", None), getattr(job, "finished_at", None)
    if start is None:
        return ""
    if end is None:
        return span(utcnow() - start) + " so far"
    return span(end - start)


def install(env: Environment) -> None:
    env.filters.update(
        when=when,
        md=md,
        md_inline=md_inline,
        ticks=ticks,
        num=num,
        two=two,
        human=result_view.human,
        number=result_view.number,
        span=span,
        duration=job_duration,
        eta=eta,
    )
    env.globals.update(
        code_lines=code_lines,
        line_span=line_span,
        present=result_view.present,
        params_text=result_view.params_text,
        notice_pending=notice_session.pending,
        notice_poll=notice_session.poll_trigger,
        count=api.count,  # {{ count(n, "job") }}: "1 job", "2 jobs"
        byte_size=api.byte_size,  # {{ byte_size(n) }}: "1.5 MiB"
        changed_files=changed_files,  # the instructor's version list: what each version changed
    )
