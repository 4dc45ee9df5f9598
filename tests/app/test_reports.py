"""The learner's lab report: assembling evidence from own jobs, states, answers, submit and resubmit."""

from __future__ import annotations

import re

import pytest

from app.core.models import LabReport, ReportVersion, User
from tests.app.reporting import LESSON, claimed_by_grader, failed_job, finished_job, grade_form, submit_report


def _me(db, email="ann@example.org"):
    return db.query(User).filter_by(email=email).one()


def _submit_incomplete(client, data: dict):
    """Submit, as a learner does, a report with gaps: press Submit, read what is missing, confirm it."""
    listed = client.post(f"/lessons/{LESSON}/report", data={**data, "action": "submit"})
    assert "Not submitted:" in listed.text
    missing = re.findall(r'name="missing-ok" value="([a-z0-9-]+)"', listed.text)
    return client.post(f"/lessons/{LESSON}/report", data={**data, "action": "submit-incomplete", "missing-ok": missing})


def test_report_is_linked_from_the_lab_section_and_the_nav(client):
    client.register("ann@example.org")
    lab = client.get(f"/lessons/{LESSON}/lab").text
    assert f'href="/lessons/{LESSON}/report"' in lab and 'href="/reports"' in lab
    assert f"/lessons/{LESSON}/report" in client.get("/reports").text
    assert client.get("/lessons/precision-by-numbers/report").status_code == 404


def test_a_real_env_check_job_becomes_evidence(client, worker, db):
    """The worker runs `python -m labs run env-check` for real; the report picks the finished job up."""
    client.register("ann@example.org")
    client.post("/labs/env-check/jobs")
    assert worker.run_once()
    page = client.post(f"/lessons/{LESSON}/report", data={"action": "attach-latest"}).text
    assert "Attached your latest runs to 1 item." in page
    assert 'data-testid="state-env-capability">Present only as CPU emulation' in page
    assert 'data-testid="state-bf16-fp8-numerics">Missing' in page
    r = _submit_incomplete(client, {"evidence-env-capability": "job:1"})
    assert "Submitted as version 1, with 6 items missing as you confirmed" in r.text
    version = db.query(ReportVersion).one()
    assert version.checks["env-capability"]["status"] == "pass"
    assert version.checks["bf16-fp8-numerics"]["status"] == "missing"
    assert version.checks["tp-sweep-oversharding"]["checks"][0]["sentence"] == "Nothing attached (optional)."


@pytest.mark.parametrize("hx", [False, True])
def test_page_and_fragment_come_from_one_template(client, hx):
    client.register("ann@example.org")
    r = client.get(f"/lessons/{LESSON}/report", headers={"HX-Request": "true"} if hx else {})
    assert r.status_code == 200 and 'id="report"' in r.text
    assert ("<!doctype html>" in r.text) is (not hx)


def test_states_show_present_emulated_missing_and_not_gradable(client, db, settings):
    client.register("ann@example.org")
    ann = _me(db)
    fp8 = finished_job(db, settings, ann, "fp8-step")
    broken = failed_job(db, ann, "tp-sweep", error="A rank crashed: gloo connection reset.")
    r = client.post(
        f"/lessons/{LESSON}/report",
        data={
            "action": "save",
            "evidence-bf16-fp8-numerics": f"job:{fp8.id}",
            "evidence-tp-rank-mapping": f"job:{broken.id}",
        },
    )
    assert r.status_code == 200 and "Draft saved" in r.text
    assert 'data-testid="state-bf16-fp8-numerics">Present only as CPU emulation' in r.text
    assert 'data-testid="state-tp-rank-mapping">Not gradable' in r.text
    assert 'data-testid="state-timeline">Missing' in r.text
    _submit_incomplete(
        client, {"evidence-bf16-fp8-numerics": f"job:{fp8.id}", "evidence-tp-rank-mapping": f"job:{broken.id}"}
    )
    checks = db.query(ReportVersion).one().checks
    assert checks["tp-rank-mapping"]["status"] == "not_gradable"
    assert "gloo connection reset" in checks["tp-rank-mapping"]["checks"][0]["sentence"]
    assert checks["bf16-fp8-numerics"]["status"] == "pass" and checks["bf16-fp8-numerics"]["emulated"] is True


def test_only_own_finished_jobs_of_the_right_lab_are_accepted(client, make_client, db, settings):
    other = make_client()
    other.register("eve@example.org")
    eves = finished_job(db, settings, _me(db, "eve@example.org"), "env-check")
    client.register("ann@example.org")
    ann = _me(db)
    env = finished_job(db, settings, ann, "env-check")
    r = client.post(
        f"/lessons/{LESSON}/report",
        data={
            "action": "save",
            "evidence-env-capability": f"job:{eves.id}",
            "evidence-timeline": f"job:{env.id}",
            "answer-numbers": "kept",
        },
    )
    assert r.status_code == 422
    assert f"job {eves.id} is not one of your jobs" in r.text
    assert f"needs a overlap-trace job; job {env.id} ran env-check" in r.text
    assert ">kept</textarea>" in r.text  # the refused text stays in the box
    report = db.query(LabReport).one()
    assert report.draft == {"evidence": {}, "answers": {}}
    r = client.post(f"/lessons/{LESSON}/report", data={"action": "save", "evidence-env-capability": "job:abc"})
    assert r.status_code == 422 and "is not a job or upload reference" in r.text


def test_empty_report_cannot_be_submitted(client, db):
    client.register("ann@example.org")
    r = client.post(f"/lessons/{LESSON}/report", data={"action": "submit"})
    assert r.status_code == 422 and "Attach at least one piece of evidence" in r.text
    assert db.query(ReportVersion).count() == 0


