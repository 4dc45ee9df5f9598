"""GET /metrics: Prometheus's scrape (app/web/metrics.py). Off unless COURSE_METRICS_TOKEN is set, and then only
for a request that carries it (`Authorization: Bearer <token>`), so the public port tells nobody else how busy the
course is or which labs its learners run."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from app.web import metrics

router = APIRouter()


@router.get("/metrics")
def scrape(request: Request) -> Response:
    # Refusals are plain text, like the exposition: a scraper or an operator's curl reads them, not a browser.
    token = request.app.state.settings.metrics_token
    if not token:
        return PlainTextResponse("Metrics are off on this server: set COURSE_METRICS_TOKEN to turn them on.\n", 404)
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        return PlainTextResponse(
            "Metrics need the token: send the header `Authorization: Bearer <COURSE_METRICS_TOKEN>`.\n",
            401,
            headers={"WWW-Authenticate": 'Bearer realm="metrics"', "Cache-Control": "no-store"},
        )
    body = metrics.exposition(request.app.state.sessions, request.app.state.settings.executor)
    return Response(body, media_type=metrics.CONTENT_TYPE, headers={"Cache-Control": "no-store"})
