"""The JSON API's documentation in the vendored Swagger UI (static/vendor/swagger-ui).

    GET /api/v1/docs   the page: Swagger UI reading /api/v1/openapi.json
    GET /docs          where people look for it first: sent on to /api/v1/docs

FastAPI's built-in page loads Swagger UI from a CDN and starts it with an inline script; this one loads
both from /static, so it works offline and under the pages' Content-Security-Policy.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.web.templates import templates

router = APIRouter()
API_DOCS = "/api/v1/docs"


@router.get(API_DOCS)
def api_docs(request: Request) -> Response:
    return templates.TemplateResponse(request, "api_docs.html", {})


@router.get("/docs")
def docs(request: Request) -> Response:
    return RedirectResponse(API_DOCS, status_code=303)
