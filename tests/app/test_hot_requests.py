"""The SQL statements of a class's most frequent requests, pinned so that none grows a query unnoticed (the
browser model of bench/class_browsers.py: an answer a minute, a part every few minutes, the home page, and in the
background the reading-time report and the page's job-status poll, pinned in test_reading_time.py and
test_live_jobs.py). Each count is what the request needs: the login's one read, then its own reads and writes.
Counted on both databases: a dialect's extra round trip would show here."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import event

from app.services.learning import lessons as lesson_service

pytestmark = pytest.mark.both_backends

LESSON = "transformer-scaling"


@pytest.fixture
def learner(client, monkeypatch):
    # Current lesson versions are re-read every CURRENT_TTL_S: on a busy machine one measured request would, and
    # its count would be one more. Only the request's own statements are pinned here.
    monkeypatch.setattr(lesson_service, "CURRENT_TTL_S", 3600.0)
    client.register("ann@example.org")
    return client


def _count(app, send) -> list[str]:
    seen: list[str] = []

    def record(conn, cursor, statement, *args):
        seen.append(" ".join(statement.split())[:60].upper())

    event.listen(app.state.engine, "before_cursor_execute", record)
    try:
        send()
    finally:
        event.remove(app.state.engine, "before_cursor_execute", record)
    return seen


def _practice_answer(client) -> tuple[str, dict, str]:
    page = client.get(f"/lessons/{LESSON}/practice").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    for action, body in re.findall(
        r'<form method="post" action="(/lessons/[^"]+/questions/[^"/]+)"(.*?)</form>', page, re.S
    ):
        if m := re.search(r'type="radio" id="[^"]+" name="answer" value="([^"]+)"', body):
            hidden = dict(re.findall(r'<input type="hidden" name="(version|seed)" value="([^"]*)"', body))
            return action, {"answer": m.group(1), **hidden}, token
    raise AssertionError("no choice question on the practice page")


def test_an_answer_reads_the_login_writes_the_try_and_reads_the_latest_once(learner, app):
    action, form, token = _practice_answer(learner)
    headers = {"HX-Request": "true", "X-CSRF-Token": token}
    learner.client.post(action, data=form, headers=headers)  # the first try, so the reads below find rows
    seen = _count(app, lambda: learner.client.post(action, data=form, headers=headers).raise_for_status())
    assert len(seen) == 4, seen
    assert "USER_SESSIONS" in seen[0] and seen[1].startswith("INSERT INTO ATTEMPTS")
    assert all(s.startswith("SELECT") for s in seen[2:]), seen  # the newest try and answer per item, one each


def test_a_part_swapped_in_by_htmx_reads_the_login_and_the_learners_trail(learner, app):
    learner.get(f"/lessons/{LESSON}/orient")  # the visit is written once; a re-read writes nothing
    seen = _count(app, lambda: learner.get(f"/lessons/{LESSON}/orient", headers={"HX-Request": "true"}))
    assert len(seen) == 2 and all(s.startswith("SELECT") for s in seen), seen


def test_the_home_page_reads_the_login_the_dashboard_and_the_learners_classes(learner, app):
    learner.get("/")
    seen = _count(app, lambda: learner.get("/"))
    assert len(seen) == 3 and all(s.startswith("SELECT") for s in seen), seen
    assert "USER_SESSIONS" in seen[0] and "CLASSES" in seen[2], seen
