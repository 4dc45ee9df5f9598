"""Many learners at once: no 500s, no 30 s hangs; overload queues or is told to come back (503, Retry-After).

What this guards against: 60 learners loading six lesson parts at once got 40 answers that waited exactly 30 s and
failed with `QueuePool limit of size 5 overflow 10 reached`, on SQLite and PostgreSQL alike: requests held
a database connection while they waited for a thread and while the page rendered, and anyio's 40 threads
fed a pool of 15 connections. Now the admission gate (app/web/middleware/admission.py), the thread pool and the database
pool are sized from one setting, and a request holds a connection only around its queries.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import time
from collections import Counter
from collections.abc import Iterator

import anyio.to_thread
import httpx2
import itsdangerous
import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from app.core.config import Settings, SettingsError
from app.core.models import User, UserRole
from app.core.passwords import hash_password
from app.services.accounts import sessions
from app.web.csrf import SESSION_KEY
from app.web.deps import OptionalUser, get_current_user
from app.web.middleware.admission import RETRY_AFTER_S, Lane
from tests.app.live import LIVE_SECRET, course_server
from tests.conftest import _new_pg_database, run_async

LESSON = "transformer-scaling"
PARTS = ("orient", "history", "mental-model", "code-trace", "deep-dives", "practice")


def learners_with_sessions(db_url: str, n: int) -> list[str]:
    """`n` learners, each logged in: a server-side session and the signed cookie a browser would hold for it
    (API tokens open /api/v1 only). Made in the database directly: registering 60 accounts would spend the
    test's time on 60 password hashes."""
    engine = create_engine(db_url)
    password_hash = hash_password("correct horse")
    signer = itsdangerous.TimestampSigner(LIVE_SECRET)
    out = []
    with Session(engine) as db:
        for i in range(n):
            user = User(email=f"load{i}@example.org", display_name=f"Load {i}", password_hash=password_hash)
            user.role_rows = [UserRole(role="learner")]
            db.add(user)
            db.commit()
            sid = sessions.start(db, user=user, idle_s=3600, max_s=3600)
            db.commit()
            payload = base64.b64encode(json.dumps({SESSION_KEY: sid}).encode())
            out.append(signer.sign(payload).decode())
    engine.dispose()
    return out


async def load_parts(base: str, cookie: str, tally: Counter, slowest: list[float]) -> None:
    async with httpx2.AsyncClient(
        base_url=base, trust_env=False, timeout=120, cookies={"course_session": cookie}
    ) as client:
        for part in PARTS:
            started = time.monotonic()
            try:
                r = await client.get(f"/lessons/{LESSON}/{part}")
            except httpx2.HTTPError as exc:
                tally[type(exc).__name__] += 1
                continue
            slowest.append(time.monotonic() - started)
            tally[r.status_code] += 1
            if r.status_code == 503:
                tally["503 with Retry-After"] += r.headers.get("retry-after") == str(RETRY_AFTER_S)


def class_at_once(base: str, learner_cookies: list[str]) -> tuple[Counter, float]:
    tally: Counter = Counter()
    took: list[float] = []

    async def run() -> None:
        await asyncio.gather(*(load_parts(base, t, tally, took) for t in learner_cookies))

    run_async(run())
    return tally, max(took, default=0.0)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'course.db'}"
    return _new_pg_database(request.getfixturevalue("postgres_server"))


def test_sixty_learners_loading_six_parts_at_once_all_get_their_pages(tmp_path, any_db_url):
    """The overload, with the shipped settings: 360 pages at once, every one a 200."""
    with course_server(tmp_path, any_db_url) as live:
        learner_cookies = learners_with_sessions(any_db_url, 60)
        tally, slowest = class_at_once(live.base, learner_cookies)
        log = live.log.read_text()
    assert tally == Counter({200: 360}), (tally, log[-3000:])
    assert "QueuePool limit" not in log and "Traceback" not in log
    assert slowest < 30, f"an answer took {slowest:.1f} s"


def test_overload_is_queued_or_answered_503_with_retry_after_never_a_hang(tmp_path):
    """One request at a time, two waiting at most, for at most one second: a burst gets 200s and quick 503s."""
    db_url = f"sqlite:///{tmp_path / 'course.db'}"
    env = {"COURSE_WEB_CONCURRENCY": "1", "COURSE_WEB_QUEUE": "2", "COURSE_WEB_QUEUE_TIMEOUT": "1"}
    with course_server(tmp_path, db_url, **env) as live:
        learner_cookies = learners_with_sessions(db_url, 40)
        tally, slowest = class_at_once(live.base, learner_cookies)
    assert set(tally) <= {200, 503, "503 with Retry-After"}, tally
    assert tally[200] >= 6 and tally[503] >= 1, tally
    assert tally["503 with Retry-After"] == tally[503]
    assert slowest < 10, f"an answer took {slowest:.1f} s: a refused request must be answered at once"


