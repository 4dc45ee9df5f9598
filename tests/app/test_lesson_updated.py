"""A learner who read a lesson under an older version is told, once, that it changed and what its authors noted:
on the first part they open under the new version (that visit records the version they read). Learners who never
opened the lesson, old-version views and progress rows from before versions were recorded get no notice."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from sqlalchemy import inspect, select, text, update
from sqlalchemy.orm import Session

from app.core import migrate
from app.core.db import make_engine
from app.core.models import PartProgress, utcnow
from app.services.accounts import users
from app.services.learning import lessons as lesson_service

LESSON = "transformer-scaling"
ORIENT = f"/lessons/{LESSON}/orient"
DEEP = f"/lessons/{LESSON}/deep-dives"
PRACTICE = f"/lessons/{LESSON}/practice"


@pytest.fixture
def learner(client):
    client.register("ann@example.org")
    return client


def _notice(html: str) -> str | None:
    """The notice's text, whitespace folded; None when the page has none."""
    found = re.search(r'<p class="banner" role="status" id="lesson-updated">(.*?)</p>', html, re.S)
    return " ".join(found.group(1).split()) if found else None


def _publish(db, note: str = "") -> int:
    """A new version with a trivial edit, as the editor publishes it (a different title each time)."""
    row = lesson_service.latest_row(db, lesson_id=LESSON)
    files = dict(row.files)
    files["lesson.yaml"] = files["lesson.yaml"].replace(
        "title: Transformer Scaling", f"title: Transformer Scaling v{row.version + 1}", 1
    )
    version, errors = lesson_service.publish(db, lesson_id=LESSON, files=files, source="editor", note=note)
    assert errors == [] and version == row.version + 1
    return version


def _seen(db) -> dict[str, int | None]:
    db.expire_all()
    return {r.part_id: r.version_seen for r in db.scalars(select(PartProgress))}


def test_the_notice_shows_once_after_an_instructor_publishes_with_a_note(learner, make_client, make_user, db):
    assert _notice(learner.get(ORIENT).text) is None  # first read, under version 1
    make_user("prof@example.org", roles=("instructor",))
    prof = make_client()
    prof.login("prof@example.org")
    text = lesson_service.latest_row(db, lesson_id=LESSON).files["parts/orient.yaml"]
    r = prof.post(
        f"/instructor/lessons/{LESSON}/publish",
        {
            "path": "parts/orient.yaml",
            "text": text.replace("Orient + objectives", "Orient and objectives"),
            "base_version": 1,
            "note": "Clearer objectives; the <b>FP8</b> table is fixed",
        },
    )
    assert r.status_code == 200 and "Published version 2" in r.text

    page = learner.get(DEEP).text
    notice = _notice(page)
    assert notice is not None and "updated since you last read it" in notice
    now = utcnow()
    assert f"version 1 → 2, published {now.day} {now:%b}." in notice  # "2 Dec": this year's, no year
    assert "Author’s note: “Clearer objectives; the &lt;b&gt;FP8&lt;/b&gt; table is fixed”" in notice
    assert page.index('id="lesson-updated"') < page.index('id="part-deep-dives"')  # above the part
    assert _seen(db) == {"orient": 1, "deep-dives": 2}

    assert _notice(learner.get(DEEP).text) is None  # seen: not again on this part
    assert _notice(learner.get(ORIENT).text) is None  # nor on the part read under version 1
    assert _seen(db) == {"orient": 2, "deep-dives": 2}  # which now counts as read under version 2


def test_a_learner_who_never_opened_the_lesson_sees_no_notice(learner, db):
    _publish(db, note="new figures")
    assert _notice(learner.get(DEEP).text) is None
    assert _seen(db) == {"deep-dives": 2}


