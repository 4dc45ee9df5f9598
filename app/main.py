"""The FastAPI application factory.

    uvicorn --factory app.main:create_app     (what `python -m app serve` runs)

On start it applies the database migrations and, in the embedded mode, starts the worker
process(es) that run lab jobs; on shutdown it stops them.
"""

from __future__ import annotations

import subprocess
import sys
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.sessions import SessionMiddleware

from app import migrate
from app.config import ROOT, Settings
from app.db import make_engine, make_sessionmaker
from app.deps import LoginRequired
from app.services import lessons as lesson_service
from app.web import render


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or "application/json" in request.headers.get("accept", "")


def _start_workers(settings: Settings) -> list[subprocess.Popen]:
    return [
        subprocess.Popen([sys.executable, "-m", "app", "worker"], cwd=ROOT) for _ in range(settings.embedded_workers)
    ]


MAX_BODY_BYTES = 25 * 1024 * 1024  # the largest legitimate body is a 20 MB bundle upload plus form fields


class BodySizeLimit:
    """Refuse a request whose declared body is too large before anything reads or spools it."""

    def __init__(self, app, limit: int = MAX_BODY_BYTES):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            length = dict(scope["headers"]).get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > self.limit):
                response = JSONResponse(
                    {"detail": f"request body: at most {self.limit // (1024 * 1024)} MB is accepted"}, status_code=413
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        migrate.upgrade(settings.db_url)
        with app.state.sessions() as db:
            app.state.content_errors = lesson_service.sync_from_files(db, settings.lessons_dir)
        workers = _start_workers(settings)
        try:
            yield
        finally:
            for proc in workers:
                proc.terminate()
            for proc in workers:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            app.state.engine.dispose()

    app = FastAPI(
        title="GPU systems course",
        lifespan=lifespan,
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
    )
    app.state.settings = settings
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

    from app.routes import account, api, auth, authoring, grading, labs, lessons, pages, reports, tools

    app.state.content_errors = {}
    # reports before lessons: /lessons/{id}/report must not be read as a part called "report"
    for module in (account, auth, pages, reports, lessons, labs, authoring, grading):
        app.include_router(module.router, include_in_schema=False)
    app.include_router(tools.router, include_in_schema=False)
    app.include_router(api.router)
    app.include_router(tools.api)
    app.include_router(reports.api)

    @app.exception_handler(LoginRequired)
    async def login_required(request: Request, exc: LoginRequired):
        if _wants_json(request):
            return JSONResponse({"detail": "Log in first."}, status_code=401)
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        if request.headers.get("hx-request"):
            return JSONResponse({"detail": "Log in first."}, status_code=401, headers={"HX-Redirect": "/login"})
        return RedirectResponse(f"/login?next={target}", status_code=303)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        if _wants_json(request):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
        return render(
            request, "error.html", {"status": exc.status_code, "detail": exc.detail}, status_code=exc.status_code
        )

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
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
