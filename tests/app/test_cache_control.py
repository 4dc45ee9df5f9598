"""Every page drawn for a session is sent with Cache-Control: no-store, so neither a shared cache nor
the browser's disk cache keeps a learner's answers, jobs or grades (Back after a log-out on a shared computer shows
nothing); the public static files keep their validators. tests/browser/test_no_eval_no_store.py checks in
Chromium that pages and htmx swaps still work with it."""

from __future__ import annotations

import pytest

from app.web.middleware.headers import SecurityHeaders
from tests.conftest import run_async

HX = {"HX-Request": "true"}


@pytest.fixture
def learner(client):
    client.register("ann@example.org")
    return client


@pytest.mark.parametrize(
    ("path", "status", "headers"),
    [
        ("/", 200, {}),
        ("/account", 200, {}),
        ("/jobs", 200, {}),
        ("/lessons/transformer-scaling/practice", 200, {}),
        ("/play/fp8-range?amax=10", 200, HX),  # an htmx fragment
        ("/api/v1/me", 200, {}),  # JSON, with the session's CSRF token in it
        ("/jobs/999999", 404, {}),  # an error page
        ("/instructor", 403, {}),
    ],
)
def test_a_logged_in_learners_answers_are_never_stored(learner, path, status, headers):
    r = learner.get(path, headers=headers)
    assert r.status_code == status, path
    assert r.headers["cache-control"] == "no-store", path


def test_pages_before_login_are_not_stored_either(client):
    """The login form's CSRF token belongs to the session that fetched it; a redirect to it names the page asked for."""
    for path in ("/login", "/register"):
        assert client.get(path).headers["cache-control"] == "no-store", path
    away = client.get("/jobs", follow_redirects=False)
    assert away.status_code == 303 and away.headers["cache-control"] == "no-store"


def test_a_response_with_its_own_cache_control_keeps_it():
    """The account page's new-token answer says no-store itself; any other policy a route sets is left alone."""
    sent = []

    async def app(scope, receive, send):
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"cache-control", b"private, max-age=60")]}
        )
        await send({"type": "http.response.body", "body": b""})

    async def record(message):
        sent.append(message)

    run_async(SecurityHeaders(app)({"type": "http", "path": "/x"}, None, record))
    values = [v for k, v in sent[0]["headers"] if k == b"cache-control"]
    assert values == [b"private, max-age=60"]


@pytest.mark.parametrize("path", ["/static/app.css", "/static/vendor/htmx/htmx.min.js", "/static/htmx-noeval.js"])
def test_static_files_keep_their_caching(client, path):
    r = client.get(path)
    assert r.status_code == 200 and "cache-control" not in r.headers
    assert r.headers["etag"] and r.headers["last-modified"]
    again = client.get(path, headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304  # revalidated, not downloaded again
