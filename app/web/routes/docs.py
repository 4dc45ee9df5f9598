"""GET /api/v1/docs: the JSON API's documentation in the vendored Swagger UI (static/vendor/swagger-ui).

FastAPI's built-in page loads Swagger UI from a CDN and starts it with an inline script; this one loads
both from /static, so it works offline and under the pages' Content-Security-Policy.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.web.templates import templates

router = APIRouter()


@router.get("/api/v1/docs")
def api_docs(request: Request) -> Response:
    return templates.TemplateResponse(request, "api_docs.html", {})
