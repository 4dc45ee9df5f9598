"""Template rendering: a page and its htmx fragment come from the same template.

When a request carries `HX-Request`, only the named block is rendered; otherwise the whole
page (extending base.html) is. All text is autoescaped. Filters live in app/web/filters.py.
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2
from fastapi import Request
from jinja2_fragments.fastapi import Jinja2Blocks
from starlette.responses import Response

from app.core.config import ROOT
from app.core.db import release
from app.services.learning import progress
from app.web import filters
from app.web.csrf import csrf_token_for
from app.web.views import lesson_pages, live_jobs

# auto_reload off: Jinja's default stats every template file on every render to see whether it changed
# (4.6% of a lesson page's time in the profile); templates change only with a deploy, which restarts.
templates = Jinja2Blocks(
    env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROOT / "templates"), autoescape=jinja2.select_autoescape(), auto_reload=False
    )
)
filters.install(templates.env)
templates.env.globals["check_link"] = lesson_pages.check_link  # a pause's link, kept per answer
templates.env.globals["pacing"] = functools.partial(lesson_pages.pacing, templates.env)  # kept per parts done
templates.env.globals["reading_report_s"] = progress.REPORT_EVERY_S  # static/reading.js reports this often
templates.env.globals["live_job"] = live_jobs.live_job  # a card or /jobs row in flight, followed by the page's poll
templates.env.globals["live_poll"] = live_jobs.live_poll  # that poll, as the page was drawn (base.html)


def is_htmx(request: Request) -> bool:
    """An htmx request that swaps a piece of the page. A history restore is not one: it puts the answer in
    place of <body>, so it gets the whole page. htmx 4.0.1 (htmx.js #restoreHistory, on every back or forward)
    sends HX-History-Restore-Request without HX-Request; htmx 2 sent both, on a history-cache miss."""
    headers = request.headers
    return headers.get("hx-request") == "true" and headers.get("hx-history-restore-request") != "true"


def render(
    request: Request, name: str, context: dict | None = None, *, block: str | None = None, status_code: int = 200
) -> Response:
    """Render `name`; with HX-Request and a `block`, only that block (the fragment).

    The request's database transaction ends first (app/core/db.py `release`): the template reads what the
    handler loaded, and no connection waits on the render."""
    db = getattr(request.state, "db", None)
    if db is not None:
        release(db)
    ctx = dict(context or {})
    ctx.setdefault("user", getattr(request.state, "user", None))
    scope = getattr(request.state, "scope", None)  # a class's staff page (app/web/deps.py ClassStaff)
    if scope is not None:
        ctx.setdefault("scope", scope)
        ctx.setdefault("cbase", f"/classes/{scope.klass.slug}")
        ctx.setdefault("staff_classes", getattr(request.state, "staff_classes", []))
    ctx["csrf_token"] = csrf_token_for(request.session)
    kwargs: dict[str, Any] = {"status_code": status_code}
    if block and is_htmx(request):
        kwargs["block_name"] = block
    response = templates.TemplateResponse(request, name, ctx, **kwargs)
    if "block_name" in kwargs and "live" not in ctx and live_jobs.shown(request):
        # A fragment with a job in flight (a new job's card, a lesson's lab section): the page it lands on starts
        # following it, whatever its poll did before (a whole page draws its poll itself, in base.html).
        follow = live_jobs.live_poll({"request": request})
        poll = templates.env.get_template("jobs/_live.html").render(live=follow, oob=True)
        response.body = bytes(response.body) + poll.encode()
        response.headers["content-length"] = str(len(response.body))
    # One URL answers with a page or, to htmx, a piece of it: a cache (the browser's, on back and forward
    # between sites) must not hand one out for the other.
    response.headers.append("Vary", "HX-Request")
    return response
