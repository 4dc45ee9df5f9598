"""The grader's review page as HTML: what the second grader-journey audit fixed (tests/browser/test_grader_journeys.py
walks the same in Chromium)."""

from __future__ import annotations

import re

import pytest

from app.core.models import LabReport
from tests.app.reporting import LESSON, submit_report
from tests.conftest import default_class


@pytest.fixture
def report(client, db, settings):
    submit_report(client, db, settings)
    return db.query(LabReport).one()


def _grader(make_user, make_client, db, email: str):
    from app.services.grading import grades as grading

    user = make_user(email, roles=("grader",))
    grading.assign(db, klass=default_class(db), grader=user, lesson_id=LESSON)
    c = make_client()
    c.login(email)
    return c


def _after(html: str, marker: str, text: str) -> bool:
    return html.index(marker) < html.index(text)


def test_a_claim_from_the_rubric_foot_is_answered_at_the_rubric(report, make_user, make_client, db):
    """The claim at the rubric's foot opens the page at the rubric: its confirmation (and a refusal) is shown there,
    once, not in the banner at the top of the page, out of view."""
    hal = _grader(make_user, make_client, db, "hal@example.org")
    html = hal.get(f"/classes/default/grader/reports/{report.id}").text
    assert 'name="at" value="rubric">Claim to grade</button>' in html
    r = hal.post(f"/classes/default/grader/reports/{report.id}/claim", data={"at": "rubric"})
    assert r.status_code == 200
    assert r.text.count("Claimed: this report is yours to grade.") == 1
    assert _after(r.text, 'id="rubric-h"', 'role="status" data-testid="grading-message">Claimed')
    # from the claim button at the top: the answer stays at the top
    r = hal.post(f"/classes/default/grader/reports/{report.id}/release")
    assert r.text.index("Released back to the queue.") < r.text.index('id="rubric-h"')
    r = hal.post(f"/classes/default/grader/reports/{report.id}/claim")
    assert r.text.index("Claimed: this report is yours to grade.") < r.text.index('id="rubric-h"')
    # a claim refused from the foot (another grader got there first) says why at the rubric too
    ivy = _grader(make_user, make_client, db, "ivy@example.org")
    r = ivy.post(f"/classes/default/grader/reports/{report.id}/claim", data={"at": "rubric"})
    assert r.status_code == 409
    assert r.text.count('data-testid="grading-error"') == 1
    assert _after(r.text, 'id="rubric-h"', 'data-testid="grading-error">')
    assert "(hal@example.org) claimed this report first" in r.text


def test_an_unknown_place_for_the_answer_is_the_top(report, make_user, make_client, db):
    hal = _grader(make_user, make_client, db, "hal@example.org")
    r = hal.post(f"/classes/default/grader/reports/{report.id}/claim", data={"at": "elsewhere"})
    assert r.status_code == 200
    assert r.text.index("Claimed: this report is yours to grade.") < r.text.index('id="rubric-h"')


def test_claiming_still_needs_the_form_token(report, make_user, make_client, db):
    hal = _grader(make_user, make_client, db, "hal@example.org")
    r = hal.post(f"/classes/default/grader/reports/{report.id}/claim", data={"at": "rubric", "csrf_token": "forged"})
    assert r.status_code == 403
    assert db.get(LabReport, report.id).claimed_by_id is None


def test_a_refused_save_shows_the_total_of_the_kept_picks(report, make_user, make_client, db):
    """Without JavaScript nothing recounts the total: a refused save kept the grader's picks but said "Total: 0 / 20"
    (the saved grade's total, none yet). It is now the total of the picks it kept."""
    from tests.app.reporting import claimed_by_grader, grade_form

    gina = claimed_by_grader(make_user, make_client, db, report)
    r = gina.post(
        f"/classes/default/grader/reports/{report.id}/grade",
        data=grade_form(levels={"environment": "complete", "numerics": "shown"}, feedback="Half done."),
    )
    assert r.status_code == 409
    assert '<output id="grade-total" for="grade-form">4</output>' in r.text  # 2 + 2 of 20


def _staff(make_user, make_client, email: str, roles):
    make_user(email, roles=roles)
    c = make_client()
    c.login(email)
    return c


def _assignments(db) -> list[tuple[str, str]]:
    from app.services.grading import grades as grading

    db.expire_all()
    return [(u.email, lesson) for u, lesson in grading.assignments(db, klass=default_class(db))]


