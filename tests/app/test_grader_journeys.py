"""The grader's review page as HTML: what the second grader-journey audit fixed (tests/browser/test_grader_journeys.py
walks the same in Chromium)."""

from __future__ import annotations

import pytest

from app.models import LabReport
from tests.app.reporting import LESSON, submit_report


@pytest.fixture
def report(client, db, settings):
    submit_report(client, db, settings)
    return db.query(LabReport).one()


def _grader(make_user, make_client, db, email: str):
    from app.services import grading

    user = make_user(email, roles=("grader",))
    grading.assign(db, grader=user, lesson_id=LESSON)
    c = make_client()
    c.login(email)
    return c


def _after(html: str, marker: str, text: str) -> bool:
    return html.index(marker) < html.index(text)


def test_a_claim_from_the_rubric_foot_is_answered_at_the_rubric(report, make_user, make_client, db):
    """The claim at the rubric's foot opens the page at the rubric: its confirmation (and a refusal) is shown there,
    once, not in the banner at the top of the page, out of view."""
    hal = _grader(make_user, make_client, db, "hal@example.org")
    html = hal.get(f"/grader/reports/{report.id}").text
    assert 'name="at" value="rubric">Claim to grade</button>' in html
    r = hal.post(f"/grader/reports/{report.id}/claim", data={"at": "rubric"})
    assert r.status_code == 200
    assert r.text.count("Claimed: this report is yours to grade.") == 1
    assert _after(r.text, 'id="rubric-h"', 'role="status" data-testid="grading-message">Claimed')
    # from the claim button at the top: the answer stays at the top
    r = hal.post(f"/grader/reports/{report.id}/release")
    assert r.text.index("Released back to the queue.") < r.text.index('id="rubric-h"')
    r = hal.post(f"/grader/reports/{report.id}/claim")
    assert r.text.index("Claimed: this report is yours to grade.") < r.text.index('id="rubric-h"')
    # a claim refused from the foot (another grader got there first) says why at the rubric too
    ivy = _grader(make_user, make_client, db, "ivy@example.org")
    r = ivy.post(f"/grader/reports/{report.id}/claim", data={"at": "rubric"})
    assert r.status_code == 409
    assert r.text.count('data-testid="grading-error"') == 1
    assert _after(r.text, 'id="rubric-h"', 'data-testid="grading-error">')
    assert "(hal@example.org) claimed this report first" in r.text


def test_an_unknown_place_for_the_answer_is_the_top(report, make_user, make_client, db):
    hal = _grader(make_user, make_client, db, "hal@example.org")
    r = hal.post(f"/grader/reports/{report.id}/claim", data={"at": "elsewhere"})
    assert r.status_code == 200
    assert r.text.index("Claimed: this report is yours to grade.") < r.text.index('id="rubric-h"')


def test_claiming_still_needs_the_form_token(report, make_user, make_client, db):
    hal = _grader(make_user, make_client, db, "hal@example.org")
    r = hal.post(f"/grader/reports/{report.id}/claim", data={"at": "rubric", "csrf_token": "forged"})
    assert r.status_code == 403
    assert db.get(LabReport, report.id).claimed_by_id is None


def test_a_refused_save_shows_the_total_of_the_kept_picks(report, make_user, make_client, db):
    """Without JavaScript nothing recounts the total: a refused save kept the grader's picks but said "Total: 0 / 20"
    (the saved grade's total, none yet). It is now the total of the picks it kept."""
    from tests.app.reporting import claimed_by_grader, grade_form

    gina = claimed_by_grader(make_user, make_client, db, report)
    r = gina.post(
        f"/grader/reports/{report.id}/grade",
        data=grade_form(levels={"environment": "complete", "numerics": "shown"}, feedback="Half done."),
    )
    assert r.status_code == 409
    assert '<output id="grade-total" for="grade-form">4</output>' in r.text  # 2 + 2 of 20
