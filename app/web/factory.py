"""The FastAPI application factory.

    create_app(settings, host=..., prepare=...)   tests and `python -m app serve` with one web process
    app.web.factory:web_process                         the factory each of several web processes calls

`python -m app serve` (app/cli/serve.py) checks the labs, probes this host, migrates the database,
publishes the lessons and starts the embedded lab workers once, then serves one or several web
processes; the web processes themselves never start lab workers and never import torch.
With `prepare=True` (the default, for tests and scripts) the app migrates and publishes in its own
lifespan instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import Scope

from app.core import logs
from app.core.config import ROOT, Settings
from app.core.db import make_sessionmaker, web_engine
from app.services import startup
from app.services.errors import Conflict, DomainError, FieldError, NotFound
from app.services.jobs import labhost
from app.services.jobs.labhost import HostCapacity
from app.web import openapi
from app.web.csrf import CSRF_FORM_FIELD, CSRF_HEADER
from app.web.deps import LoginRequired, get_optional_user
from app.web.metrics import RequestTimer
from app.web.middleware import bodies, text
from app.web.middleware.admission import RETRY_AFTER_S, AdmissionGate, Lane
from app.web.middleware.headers import SecurityHeaders
from app.web.routes import (
    account,
    admin,
    api,
    artifacts,
    auth,
    authoring,
    charts,
    classes,
    classview,
    cluster,
    docs,
    drafts,
    grading,
    labs,
    lessons,
    lti,
    lti_pages,
    metrics,
    pages,
    reports,
    tools,
)
from app.web.templates import render
from labs import catalog

DOMAIN_STATUS: dict[type[DomainError], int] = {NotFound: 404, Conflict: 409}

# Pages (HTML, left out of the OpenAPI document) and the JSON API under /api/v1. A request is matched against
# the routes one by one in this order, so the most-read pages (lesson parts, the dashboard) come first: behind
# 26 other routes the matching was ~5% of a part page's time. Order matters where paths overlap: reports
# before lessons, so /lessons/{id}/report is not read as a part called "report" (tests/app/test_route_order.py).
PAGE_ROUTERS: tuple[APIRouter, ...] = tuple(
    m.router
    for m in (
        reports,
        lessons,
        pages,
        auth,
        account,
        labs,
        artifacts,
        cluster,
        authoring,
        classes,
        drafts,
        classview,
        grading,
        admin,
        tools,
        lti,
        lti_pages,
        docs,
        metrics,
    )
)
API_ROUTERS: tuple[APIRouter, ...] = tuple(m.api for m in (api, artifacts, tools, reports, charts))


def _wants_json(request: Request) -> bool:
    """Errors are JSON for the API and HTML pages in the site's look everywhere else."""
    return request.url.path.startswith("/api/")


def _with_headers(response: Response, headers: Mapping[str, str] | None) -> Response:
    response.headers.update(headers or {})
    return response


def _error_response(request: Request, status: int, detail: str, headers: Mapping[str, str] | None = None) -> Response:
    if _wants_json(request):
        return JSONResponse({"detail": detail}, status_code=status, headers=headers)
    # a refused form token is not a missing role: the page then says nothing about roles
    stale = CSRF_HEADER in {k.lower() for k in headers or {}}
    ctx = {"status": status, "detail": detail, "stale_token": stale, "resend": _resend(request) if stale else None}

    def page() -> Response:
        return _with_headers(render(request, "error.html", ctx, status_code=status), headers)

    if hasattr(request.state, "user") or "session" not in request.scope or status >= 500:
        return page()  # a 5xx may be the database itself failing (overload): never ask it again here
    # No route ran (an unknown address): look the user up, so the page keeps their navigation.
    with request.app.state.sessions() as db:
        try:
            get_optional_user(request, db)
        except (HTTPException, sa_exc.SQLAlchemyError):  # a bad API token, or a database that cannot answer now
            request.state.user = None
        return page()


