"""The lesson page near the framework's speed: what the fast path keeps or skips must never show a
learner something stale, someone else's, or let an ended session in.

- pause and question slots are kept per (version, session, learner, newest answer and attempt): a new answer
  shows at once, another learner never sees it, and an old version's page stays closed;
- the pacing list is kept per parts done: marking a part done (or not) shows at once;
- lesson parts and the dashboard read the login on the event loop (app/web/deps.py Viewer): logout, lifetimes
  and the once-a-minute touch hold there exactly as on every other route;
- a serving process builds the lessons and freezes its start-up objects (startup.settle).
"""

from __future__ import annotations

import gc
import re
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select

from app.core.models import UserSession, utcnow
from app.services.learning import lessons as lesson_service
from tests.app.aging import age_sessions

LESSON = "transformer-scaling"
PART = f"/lessons/{LESSON}/deep-dives"
PRACTICE = f"/lessons/{LESSON}/practice"
COOKIE = "course_session"


@pytest.fixture
def learner(client):
    client.register("ann@example.org")
    return client


def _pause_id(html: str) -> str:
    return re.search(r'id="pause-([a-z0-9-]+)"', html).group(1)


def _pause_block(html: str, pause_id: str) -> str:
    start = html.index(f'<div class="pause" id="pause-{pause_id}">')
    return html[
        start : html.index('<div class="pause"', start + 1) if '<div class="pause"' in html[start + 1 :] else None
    ]


def test_a_new_pause_answer_shows_on_the_next_view_and_only_to_its_author(learner, make_client):
    bob = make_client()
    bob.register("bob@example.org", name="Bob")
    first = learner.get(PART).text  # fills the kept slots of Ann's session
    bob.get(PART)  # and of Bob's
    pause_id = _pause_id(first)
    assert "Your answer (saved" not in _pause_block(first, pause_id)
    learner.post(f"/lessons/{LESSON}/pauses/{pause_id}", {"answer": "amax history lags the spike", "version": 1})
    again = _pause_block(learner.get(PART).text, pause_id)
    assert "Your answer (saved" in again and "amax history lags the spike" in again
    learner.post(f"/lessons/{LESSON}/pauses/{pause_id}", {"answer": "second thoughts", "version": 1})
    assert "second thoughts" in _pause_block(learner.get(PART).text, pause_id)
    bobs = bob.get(PART).text
    assert "amax history lags the spike" not in bobs and "second thoughts" not in bobs
    assert "Your answer (saved" not in _pause_block(bobs, pause_id)


def test_each_session_gets_its_own_form_token(learner, make_client):
    """The slots carry the session's CSRF token: a second browser of the same learner gets its own."""
    learner.get(PART)
    laptop = make_client()
    laptop.login("ann@example.org")
    html = laptop.get(PART).text
    tokens = set(re.findall(r'name="csrf_token" value="([^"]+)"', html))
    assert len(tokens) == 1
    pause_id = _pause_id(html)
    r = laptop.post(f"/lessons/{LESSON}/pauses/{pause_id}", {"answer": "from the laptop", "version": 1})
    assert r.status_code == 200  # the token on the page is the one this session checks


def test_a_practice_attempt_shows_on_the_next_view(learner, db):
    lesson, version, _ = lesson_service.current(db, lesson_id=LESSON)
    qid, q = next((k, v) for k, v in lesson.questions.items() if v.kind == "single_choice")
    assert "last answer:" not in learner.get(PRACTICE).text.split(f'id="q-{qid}"')[1][:600]
    wrong = next(o for o in q.body.options if not o.correct)
    learner.post(f"/lessons/{LESSON}/questions/{qid}", {"answer": wrong.id, "version": version})
    assert "last answer: incorrect" in learner.get(PRACTICE).text.split(f'id="q-{qid}"')[1][:600]
    right = next(o for o in q.body.options if o.correct)
    learner.post(f"/lessons/{LESSON}/questions/{qid}", {"answer": right.id, "version": version})
    assert "last answer: correct" in learner.get(PRACTICE).text.split(f'id="q-{qid}"')[1][:600]


def test_an_old_version_stays_closed_after_the_current_one_was_shown(learner, db):
    lesson, version, _ = lesson_service.current(db, lesson_id=LESSON)
    current = learner.get(PART).text
    assert f'action="/lessons/{LESSON}/pauses/' in current
    row = lesson_service.latest_row(db, lesson_id=LESSON)
    files = dict(row.files)
    files["lesson.yaml"] = files["lesson.yaml"].replace("title: Transformer Scaling", "title: Transformer Scaling 2")
    new_version, errors = lesson_service.publish(db, lesson_id=LESSON, files=files, source="editor")
    assert errors == [] and new_version == version + 1
    old = learner.get(f"{PART}?v={version}").text
    assert f"You are reading version {version}" in old
    assert f'action="/lessons/{LESSON}/pauses/' not in old  # answers are closed on an old version
    new = learner.get(PART).text
    assert f'name="version" value="{new_version}"' in new and f'name="version" value="{version}"' not in new


def test_marking_a_part_done_shows_in_the_pacing_list_at_once(learner):
    def ticked(html: str) -> bool:
        nav = html.split('id="pacing"')[1].split("</nav>")[0]
        item = nav.split(f'href="/lessons/{LESSON}/orient"')[0].rsplit("<li", 1)[1]
        return "done" in item

    assert not ticked(learner.get(PART).text)
    learner.post(f"/lessons/{LESSON}/progress/orient/done", {"done": "1"})
    assert ticked(learner.get(PART).text)
    learner.post(f"/lessons/{LESSON}/progress/orient/done", {"done": "0"})
    assert not ticked(learner.get(PART).text)