def test_resubmission_keeps_every_version(client, db, settings):
    submit_report(client, db, settings, answers={"numbers": "first thoughts"})
    report = db.query(LabReport).one()
    assert report.status == "submitted"
    r = _submit_incomplete(client, {"answer-numbers": "better thoughts", "evidence-env-capability": "job:1"})
    assert "Submitted as version 2" in r.text
    v1, v2 = db.query(ReportVersion).order_by(ReportVersion.number).all()
    assert v1.answers == {"numbers": "first thoughts"} and v2.answers == {"numbers": "better thoughts"}
    assert set(v1.evidence) > set(v2.evidence) == {"env-capability"}
    assert 'id="version-1"' in r.text and 'id="version-2"' in r.text
    db.refresh(report)
    assert report.status == "submitted" and report.submitted_at is not None


def test_learner_sees_grade_lines_and_feedback_but_not_notes(client, make_user, make_client, db, settings):

    submit_report(client, db, settings)
    report = db.query(LabReport).one()
    g = claimed_by_grader(make_user, make_client, db, report)
    g.post(
        f"/classes/default/grader/reports/{report.id}/grade",
        data=grade_form(feedback="Nice <b>timeline</b>.", notes="grader-only remark"),
    )
    page = client.get(f"/lessons/{LESSON}/report").text
    assert '<span class="total">16 / 20</span>' in page
    assert "Timeline and real overlap" in page and "Explained" in page
    assert "Nice &lt;b&gt;timeline&lt;/b&gt;." in page and "grader-only remark" not in page
    assert "16 / 20" in client.get("/reports").text


@pytest.mark.parametrize("pick", ["../x", "job:abc", "1,a", "bundle:99999999999999999999"])
def test_malformed_evidence_pick_is_refused_not_a_crash(client, db, pick):
    """Found by a form fuzz: a pick without a kind:id shape crashed the page that reported the error."""
    client.register("ann@example.org")
    r = client.post(f"/lessons/{LESSON}/report", data={"action": "save", "evidence-env-capability": pick})
    assert r.status_code == 422 and "Nothing was saved" in r.text
    assert db.query(ReportVersion).count() == 0


def test_a_nul_in_an_evidence_pick_is_refused_before_the_form_is_read(client, db):
    """A NUL character is refused for every form (app/web/middleware/text.py), naming the field."""
    client.register("ann@example.org")
    r = client.post(f"/lessons/{LESSON}/report", data={"action": "save", "evidence-env-capability": "\x00"})
    assert r.status_code == 400 and "evidence-env-capability: holds a NUL character" in r.text
    assert db.query(ReportVersion).count() == 0


def test_grade_says_which_version_what_each_line_means_and_what_next(client, make_user, make_client, db, settings):
    """Walked as a newcomer: the grade read "Shown 1.5 / 3" with no word on what a line or level meant, which version
    it graded, or what to do; after a resubmission the new version said only "Not graded yet"."""

    submit_report(client, db, settings)
    report = db.query(LabReport).one()
    g = claimed_by_grader(make_user, make_client, db, report)
    # the grader sees each level's meaning on the page, not only in a hover title
    review = g.get(f"/classes/default/grader/reports/{report.id}").text
    assert 'data-testid="level-notes-tp-mapping"' in review
    assert "<strong>Explained</strong>: Names which slice each rank holds" in review
    g.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form())
    page = client.get(f"/lessons/{LESSON}/report").text
    assert "Grade for version 1: " in page
    assert "Same seed and steps for both runs" in page  # the line's description
    assert "The answer ties the loss gap to clipping and scale lag." in page  # the picked level's
    assert "Full marks need “Explained”: Names which slice each rank holds" in page  # tp-mapping was "Shown"
    assert 'data-testid="grade-next"' in page and "makes version 2, which goes back to the grader" in page
    r = _submit_incomplete(client, {"answer-numbers": "better thoughts", "evidence-env-capability": "job:1"})
    assert "Submitted as version 2" in r.text
    assert "Version 1’s grade (16 / 20) stays with it" in " ".join(r.text.split())
    assert f'href="/lessons/{LESSON}/report?v=1#version-1">read its grade and feedback' in r.text
    v1 = client.get(f"/lessons/{LESSON}/report?v=1").text
    assert "Grade for version 1: " in v1 and 'data-testid="grade-next"' not in v1  # version 2 is the one to improve


def test_my_reports_keeps_the_grade_after_a_resubmission_in_plain_words(client, make_user, make_client, db, settings):
    """Walked as a learner: after resubmitting, My reports dropped the grade the learner had ("Version 2 submitted
    · claimed", no grade at all), and "claimed" is the graders' word."""

    submit_report(client, db, settings)
    report = db.query(LabReport).one()
    assert "waiting for a grader" in client.get("/reports").text
    g = claimed_by_grader(make_user, make_client, db, report)
    assert "a grader is reading it" in client.get("/reports").text
    assert '<span class="status">a grader is reading it</span>' in client.get(f"/lessons/{LESSON}/report").text
    g.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form())
    mine = " ".join(client.get("/reports").text.split())
    assert "· graded" in mine and "<strong>Grade: 16 / 20</strong> (version 1)" in mine
    _submit_incomplete(client, {"answer-numbers": "better thoughts", "evidence-env-capability": "job:1"})
    mine = " ".join(client.get("/reports").text.split())
    assert "Version 2 submitted" in mine and "a grader is reading it" in mine  # gina still holds the claim
    assert "<strong>Grade: 16 / 20</strong> for version 1; version 2 is not graded yet." in mine
    assert f'href="/lessons/{LESSON}/report?v=1#version-1">Read version 1’s feedback' in mine