def _resend(request: Request) -> dict[str, object] | None:
    """A plain form (no JavaScript) refused for an out-of-date token is offered back, filled in, with the fresh
    token, so nothing typed is lost: with scripts the page renews the token itself (static/requests.js).

    Only for a post from one of our own pages: the browser's Sec-Fetch-Site, which no page can set, says so.
    Another site's form gets the refusal alone, never a page that would send its fields with a valid token.
    Forms with a password or a file are not offered back: the password is not written into a page, and a file
    cannot be."""
    form = getattr(request.state, "posted_form", None)
    if (
        form is None
        or request.method != "POST"
        or request.headers.get("hx-request")
        or request.headers.get("sec-fetch-site") != "same-origin"
    ):
        return None
    fields = [(k, v) for k, v in form.multi_items() if k != CSRF_FORM_FIELD]
    if any(not isinstance(v, str) or "password" in k.lower() for k, v in fields):
        return None
    long = [(k, v) for k, v in fields if "\n" in v or len(v) > 60]
    return {
        "action": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        "long": long,
        "short": [(k, v) for k, v in fields if (k, v) not in long],
    }


# The posts that hash or check a password (argon2, app/core/passwords.py) wait in the admission gate's "passwords"
# lane; the password change and reset-link forms are listed with them.
PASSWORD_PATHS = frozenset({"/login", "/register", "/account/password"})
PASSWORD_PREFIXES = ("/reset/",)


def _lane_of(scope: Scope) -> str:
    path = scope["path"]
    if scope["method"] == "POST" and (path in PASSWORD_PATHS or path.startswith(PASSWORD_PREFIXES)):
        return "passwords"
    return "pages"


def _busy(request: Request, why: str) -> Response:
    detail = f"The course is busy ({why}); nothing was changed. Try again in {RETRY_AFTER_S} seconds."
    return _error_response(request, 503, detail, {"Retry-After": str(RETRY_AFTER_S)})