def _assign_section(html: str) -> str:
    return html[html.index('id="assign-h"') :]


def _lesson_filter(html: str) -> str:
    return html[html.index('id="f-lesson"') : html.index("</select>", html.index('id="f-lesson"'))]


def test_the_assign_form_answers_at_the_form_and_keeps_a_refused_email(make_user, make_client, db):
    """The assign form is at the foot of the queue page; its answer was a banner at the top (a screen or more above
    on a phone), naming the fields by their form names (`email:`, `lesson_id:`), with the typed email gone. A refusal
    now comes back at the form, names the field by its label, keeps what was typed and marks that field; nothing is
    changed. A redirect after assigning also set the queue's lesson filter (both were `lesson=`)."""
    ivy = _staff(make_user, make_client, "ivy@example.org", roles=("instructor",))
    make_user("gus@example.org", roles=("grader",))
    make_user("lea@example.org", roles=("learner",))
    r = ivy.post(
        "/classes/default/grader/assignments",
        data={"email": "nobody@example.org", "lesson_id": LESSON},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"].endswith("#assign-h")
    html = ivy.get(r.headers["location"]).text
    section = _assign_section(html)
    assert "Grader&#39;s email: no grader with the email nobody@example.org" in section
    assert 'class="banner error" id="assign-note" role="alert"' in section
    email_input = section[
        section.index('<input id="a-email"') : section.index(">", section.index('<input id="a-email"'))
    ]
    assert 'value="nobody@example.org"' in email_input and 'aria-invalid="true"' in email_input
    assert 'aria-describedby="assign-note"' in email_input
    assert "no grader with the email" not in html[: html.index('id="assign-h"')]  # said once, at the form
    # a learner is no grader either; nothing changes
    r = ivy.post(
        "/classes/default/grader/assignments",
        data={"email": "lea@example.org", "lesson_id": LESSON},
        follow_redirects=True,
    )
    assert "Grader&#39;s email: no grader with the email lea@example.org" in r.text
    r = ivy.post(
        "/classes/default/grader/assignments",
        data={"email": "gus@example.org", "lesson_id": "nope"},
        follow_redirects=True,
    )
    section = _assign_section(r.text)
    assert "Lesson: there is no lesson &#39;nope&#39;. Nothing changed." in section
    assert '<select id="a-lesson" name="lesson_id" aria-invalid="true"' in section
    assert 'value="gus@example.org"' in section  # the email typed with it is kept
    assert _assignments(db) == []
    # a change says so at the form, leaves the email field empty for the next one, and filters nothing
    r = ivy.post(
        "/classes/default/grader/assignments",
        data={"email": "gus@example.org", "lesson_id": LESSON},
        follow_redirects=True,
    )
    assert 'role="status" data-testid="assign-note">gus@example.org now grades transformer-scaling.' in r.text
    assert "selected" not in _lesson_filter(r.text)
    assert 'value="gus@example.org"' not in _assign_section(r.text)
    assert _assignments(db) == [("gus@example.org", LESSON)]
    # doing it twice, or removing what is not there, says that nothing changed
    r = ivy.post(
        "/classes/default/grader/assignments",
        data={"email": "gus@example.org", "lesson_id": LESSON},
        follow_redirects=True,
    )
    assert "gus@example.org already grades transformer-scaling: nothing changed." in r.text
    r = ivy.post(
        "/classes/default/grader/assignments",
        data={"email": "gus@example.org", "lesson_id": LESSON, "action": "remove"},
        follow_redirects=True,
    )
    assert "gus@example.org no longer grades transformer-scaling." in r.text
    r = ivy.post(
        "/classes/default/grader/assignments",
        data={"email": "gus@example.org", "lesson_id": LESSON, "action": "remove"},
        follow_redirects=True,
    )
    assert "gus@example.org does not grade transformer-scaling: nothing changed." in r.text
    assert _assignments(db) == []


def test_the_assign_form_needs_an_instructor_and_the_form_token(make_user, make_client, db):
    make_user("gus@example.org", roles=("grader",))
    ivy = _staff(make_user, make_client, "ivy@example.org", roles=("instructor",))
    r = ivy.post(
        "/classes/default/grader/assignments",
        data={"email": "gus@example.org", "lesson_id": LESSON, "csrf_token": "forged"},
    )
    assert r.status_code == 403
    gwen = _staff(make_user, make_client, "gwen@example.org", roles=("grader",))
    r = gwen.post("/classes/default/grader/assignments", data={"email": "gwen@example.org", "lesson_id": LESSON})
    assert r.status_code in (403, 404)
    assert 'id="assign-h"' not in gwen.get("/classes/default/grader").text
    assert _assignments(db) == []


def _resubmit(client, db, answer: str = "At TP=2.") -> None:
    from app.core.models import ReportVersion

    form = {f"evidence-{k}": f"job:{v['job']}" for k, v in db.query(ReportVersion).first().evidence.items()}
    form.update({"answer-numbers": "The gap is tiny.", "answer-sharding": answer})
    r = client.post(
        f"/lessons/{LESSON}/report", data={**form, "action": "submit-incomplete", "missing-ok": "answer-overlap"}
    )
    assert r.status_code == 200 and "Submitted as version" in r.text


def test_an_older_version_shows_its_grade_read_only(report, client, make_user, make_client, db):
    """Opened to read what version 1 got, its rubric was a live form with Save grade: a grader who changed a level
    and saved was refused ("submitted version 2 after you opened version 1"). An older version's rubric is now read
    only, with a link to grade the latest."""
    from tests.app.reporting import claimed_by_grader, grade_form

    gina = claimed_by_grader(make_user, make_client, db, report)
    assert (
        gina.post(
            f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(feedback="V1 read well.")
        ).status_code
        == 200
    )
    _resubmit(client, db)
    old = gina.get(f"/classes/default/grader/reports/{report.id}?v=1").text
    assert "checked disabled" in _input(old, "environment", "complete")  # version 1's grade, as saved
    assert "required" not in _input(old, "environment", "complete")
    assert (
        '<textarea id="feedback" name="feedback" maxlength="20000" aria-keyshortcuts="f" disabled>V1 read well.' in old
    )
    assert "Save grade</button>" not in old
    assert 'data-testid="older-version">Version 1’s grade, kept as saved: only the latest version is graded.' in old
    assert f'<a href="/classes/default/grader/reports/{report.id}#rubric-h">Grade version 2</a>' in old
    latest = gina.get(f"/classes/default/grader/reports/{report.id}").text
    assert "Save grade</button>" in latest and "required" in _input(latest, "environment", "complete")


def test_a_save_refused_for_a_resubmission_carries_the_work_to_the_new_version(
    report, client, make_user, make_client, db
):
    """The learner resubmitted while the grader scored version 1: the save was refused with "Your scores and text are
    kept below; open the new version to grade it", and opening it lost them (the new version starts blank). The refusal
    now shows the new version with the grader's scores and text filled in, not saved, ready to check and save;
    version 1 keeps no grade it was not given."""
    from app.core.models import Grade
    from tests.app.reporting import claimed_by_grader, grade_form

    gina = claimed_by_grader(make_user, make_client, db, report)
    _resubmit(client, db, answer="Changed while under review.")
    r = gina.post(
        f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(version=1, feedback="Typed on version 1.")
    )
    assert r.status_code == 409
    text = " ".join(re.sub(r"<[^>]+>", "", r.text).split())
    assert "Not saved: the learner submitted version 2 after you opened version 1." in text
    assert "version <strong>2</strong> of 2" in r.text  # the page is version 2's
    assert '<input type="hidden" name="version" value="2">' in r.text
    assert '<input type="hidden" name="base_revision" value="0">' in r.text
    assert "checked required" in _input(r.text, "environment", "complete")
    assert ">Typed on version 1.</textarea>" in r.text
    assert "The scores and text below are not saved yet: check each line against what changed." in text
    assert "data-unsaved" in r.text
    assert db.query(Grade).count() == 0
    # saved from there, the grade is version 2's
    r = gina.post(
        f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(version=2, feedback="Typed on version 1.")
    )
    assert r.status_code == 200 and "Grade saved" in r.text
    from app.core.models import ReportVersion

    db.expire_all()
    graded = [db.get(ReportVersion, g.version_id).number for g in db.query(Grade).all()]
    assert graded == [2]


def _input(html: str, item: str, level: str) -> str:
    found = re.search(rf'<input type="radio" name="level-{item}" value="{level}"[^>]*>', html)
    assert found, (item, level)
    return found.group(0)
