"""Grades held until released: a lesson that holds shows its learners no grade until a release, then all at once,
and each learner is told; a lesson that does not hold releases each grade as it is saved."""

from __future__ import annotations

import re

import pytest

from app.core.models import Grade, LabReport, User
from app.services.grading import release as grade_release
from app.services.learning import notices
from tests.app.reporting import LESSON, claimed_by_grader, grade_form, submit_report
from tests.conftest import default_class


@pytest.fixture
def setup(client, db, settings, make_user, make_client):
    submit_report(client, db, settings)
    report = db.query(LabReport).one()
    ivy = make_user("ivy@example.org", roles=("instructor",))
    staff = make_client()
    staff.login(ivy.email)
    gina = claimed_by_grader(make_user, make_client, db, report)
    learner = db.query(User).filter_by(email="ann@example.org").one()
    return report, staff, gina, learner


def _learner_sees(client) -> list[str]:
    return re.findall(r"(\d+) / 20", client.get(f"/lessons/{LESSON}/report").text)


def test_a_held_lesson_shows_its_grades_only_after_the_release(setup, client, db):
    report, staff, gina, learner = setup
    r = staff.post("/classes/default/grader/releases", {"lesson_id": LESSON, "action": "hold"}, follow_redirects=False)
    assert r.status_code == 303 and grade_release.holds(db, klass=default_class(db), lesson_id=LESSON)
    saved = gina.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form())
    assert saved.status_code == 200 and "Grade saved and held" in saved.text and "can see it now" not in saved.text
    review = gina.get(f"/classes/default/grader/reports/{report.id}").text
    assert 'data-testid="grade-held"' in review and "· held" in review
    # the learner sees no grade and is told nothing, but that it is graded and waits for the release
    page = client.get(f"/lessons/{LESSON}/report").text
    assert _learner_sees(client) == [] and "Not graded yet" not in page
    assert '<span class="status">graded, to be released</span>' in page and "Graded, to be released:" in page
    assert "graded, to be released" in client.get("/reports").text and "waiting for a grader" not in page
    assert notices.new_grades(db, owner=learner, after=None) == []
    queue = gina.get("/classes/default/grader").text
    assert 'data-release="transformer-scaling"' in queue and "1 grade</span> waiting" in queue
    # a grader releases (deciding whether a lesson holds is an instructor's)
    assert gina.post("/classes/default/grader/releases", {"lesson_id": LESSON, "action": "as-saved"}).status_code == 403
    r = gina.post(
        "/classes/default/grader/releases", {"lesson_id": LESSON, "action": "release"}, follow_redirects=False
    )
    assert r.status_code == 303 and "n=1" in r.headers["location"]
    assert "16" in _learner_sees(client)
    told = notices.new_grades(db, owner=learner, after=None)
    assert len(told) == 1 and told[0][0].total == 16
    # a regrade while held stays unseen: the learner keeps the released revision until the next release
    db.expire_all()
    gina.post(f"/classes/default/grader/reports/{report.id}/claim")
    levels = {"environment": "complete", "numerics": "explained", "tp-mapping": "shown", "timeline": "explained"}
    levels |= {"reasoning": "sound", "stretch": "found"}  # 17.5 of 20
    saved = gina.post(
        f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(base_revision=1, levels=levels)
    )
    assert saved.status_code == 200, saved.text[-400:]
    assert "16" in _learner_sees(client) and grade_release.waiting(db, klass=default_class(db), lesson_id=LESSON) == 1
    # going back to "as saved" releases what was held: nothing stays hidden without a hold
    r = staff.post(
        "/classes/default/grader/releases", {"lesson_id": LESSON, "action": "as-saved"}, follow_redirects=False
    )
    assert "n=1" in r.headers["location"] and not grade_release.holds(db, klass=default_class(db), lesson_id=LESSON)
    db.expire_all()
    newest = db.query(Grade).order_by(Grade.revision.desc()).first()
    assert newest.released_at is not None and newest.total == 17.5
    assert "17.5 / 20" in client.get(f"/lessons/{LESSON}/report").text


def test_without_a_hold_a_grade_is_seen_as_saved_and_bad_requests_name_the_field(setup, client, db):
    report, staff, gina, learner = setup
    gina.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form())
    assert "16" in _learner_sees(client) and len(notices.new_grades(db, owner=learner, after=None)) == 1
    r = staff.post("/classes/default/grader/releases", {"lesson_id": "nope", "action": "release"})
    assert r.status_code == 404 and "lesson_id" in r.text
    r = staff.post("/classes/default/grader/releases", {"lesson_id": LESSON, "action": "publish"})
    assert r.status_code == 422 and "action" in r.text
    assert (
        client.post("/classes/default/grader/releases", {"lesson_id": LESSON, "action": "release"}).status_code == 403
    )


def test_a_held_grade_released_after_a_later_grade_was_announced_is_announced(db, make_user):
    """The notices' cursor is the release, not the grade's id: a grade saved (held) before another that was released
    and announced is news when it is released."""
    from datetime import timedelta

    from app.core.models import ReportVersion, utcnow

    ann = make_user("ann@example.org")

    def graded(lesson_id: str, released) -> Grade:
        report = LabReport(owner_id=ann.id, lesson_id=lesson_id, status="graded")
        db.add(report)
        db.flush()
        version = ReportVersion(report_id=report.id, number=1, lesson_version=1, evidence={}, answers={})
        db.add(version)
        db.flush()
        grade = Grade(version_id=version.id, revision=1, grader_id=ann.id, rubric_version=1, rubric_hash="x" * 64,
                      scores={}, total=12.0, max_total=20.0, released_at=released)  # fmt: skip
        db.add(grade)
        db.commit()
        return grade

    held = graded("held-lesson", None)  # saved first, held
    later = graded(LESSON, utcnow() - timedelta(seconds=5))  # saved after it, released at once
    assert held.id < later.id
    told = notices.new_grades(db, owner=ann, after=None)
    assert [g.id for g, _, _ in told] == [later.id]
    seen = notices.cursor(later)
    held.released_at = utcnow()  # the hold is released
    db.commit()
    assert [g.id for g, _, _ in notices.new_grades(db, owner=ann, after=seen)] == [held.id]
    assert notices.new_grades(db, owner=ann, after=notices.cursor(held)) == []
