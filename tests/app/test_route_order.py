"""Every route is reachable: no route listed earlier takes a request meant for a later one.

The routers are included most-read first (app/web/factory.py PAGE_ROUTERS), because a request is matched against
the routes one by one. Reordering them must never let a pattern such as /lessons/{lesson_id}/{part_id}
swallow a fixed path such as /lessons/{lesson_id}/report. Each route gets a request for a concrete path of
its own pattern, through the whole app (middleware, routing), and the route that matched is read back from
the ASGI scope: it must be that route, whatever the request's status (a login redirect, a CSRF refusal).
"""

from __future__ import annotations

import re

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from app.web.factory import API_ROUTERS, PAGE_ROUTERS


def _concrete(path: str) -> str:
    path = re.sub(r"\{[^}:]+:path\}", "a/b.json", path)
    return re.sub(r"\{[^}]+\}", "7", path)


ROUTES = [
    (route, method)
    for router in PAGE_ROUTERS + API_ROUTERS
    for route in router.routes
    if isinstance(route, APIRoute)
    for method in sorted(route.methods)
]


def test_the_routes_cover_what_the_site_serves():
    paths = {route.path for route, _ in ROUTES}
    assert {"/", "/lessons/{lesson_id}/{part_id}", "/lessons/{lesson_id}/report", "/login"} <= paths
    assert len(ROUTES) > 60


@pytest.fixture(params=["sqlite"])
def db_url(request, tmp_path) -> str:  # routing does not depend on the database: SQLite only
    return f"sqlite:///{tmp_path / 'course.db'}"


def test_each_route_is_the_one_that_answers_its_own_paths(app):
    matched: list[object] = []

    async def recording(scope, receive, send):
        await app(scope, receive, send)
        matched.append(scope.get("endpoint"))

    wrong = []
    with TestClient(recording, follow_redirects=False) as client:
        for route, method in ROUTES:
            path = _concrete(route.path)
            matched.clear()
            client.request(method, path)
            if matched != [route.endpoint]:
                got = getattr(matched[0], "__qualname__", matched[0]) if matched else None
                wrong.append(f"{method} {path}: meant for {route.endpoint.__qualname__}, answered by {got}")
    assert not wrong, "\n".join(wrong)