def create_app(
    settings: Settings | None = None, *, host: HostCapacity | None = None, prepare: bool = True, settle: bool = False
) -> FastAPI:
    """The web app. `host`: what the lab workers can run (default: CPU only, from os.cpu_count()).
    `prepare`: migrate and publish lessons in the lifespan (False when the serving parent already did).
    `settle`: a serving process (not tests, which build many apps in one process) builds the lessons and
    freezes its start-up objects out of the garbage collector's full passes (startup.settle)."""
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Threads for sync routes and dependencies: one per request the gate admits (anyio's default is 40,
        # which let 40 requests wait on a pool of 15 connections).
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.web_threads
        if prepare:
            startup.prepare(settings)
        app.state.content_errors = startup.content_errors(settings)
        if settle:
            startup.settle(app.state.sessions)
        try:
            yield
        finally:
            app.state.engine.dispose()

    app = FastAPI(
        title=openapi.TITLE,
        version=openapi.version(),
        description=openapi.DESCRIPTION,
        lifespan=lifespan,
        openapi_url="/api/v1/openapi.json",
        docs_url=None,  # app/web/routes/docs.py serves the vendored Swagger UI (FastAPI's loads it from a CDN)
        redoc_url=None,
        # Body limits are set per router below, not here: an app-wide limit wraps the admission gate, and would
        # turn the gate's 503 to an upload larger than it into "413 Content Too Large".
        dependencies=[Depends(bodies.received_within_limit), Depends(text.no_nul_characters)],
    )
    openapi.install(app, catalog.LABS.values())  # the labs of the catalog as it is now, when the app is made
    app.state.settings = settings
    app.state.host = host or HostCapacity.local_default()
    app.state.engine = web_engine(settings)
    app.state.sessions = make_sessionmaker(app.state.engine)

    # The signed cookie carries the server-side session's token and the CSRF token (app/services/accounts/sessions.py);
    # HttpOnly and SameSite=Lax always, Secure in production.
    app.add_middleware(
        SessionMiddleware,
        secret_key=settings.secret_key,
        session_cookie="course_session",
        max_age=settings.session_max_s,
        same_site="lax",
        https_only=settings.secure_cookies,
    )
    # Added last, so outermost of ours: a request refused for overload costs no cookie decoding or lookup.
    app.add_middleware(
        AdmissionGate,
        lanes=[
            Lane("pages", settings.web_concurrency, settings.web_queue, settings.web_queue_timeout_s),
            # A class registering at once queues here, not in "pages": 200 hashes of ~35 ms on one core are
            # seconds of work, minutes on a host busy with labs, and a 503 would only send them back to the end.
            Lane("passwords", settings.password_concurrency, settings.web_queue, 8 * settings.web_queue_timeout_s),
        ],
        lane_of=_lane_of,
    )
    app.add_middleware(SecurityHeaders, hsts=settings.secure_cookies)  # error answers carry them too
    # Outermost: a request's time includes its wait at the admission gate (app/web/metrics.py).
    app.add_middleware(RequestTimer)
    app.mount("/static", StaticFiles(directory=ROOT / "static"), name="static")

    app.state.content_errors = {}
    # Bodies are counted as they arrive, whatever the transfer encoding (Starlette's RequestBodyLimitMiddleware);
    # DEFAULT_LIMIT is the limit of every route that names none (app/web/middleware/bodies.py), checked before any
    # other dependency.
    for router in PAGE_ROUTERS:
        app.include_router(router, include_in_schema=False, max_body_size=bodies.DEFAULT_LIMIT)
    for router in API_ROUTERS:
        app.include_router(router, max_body_size=bodies.DEFAULT_LIMIT)

    @app.exception_handler(LoginRequired)
    async def login_required(request: Request, exc: LoginRequired) -> Response:
        if _wants_json(request):
            return JSONResponse({"detail": "Log in first."}, status_code=401)
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        if request.headers.get("hx-request"):
            return JSONResponse({"detail": "Log in first."}, status_code=401, headers={"HX-Redirect": "/login"})
        return RedirectResponse(f"/login?next={target}", status_code=303)

    @app.exception_handler(StarletteHTTPException)  # FastAPI's HTTPException and the router's own 404/405
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 413:  # the body limit counted past this route's limit: say what the limit is
            return _error_response(request, 413, bodies.too_large_message(request.scope))
        detail = str(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":  # no route matched: say which address
            detail = f"There is no page at {request.url.path}."
        return _error_response(request, exc.status_code, detail, exc.headers)

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception) -> Response:
        """A bug: the page says so in plain words. Starlette re-raises the exception after this response, so
        the server logs the traceback once; it never reaches the page."""
        detail = "Something went wrong on our side. Nothing you saved was lost; try again, or come back later."
        try:
            return _error_response(request, 500, detail)
        except Exception:  # the page itself failed to render: plain text, still not a traceback
            return Response(detail, status_code=500, media_type="text/plain")

    @app.exception_handler(sa_exc.TimeoutError)
    async def pool_exhausted(request: Request, exc: sa_exc.TimeoutError) -> Response:
        """No database connection came free in time: overload, told as such (never a 500)."""
        return _busy(request, "no database connection came free in time")

    @app.exception_handler(sa_exc.OperationalError)
    async def database_busy(request: Request, exc: sa_exc.OperationalError) -> Response:
        if "database is locked" not in str(exc.orig):  # only SQLite's lock wait is overload; the rest is a fault
            raise exc
        return _busy(request, "the database stayed locked by other writers")

    @app.exception_handler(DomainError)
    async def domain_error(request: Request, exc: DomainError) -> Response:
        """The one place a service's NotFound / Conflict becomes an HTTP status."""
        status = next((code for kind, code in DOMAIN_STATUS.items() if isinstance(exc, kind)), 400)
        return _error_response(request, status, exc.message)

    @app.exception_handler(FieldError)
    async def field_error(request: Request, exc: FieldError) -> Response:
        """A FieldError no route caught and showed next to its field: still a 422 naming the field."""
        return _error_response(request, 422, str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        errors = []
        for err in exc.errors():
            loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path", "form")]
            field = ".".join(loc) or "request"
            errors.append({"field": field, "message": f"{field}: {err.get('msg', 'invalid')}"})
        detail = "; ".join(e["message"] for e in errors)
        if _wants_json(request):
            return JSONResponse({"detail": detail, "errors": errors}, status_code=422)
        return render(request, "error.html", {"status": 422, "detail": detail}, status_code=422)

    return app


def web_process() -> FastAPI:
    """Factory for each web process of `python -m app serve` with COURSE_WEB_PROCESSES > 1.

    The serving parent has already checked the labs, probed the host (handed down in the environment),
    migrated and published, and it runs the lab workers; this process only serves HTTP.
    """
    from app.executors.supervise import die_with_parent

    die_with_parent()  # a web process must not outlive `serve`, even after kill -9 of it
    settings = Settings.from_env()
    logs.configure(settings.log_level, access_log=settings.access_log, fmt=settings.log_format)
    return create_app(settings, host=labhost.from_environment(), prepare=False, settle=True)