def test_an_old_version_view_shows_no_notice_and_records_nothing(learner, db):
    learner.get(ORIENT)
    _publish(db, note="new figures")
    db.expire_all()
    before = db.scalar(select(PartProgress.last_seen_at))
    for path in (ORIENT, DEEP):
        page = learner.get(f"{path}?v=1").text
        assert "You are reading version 1" in page and _notice(page) is None
    db.expire_all()
    assert _seen(db) == {"orient": 1} and db.scalar(select(PartProgress.last_seen_at)) == before
    assert "version 1 → 2" in _notice(learner.get(DEEP).text)  # the current version still tells


def test_progress_from_before_versions_were_recorded_never_notifies(learner, db):
    learner.get(ORIENT)
    db.execute(update(PartProgress).values(version_seen=None))  # as the migration leaves existing rows
    db.commit()
    _publish(db, note="new figures")
    assert _notice(learner.get(ORIENT).text) is None
    assert _seen(db) == {"orient": 2}  # recorded from now on
    _publish(db, note="more figures")
    assert "version 2 → 3" in _notice(learner.get(DEEP).text)


def test_several_versions_list_their_notes_newest_first_at_most_three(learner, db):
    learner.get(ORIENT)
    for note in ("first note", "", "third note", "fourth note", "  ", "sixth note"):
        _publish(db, note=note)
    notice = _notice(learner.get(PRACTICE).text)
    assert "version 1 → 7" in notice
    assert (
        "Author’s notes, newest first: version 7: “sixth note”; version 5: “fourth note”; version 4: “third note”"
        in notice
    )
    assert "first note" not in notice  # at most three


def test_an_update_without_notes_says_so_without_an_empty_note(learner, db):
    learner.get(ORIENT)
    _publish(db)
    notice = _notice(learner.get(ORIENT).text)
    assert notice is not None and "version 1 → 2" in notice and "note" not in notice


def test_a_version_from_another_year_says_its_year():
    update = lesson_service.Update(1, 2, datetime(2019, 3, 7, 12, 0, tzinfo=UTC), [])
    assert update.published_on == "7 Mar 2019"


def test_update_since_is_none_for_a_version_that_is_not_there(db):
    assert lesson_service.update_since(db, lesson_id=LESSON, seen=1, version=5) is None
    assert lesson_service.update_since(db, lesson_id="no-such-lesson", seen=1, version=2) is None


def test_rereading_the_same_part_right_after_a_publish_shows_the_notice(learner, db):
    """The part seen last, within a minute, needs no visit, unless it was read under an older version."""
    learner.get(DEEP)
    _publish(db, note="new figures")
    assert "version 1 → 2" in _notice(learner.get(DEEP).text)
    assert _notice(learner.get(DEEP).text) is None


@pytest.mark.both_backends
def test_the_migration_keeps_existing_progress_with_no_version_and_downgrades(db_url):
    """0008 adds part_progress.version_seen: rows read before it keep everything and get NULL (never a notice);
    a downgrade drops the column and keeps the rows."""
    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    with Session(engine) as session:
        user_id = users.create_user(session, email="ann@example.org", password="correct horse", display_name="Ann").id
    migrate.downgrade(db_url, "0007")
    assert "version_seen" not in {c["name"] for c in inspect(engine).get_columns("part_progress")}
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO part_progress (user_id, lesson_id, part_id, seconds_spent, first_seen_at, last_seen_at)"
                " VALUES (:u, :l, 'orient', 42, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            ),
            {"u": user_id, "l": LESSON},
        )
    migrate.upgrade(db_url)
    with engine.begin() as conn:
        assert conn.execute(text("SELECT part_id, seconds_spent, version_seen FROM part_progress")).all() == [
            ("orient", 42, None)
        ]
        conn.execute(text("UPDATE part_progress SET version_seen = 3"))
    migrate.downgrade(db_url, "0007")
    with engine.begin() as conn:
        assert conn.execute(text("SELECT part_id, seconds_spent FROM part_progress")).all() == [("orient", 42)]
    migrate.upgrade(db_url)
    engine.dispose()
