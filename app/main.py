"""The FastAPI application factory.

    create_app(settings, host=..., prepare=...)   tests and `python -m app serve` with one web process
    app.main:web_process                         the factory each of several web processes calls

`python -m app serve` (app/serve.py) checks the labs, probes this host, migrates the database,
publishes the lessons and starts the embedded lab workers once, then serves one or several web
processes; the web processes themselves never start lab workers and never import torch.
With `prepare=True` (the default, for tests and scripts) the app migrates and publishes in its own
lifespan instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from app import logs, startup
from app.config import ROOT, Settings
from app.db import make_engine, make_sessionmaker
from app.deps import LoginRequired, get_optional_user
from app.routes import account, api, artifacts, auth, authoring, grading, labs, lessons, pages, reports, tools
from app.services import labhost
from app.services.errors import Conflict, DomainError, FieldError, NotFound
from app.services.labhost import HostCapacity
from app.web import render

DOMAIN_STATUS: dict[type[DomainError], int] = {NotFound: 404, Conflict: 409}

# Pages (HTML, left out of the OpenAPI document) and the JSON API under /api/v1. Order matters where paths
# overlap: reports before lessons, so /lessons/{id}/report is not read as a part called "report".
PAGE_ROUTERS: tuple[APIRouter, ...] = tuple(
    m.router for m in (account, auth, pages, reports, lessons, labs, artifacts, authoring, grading, tools)
)
API_ROUTERS: tuple[APIRouter, ...] = tuple(m.api for m in (api, artifacts, tools, reports))


def _wants_json(request: Request) -> bool:
    """Errors are JSON for the API and HTML pages in the site's look everywhere else."""
    return request.url.path.startswith("/api/")


def _error_response(request: Request, status: int, detail: str, headers: Mapping[str, str] | None = None) -> Response:
    if _wants_json(request):
        return JSONResponse({"detail": detail}, status_code=status, headers=headers)
    ctx = {"status": status, "detail": detail}
    if hasattr(request.state, "user") or "session" not in request.scope:
        return render(request, "error.html", ctx, status_code=status)
    # No route ran (an unknown address): look the user up, so the page keeps their navigation.
    with request.app.state.sessions() as db:
        try:
            get_optional_user(request, db)
        except HTTPException:  # a bad API token on a page address: show the page without a user
            request.state.user = None
        return render(request, "error.html", ctx, status_code=status)


MAX_BODY_BYTES = 25 * 1024 * 1024  # the largest legitimate body is a 20 MB bundle upload plus form fields


class BodySizeLimit:
    """Refuse a request whose declared body is too large before anything reads or spools it."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES):
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = dict(scope["headers"]).get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > self.limit):
                response = JSONResponse(
                    {"detail": f"request body: at most {self.limit // (1024 * 1024)} MB is accepted"}, status_code=413
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(settings: Settings | None = None, *, host: HostCapacity | None = None, prepare: bool = True) -> FastAPI:
    """The web app. `host`: what the lab workers can run (default: CPU only, from os.cpu_count()).
    `prepare`: migrate and publish lessons in the lifespan (False when the serving parent already did)."""
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if prepare:
            startup.prepare(settings)
        app.state.content_errors = startup.content_errors(settings)
        try:
            yield
        finally:
            app.state.engine.dispose()

    app = FastAPI(
        title="GPU systems course",
        lifespan=lifespan,
        openapi_url="/api/v1/openapi.json",
        docs_url=None,  # FastAPI's default page loads Swagger UI from a CDN: blank offline; served below instead
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.host = host or HostCapacity.local_default()
    app.state.engine = make_engine(settings.db_url)
    app.state.sessions = make_sessionmaker(app.state.engine)

    app.add_middleware(
        SessionMiddleware,
        secret_key=settings.secret_key,
        session_cookie="course_session",
        max_age=14 * 24 * 3600,
        same_site="lax",
        https_only=settings.secure_cookies,
    )
    app.add_middleware(BodySizeLimit)
    app.mount("/static", StaticFiles(directory=ROOT / "static"), name="static")

    app.state.content_errors = {}
    for router in PAGE_ROUTERS:
        app.include_router(router, include_in_schema=False)
    for router in API_ROUTERS:
        app.include_router(router)

    @app.get("/api/v1/docs", include_in_schema=False)
    async def api_docs() -> HTMLResponse:
        """Swagger UI from static/vendor/swagger-ui (VERSIONS.md), so the docs work with no network.
        validatorUrl off: Swagger UI would otherwise send the spec to validator.swagger.io."""
        return get_swagger_ui_html(
            openapi_url="/api/v1/openapi.json",
            title=f"{app.title} · API",
            swagger_js_url="/static/vendor/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url="/static/vendor/swagger-ui/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
            swagger_ui_parameters={"validatorUrl": None},
        )

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
    settings = Settings.from_env()
    logs.configure(settings.log_level)
    return create_app(settings, host=labhost.from_environment(), prepare=False)