@pytest.mark.parametrize("page", [PART, "/"])
def test_a_cookie_saved_before_logout_no_longer_opens_the_page(learner, make_client, page):
    saved = learner.client.cookies[COOKIE]
    assert learner.get(page).status_code == 200
    learner.post("/logout")
    thief = make_client()
    thief.client.cookies.set(COOKIE, saved)
    r = thief.get(page, follow_redirects=False)
    if page == "/":  # the dashboard is also the anonymous welcome page
        assert r.status_code == 200 and "Log out" not in r.text and "Log in" in r.text
    else:
        assert r.status_code == 303 and r.headers["location"] == f"/login?next={page}"


def test_lifetimes_and_the_touch_hold_on_the_lesson_page(learner, db, settings):
    age_sessions(db, last_seen_s=settings.session_idle_s - 120, created_s=settings.session_idle_s)
    assert learner.get(PART).status_code == 200  # due a touch: the lookup went to a worker thread and wrote it
    db.expire_all()
    assert utcnow() - db.scalar(select(UserSession.last_seen_at)) < timedelta(seconds=60)
    age_sessions(db, last_seen_s=settings.session_idle_s + 1, created_s=settings.session_idle_s + 1)
    r = learner.get(PART, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert db.scalar(select(UserSession.id)) is None  # deleted on sight, as on every route


def test_a_repeat_view_only_reads(learner, app):
    learner.get(PART)  # the first view records the visit (where "resume" goes) and may touch the session
    statements: list[str] = []

    def record(conn, cursor, statement, *args):
        statements.append(statement.lstrip().split(None, 1)[0].upper())

    event.listen(app.state.engine, "before_cursor_execute", record)
    try:
        assert learner.get(PART).status_code == 200
    finally:
        event.remove(app.state.engine, "before_cursor_execute", record)
    assert statements and set(statements) <= {"SELECT"}, statements


def _statements(app, path: str, client) -> tuple[list[str], str]:
    """The SQL statements one view of `path` runs (whole texts), and the page."""
    statements: list[str] = []

    def record(conn, cursor, statement, *args):
        statements.append(" ".join(statement.split()))

    event.listen(app.state.engine, "before_cursor_execute", record)
    try:
        r = client.get(path)
    finally:
        event.remove(app.state.engine, "before_cursor_execute", record)
    assert r.status_code == 200
    return statements, r.text


def _kinds(statements: list[str]) -> list[str]:
    """First words, leaving out the lesson_versions lookups that `current` keeps for CURRENT_TTL_S."""
    return [s.split(None, 1)[0].upper() for s in statements if "FROM lesson_versions" not in s]


def _notes_query(statement: str) -> bool:
    return "FROM lesson_versions" in statement and "lesson_versions.note !=" in statement


def test_the_updated_notice_costs_one_query_only_on_the_view_that_shows_it(learner, app, db):
    """The "updated since you last read it" notice comes from the progress rows the page reads anyway: a plain
    re-read runs the same statements with or without it, and the one view that shows it reads the notes once."""
    learner.get(PART)
    plain, page = _statements(app, PART, learner)  # a re-read: nothing due
    assert _kinds(plain) == ["SELECT", "SELECT"]  # the login lookup and the lesson state, nothing more
    visit, _ = _statements(app, PRACTICE, learner)  # a first view of another part: a visit, no notice
    assert not any(map(_notes_query, plain + visit)) and "updated since" not in page
    row = lesson_service.latest_row(db, lesson_id=LESSON)
    files = dict(row.files)
    files["lesson.yaml"] = files["lesson.yaml"].replace("title: Transformer Scaling", "title: Transformer Scaling 2")
    assert lesson_service.publish(db, lesson_id=LESSON, files=files, source="editor", note="new figures")[1] == []
    statements, shown = _statements(app, f"/lessons/{LESSON}/orient", learner)  # a first view, under version 2
    assert "version 1 → 2" in shown and "new figures" in shown
    assert sum(map(_notes_query, statements)) == 1
    assert _kinds(statements) == _kinds(visit)  # otherwise the same statements as any visit
    again, page = _statements(app, f"/lessons/{LESSON}/orient", learner)  # seen: a plain re-read again
    assert "updated since" not in page and not any(map(_notes_query, again)) and _kinds(again) == _kinds(plain)
    assert set(_kinds(again)) <= {"SELECT"}


def test_an_api_token_does_not_open_a_lesson_page(learner, app):
    """Tokens open /api/v1 only: a page read with one is refused in words, and so is a forged one."""
    made = learner.post("/account/tokens", {"name": "script"})
    token = re.search(r'id="new-token" class="token">([^<]+)<', made.text).group(1)
    with TestClient(app) as script:  # no cookie: the token alone
        r = script.get(PART, headers={"Authorization": f"Bearer {token}"}, follow_redirects=False)
        assert r.status_code == 403 and "/api/v1" in r.text and "Pause and reason" not in r.text
        bad = script.get(PART, headers={"Authorization": "Bearer cst_forged"}, follow_redirects=False)
        assert bad.status_code == 403 and "Pause and reason" not in bad.text


def test_a_serving_process_builds_the_lessons_and_freezes_start_up_objects(settings):
    from app.web.factory import create_app

    lesson_service._built.clear()
    before = gc.get_freeze_count()
    try:
        with TestClient(create_app(settings, settle=True)):
            assert any(key[0] == LESSON for key in lesson_service._built)  # built before any page asked
            assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
