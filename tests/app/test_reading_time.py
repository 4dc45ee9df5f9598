"""Reading time as the page reports it (static/reading.js): a form body carrying the page's CSRF token, at most once a
minute and when the part is left. The server credits no report more than MAX_REPORT_S, nor more than the wall time
since the part's last accepted report (two tabs, or a forged report, cannot add faster than a clock), and a
report costs the login's read and one UPDATE."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import event, update

from app.core.models import PartProgress, User, utcnow
from app.services.learning import lessons as lesson_service
from app.services.learning import progress
from tests.app.test_home import _card, _resume_button

pytestmark = pytest.mark.both_backends  # the bound is SQL date arithmetic in each dialect

LESSON = "transformer-scaling"
PART = "orient"
TIME = f"/lessons/{LESSON}/progress/{PART}/time"


@pytest.fixture
def reader(client):
    client.register("ann@example.org")
    html = client.get(f"/lessons/{LESSON}/{PART}").text  # the visit makes the part's row
    client.token = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)
    return client


def _beacon(client, seconds, token=None):
    """What navigator.sendBeacon sends: a form body with the token in it, no htmx or CSRF header."""
    return client.client.post(TIME, data={"seconds": str(seconds), "csrf_token": token or client.token})


def _row(db, email: str = "ann@example.org") -> PartProgress:
    db.expire_all()
    return db.query(PartProgress).join(User).filter(User.email == email, PartProgress.part_id == PART).one()


def _age_last_report(db, seconds: float) -> None:
    db.execute(update(PartProgress).values(time_reported_at=utcnow() - timedelta(seconds=seconds)))  # one learner here
    db.commit()


def test_a_beacon_with_the_pages_token_in_its_body_is_counted(reader, db):
    html = reader.get(f"/lessons/{LESSON}/{PART}").text
    assert f'data-reading="{TIME}"' in html and f'data-report-s="{progress.REPORT_EVERY_S}"' in html
    assert 'hx-trigger="every 20s"' not in html  # no fixed short timer any more
    assert _beacon(reader, 45).status_code == 204
    row = _row(db)
    assert row.seconds_spent == 45 and row.time_reported_at is not None


def test_a_beacon_without_the_token_or_with_another_changes_nothing(reader, make_client, db):
    assert reader.client.post(TIME, data={"seconds": "45"}).status_code == 403
    other = make_client()
    other.register("bob@example.org")
    assert _beacon(reader, 45, token=other.csrf(f"/lessons/{LESSON}/{PART}")).status_code == 403
    assert _row(db).seconds_spent == 0


def test_one_report_adds_at_most_the_cap(reader, db):
    assert _beacon(reader, 3600).status_code == 204
    assert _row(db).seconds_spent == progress.MAX_REPORT_S


def test_a_report_adds_no_more_than_the_wall_time_since_the_last_one(reader, db):
    _beacon(reader, 60)
    _beacon(reader, 60)  # a second tab, at once: only the slack
    assert _row(db).seconds_spent <= 60 + progress.REPORT_SLACK_S
    before = _row(db).seconds_spent
    _age_last_report(db, 20)
    _beacon(reader, 60)  # 20 s of wall time since the last: 20 s, give or take the slack
    added = _row(db).seconds_spent - before
    assert 20 <= added <= 20 + progress.REPORT_SLACK_S + 1
    before = _row(db).seconds_spent
    _age_last_report(db, 120)
    _beacon(reader, 60)  # a long gap: the report's own 60 s
    assert _row(db).seconds_spent - before == 60


def test_a_report_for_a_part_never_visited_makes_its_row(reader, db):
    r = reader.client.post(
        f"/lessons/{LESSON}/progress/history/time", data={"seconds": "12", "csrf_token": reader.token}
    )
    assert r.status_code == 204
    db.expire_all()
    assert db.query(PartProgress).filter_by(part_id="history").one().seconds_spent == 12


def test_bad_reports_name_the_field_and_change_nothing(reader, db):
    r = reader.client.post(TIME, data={"seconds": "-5", "csrf_token": reader.token})
    assert r.status_code == 422 and "seconds" in r.text
    r = reader.client.post(f"/lessons/{LESSON}/progress/nope/time", data={"seconds": "5", "csrf_token": reader.token})
    assert r.status_code == 404 and "nope" in r.text
    assert _row(db).seconds_spent == 0


def test_the_resume_part_is_where_the_learner_opened_last_whatever_arrives_late(reader, db):
    """The time of a part just left may arrive after the next part's visit (a beacon sent from pagehide): it counts,
    and resuming still goes to the part opened last."""
    reader.get(f"/lessons/{LESSON}/history")
    assert _beacon(reader, 30).status_code == 204  # orient's time, late
    assert _row(db).seconds_spent == 30
    assert _resume_button(_card(reader.get("/").text)) == (f"/lessons/{LESSON}/history", "Resume")


def test_a_report_reads_the_login_and_writes_one_update(reader, app, monkeypatch):
    """Pinned: the hot path of a class's background traffic. The login is one indexed read (the session's touch is
    due at most once a minute and is not this test's concern); the credit and its bound are one UPDATE."""
    monkeypatch.setattr(lesson_service, "CURRENT_TTL_S", 3600.0)  # no re-read of the lesson's version meanwhile
    _beacon(reader, 5)  # the first, warming the lesson's cache
    statements: list[str] = []

    def record(conn, cursor, statement, *args):
        statements.append(" ".join(statement.split()).upper())

    event.listen(app.state.engine, "before_cursor_execute", record)
    try:
        assert _beacon(reader, 5).status_code == 204
    finally:
        event.remove(app.state.engine, "before_cursor_execute", record)
    assert len(statements) == 2, statements
    assert statements[0].startswith("SELECT") and "USER_SESSIONS" in statements[0]
    assert statements[1].startswith("UPDATE PART_PROGRESS")
