"""The grader's review page and the learner's reports list, as HTML: what the grader-journey audit fixed
(tests/browser/test_grader_audit.py walks the same in Chromium)."""

from __future__ import annotations

import re

import pytest

from app.core.models import LabReport
from tests.app.reporting import LESSON, grade_form, submit_report
from tests.conftest import default_class


@pytest.fixture
def report(client, db, settings):
    submit_report(client, db, settings)
    return db.query(LabReport).one()


def _input(html: str, item: str, level: str) -> str:
    found = re.search(rf'<input type="radio" name="level-{item}" value="{level}"[^>]*>', html)
    assert found, (item, level)
    return found.group(0)


def test_a_save_refused_for_unscored_lines_marks_them_and_focuses_the_first(report, claimed_grader):
    """The refusal named the lines only in a sentence at the top of the page, 20,000 px above the rubric on a
    phone: now each line left without a level says so, its radios point at that message, the first is focused,
    and every radio of the grader's form is required (the browser refuses before sending)."""
    r = claimed_grader.post(
        f"/classes/default/grader/reports/{report.id}/grade",
        data=grade_form(levels={"environment": "complete", "numerics": "shown"}, feedback="Half done."),
    )
    assert r.status_code == 409 and "missing: TP rank mapping and parity" in r.text
    html = r.text
    assert 'class="rubric-item" id="item-environment"' in html
    assert 'class="rubric-item unscored" id="item-tp-mapping"' in html
    assert 'id="unscored-tp-mapping">No level picked' in html
    assert 'id="unscored-environment"' not in html
    first = _input(html, "tp-mapping", "missing")
    assert 'aria-describedby="unscored-tp-mapping"' in first and "autofocus" in first and "required" in first
    assert "autofocus" not in _input(html, "tp-mapping", "shown")
    assert "autofocus" not in _input(html, "timeline", "missing")
    assert "checked" in _input(html, "numerics", "shown")  # what was picked is kept
    assert "Half done." in html


def test_a_grader_who_has_not_claimed_sees_no_required_radios(report, make_user, make_client, db):
    from app.services.grading import grades as grading

    hal = make_user("hal@example.org", roles=("grader",))
    grading.assign(db, klass=default_class(db), grader=hal, lesson_id=LESSON)
    c = make_client()
    c.login("hal@example.org")
    html = c.get(f"/classes/default/grader/reports/{report.id}").text
    radio = _input(html, "environment", "missing")
    assert "disabled" in radio and "required" not in radio


@pytest.fixture
def claimed_grader(report, make_user, make_client, db):
    from tests.app.reporting import claimed_by_grader

    return claimed_by_grader(make_user, make_client, db, report)


def test_my_reports_links_a_graded_report_to_its_grade_and_feedback(report, claimed_grader, client):
    """On My reports "Grade: 16 / 20" led nowhere near the feedback: the lesson's link opens the report page at its
    draft form, the grade 3,500 px below it on a phone (a resubmission waiting for a grader already had such a
    link). The graded line now links to the version's grade."""
    assert (
        claimed_grader.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form()).status_code == 200
    )
    html = client.get("/reports").text
    line = re.search(r'<p data-testid="grade">.*?</p>', html, re.S)
    assert line, html
    assert f'<a href="/lessons/{LESSON}/report#version-1">Read the grade and feedback</a>' in line.group(0)
    assert 'id="version-1"' in client.get(f"/lessons/{LESSON}/report").text  # where the link lands