# ---------------------------------------------------------------- in-process: pool, threads, release


@pytest.fixture
def small_app(settings):
    from app.web.factory import create_app

    return create_app(dataclasses.replace(settings, web_concurrency=3, web_queue_timeout_s=1.0))


@pytest.fixture
def small_client(small_app) -> Iterator:
    from fastapi.testclient import TestClient

    from tests.conftest import Browserless

    with TestClient(small_app) as c:
        yield Browserless(c)


def test_threads_and_database_pool_are_sized_from_one_setting(small_app, small_client):
    settings = small_app.state.settings
    assert settings.web_threads == 3 + settings.password_concurrency
    assert small_app.state.engine.pool.size() == settings.web_threads
    tokens_now = small_client.portal.call(lambda: anyio.to_thread.current_default_thread_limiter().total_tokens)
    assert tokens_now == settings.web_threads


def test_an_exhausted_pool_is_a_503_with_retry_after_not_a_500(small_app, small_client):
    small_client.register("ann@example.org")
    engine = small_app.state.engine
    held = [engine.connect() for _ in range(engine.pool.size() + engine.pool._max_overflow)]
    try:
        started = time.monotonic()
        r = small_client.get(f"/lessons/{LESSON}/orient")
        assert r.status_code == 503 and r.headers["retry-after"] == str(RETRY_AFTER_S)
        assert "busy" in r.text and time.monotonic() - started < 10
    finally:
        for conn in held:
            conn.close()
    assert small_client.get(f"/lessons/{LESSON}/orient").status_code == 200


def test_no_connection_is_held_after_the_user_lookup_or_while_a_page_renders(small_app, small_client, monkeypatch):
    """Between the user lookup and the handler (a thread hop away) and during the render, the request's
    session has given its connection back to the pool. Lesson parts look the user up on the event loop right
    before their own reads (app/web/deps.py Viewer: no hop in between), so for them only the render is checked."""
    from app.web import templates as web

    small_client.register("ann@example.org")
    pool = small_app.state.engine.pool
    seen: dict[str, list[int]] = {"after lookup": [], "render": []}

    async def probe(user: OptionalUser):
        seen["after lookup"].append(pool.checkedout())
        return await get_current_user(user)

    real = web.templates.TemplateResponse

    def recording(*args, **kwargs):
        seen["render"].append(pool.checkedout())
        return real(*args, **kwargs)

    small_app.dependency_overrides[get_current_user] = probe
    monkeypatch.setattr(web.templates, "TemplateResponse", recording)
    pages = ("/jobs", "/reports", "/account", "/labs")  # CurrentUser routes: lookup, hop, handler, render
    for page in pages:
        assert small_client.get(page).status_code == 200
    for part in PARTS:
        assert small_client.get(f"/lessons/{LESSON}/{part}").status_code == 200
    assert seen == {"after lookup": [0] * len(pages), "render": [0] * (len(pages) + len(PARTS))}


def test_a_bad_concurrency_setting_names_the_variable():
    with pytest.raises(SettingsError, match="COURSE_WEB_CONCURRENCY: got 0, expected a whole number from 1 to 256"):
        Settings.from_env({"COURSE_WEB_CONCURRENCY": "0"})


# ---------------------------------------------------------------- the gate's lanes


def test_a_lane_admits_in_order_queues_a_bounded_number_and_times_out():
    async def scenario() -> list[str]:
        lane = Lane("pages", concurrency=1, queue=1, timeout_s=0.2)
        events: list[str] = []
        assert await lane.acquire() == ""  # the one slot
        waiting = asyncio.create_task(lane.acquire())
        await asyncio.sleep(0)
        events.append(await lane.acquire())  # the queue of one is full
        lane.release()  # handed to the waiter
        events.append(await waiting)
        events.append(await lane.acquire())  # slot taken, queue empty: waits 0.2 s, then gives up
        lane.release()
        events.append(await lane.acquire())  # free again
        events.append(f"free={lane.free} waiting={len(lane.waiters)}")
        return events

    assert run_async(scenario()) == ["queue full", "", "waited too long", "", "free=0 waiting=0"]


def test_a_password_post_waits_in_its_own_lane():
    from app.web.factory import _lane_of

    def lane(method: str, path: str) -> str:
        return _lane_of({"type": "http", "method": method, "path": path})

    assert lane("POST", "/register") == lane("POST", "/login") == lane("POST", "/reset/abc") == "passwords"
    assert lane("GET", "/login") == lane("POST", "/lessons/x/progress/orient/done") == "pages"
