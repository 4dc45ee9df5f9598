"""Notices: a finished job and a new grade are announced on whatever page the learner is on, once, with a
link, and only to their owner; the polls run only while there is something to wait for (jobs: the page's one
job-status poll, GET /jobs/live; grades: a check on load every few minutes)."""

from __future__ import annotations

import re

from app.core.models import Grade, Job, LabReport
from app.services.jobs import lifecycle as jobs
from tests.app import labruns
from tests.app.reporting import CRASHED, LESSON, grade_form, submit_report

HX = {"HX-Request": "true"}


def _submit(client, lab: str = "env-check") -> int:
    r = client.post(f"/labs/{lab}/jobs", data={}, headers=HX)
    assert r.status_code == 201 and "lab-runs-changed" in r.headers["HX-Trigger"].split(", ")
    return int(re.search(r'id="job-(\d+)"', r.text).group(1))


def _finish(db, settings, job_id: int, ok: bool = True) -> None:
    claimed = jobs.claim_next(db, worker_id="test-helper", lease_s=60)
    assert claimed.id == job_id
    if ok:
        rel = f"jobs/{job_id}/attempt-1"
        labruns.copy_to("env-check", settings.data_dir / rel)
        jobs.finish(
            db, job_id=job_id, worker_id="test-helper", ok=True, result=labruns.result("env-check"), bundle_dir=rel
        )
    else:
        jobs.finish(db, job_id=job_id, worker_id="test-helper", ok=False, error=CRASHED)


def test_a_finished_job_is_announced_on_any_page_until_dismissed(client, db, settings):
    client.register("ann@example.org")
    assert 'hx-get="/notices" hx-trigger="load"' in client.get("/").text  # a new session checks for grades once
    client.get("/notices", headers=HX)
    assert 'hx-get="/notices"' not in client.get("/lessons/transformer-scaling/orient").text  # then no poll at all
    job_id = _submit(client)
    page = client.get("/lessons/transformer-scaling/orient").text
    assert 'hx-get="/jobs/live"' in page and 'hx-get="/notices"' not in page  # the job-status poll waits for it
    assert "data-notice" not in client.get("/jobs/live", headers=HX).text  # still queued: nothing to say
    _finish(db, settings, job_id)
    poll = client.get("/jobs/live", headers=HX).text
    assert f"Your env-check run (job {job_id}) finished." in poll and f'href="/jobs/{job_id}"' in poll
    assert '<div id="notices" hx-swap-oob="innerHTML">' in poll
    assert "hx-trigger" not in poll.split("</span>")[0]  # nothing left to wait for: the poll stops
    # the notice stays on the next pages (from the session, no query) until dismissed
    page = client.get("/labs").text
    assert f"Your env-check run (job {job_id}) finished." in page and 'hx-get="/jobs/live"' not in page
    r = client.post("/notices/dismiss", data={"key": f"job-{job_id}"}, headers=HX)
    assert r.status_code == 200 and "data-notice" not in r.text
    assert "finished." not in client.get("/labs").text


def test_a_failed_job_says_so_and_a_job_seen_finishing_is_not_announced(client, db, settings):
    client.register("ann@example.org")
    failed, seen = _submit(client), _submit(client)
    _finish(db, settings, failed, ok=False)
    _finish(db, settings, seen)
    # the page shows the card of one of them: the poll brings it finished, and that one is no news
    poll = client.get("/jobs/live", params={"live_job": seen}, headers=HX).text
    assert f'id="job-{seen}" data-status="succeeded"' in poll
    assert f"Your env-check run (job {failed}) failed." in poll and "See why" in poll
    assert f"(job {seen})" not in poll


def test_a_new_grade_is_announced_to_its_learner_only_and_links_to_it(client, make_user, make_client, db, settings):
    submit_report(client, db, settings)
    report = db.query(LabReport).one()
    make_user("gus@example.org", roles=("grader", "instructor"))
    grader = make_client()
    grader.login("gus@example.org")
    assert grader.post(f"/classes/default/grader/reports/{report.id}/claim").status_code == 200
    assert grader.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form()).status_code == 200
    grade = db.query(Grade).one()
    # the grade check runs at most every few minutes per session; a new login checks at once
    client.post("/logout")
    client.login("ann@example.org")
    page = client.get("/").text
    assert 'hx-trigger="load"' in page
    poll = client.get("/notices", headers=HX).text
    assert "Your lab report for Transformer Scaling (version 1) was graded: 16 / 20." in poll
    assert f'href="/notices/grades/{grade.id}"' in poll
    assert 'hx-get="/notices"' not in poll  # checked: no further poll for a while
    r = client.get(f"/notices/grades/{grade.id}", follow_redirects=False)
    # ?v=1: that version in full with its grade, even once a resubmission is the latest (the anchor alone then
    # landed on version 1's one-line entry)
    assert r.status_code == 303 and r.headers["location"] == f"/lessons/{LESSON}/report?v=1#version-1"
    shown = client.get(r.headers["location"]).text
    assert re.search(r'<article class="card version" id="version-1"[\s\S]*?16 / 20', shown)
    assert "was graded" not in client.get("/").text  # seen
    # someone else's grade is not theirs to open
    assert grader.get(f"/notices/grades/{grade.id}", follow_redirects=False).status_code == 404


def test_notices_need_a_login(client, db):
    assert client.get("/notices", headers=HX).status_code == 401
    assert 'id="notices"' not in client.get("/").text  # the welcome page has no notices area
    assert db.query(Job).count() == 0


def test_a_cancelled_run_is_no_news_and_stops_the_poll(client, db, settings):
    """A cancelled run is no news, and nothing is left to follow: no poll for the rest of the session."""
    client.register("ann@example.org")
    client.get("/notices", headers=HX)  # the new session's one grade check
    job_id = _submit(client)
    assert 'hx-get="/jobs/live"' in client.get("/labs").text
    assert client.post(f"/jobs/{job_id}/cancel", headers=HX).status_code == 200
    assert db.get(Job, job_id).status == "cancelled"
    poll = client.get("/jobs/live", headers=HX).text
    assert "data-notice" not in poll and "hx-trigger" not in poll
    page = client.get("/labs").text
    assert 'hx-get="/notices"' not in page and 'hx-get="/jobs/live"' not in page  # nothing left to wait for
