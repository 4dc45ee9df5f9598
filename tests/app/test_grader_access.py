"""A grader sees a learner's jobs only through submitted reports of lessons they grade (and
only the jobs those reports cite); nobody claims or grades their own report; instructors keep full access.
Job ids are sequential, so every refusal is tried by walking ids, as the probe did."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.core.models import Job, LabReport, User
from app.services.grading import grades as grading
from tests.app.reporting import LESSON, finished_job, grade_form, submit_report
from tests.conftest import default_class


def _login(make_user, make_client, email: str, roles=("grader",)):
    user = make_user(email, roles=roles)
    c = make_client()
    c.login(email)
    return user, c


def _job_urls(job_id: int) -> list[str]:
    return [
        f"/api/v1/jobs/{job_id}",
        f"/api/v1/jobs/{job_id}/result",
        f"/jobs/{job_id}",
        f"/jobs/{job_id}/artifacts/result.json",
    ]


@pytest.fixture
def submitted(client, db, settings):
    """ann's submitted report citing four finished jobs, plus one finished job the report does not cite."""
    ann = submit_report(client, db, settings)
    report = db.scalar(select(LabReport))
    cited = set(db.scalars(select(Job.id).where(Job.owner_id == ann.id)))
    uncited = finished_job(db, settings, ann, "env-check")
    return report, cited, uncited.id


def test_an_unassigned_grader_reads_no_learner_job(submitted, make_user, make_client):
    _, cited, uncited = submitted
    _, bob = _login(make_user, make_client, "bob@example.org")
    for job_id in [*cited, uncited]:
        for url in _job_urls(job_id):
            r = bob.get(url)
            assert r.status_code == 404, (url, r.status_code)
            assert "result" not in r.text.lower() or "No job" in r.text


def test_an_assigned_grader_reads_only_the_jobs_the_report_cites(submitted, make_user, make_client, db):
    _, cited, uncited = submitted
    gina, client = _login(make_user, make_client, "gina@example.org")
    grading.assign(db, klass=default_class(db), grader=gina, lesson_id=LESSON)
    for job_id in cited:
        assert [client.get(u).status_code for u in _job_urls(job_id)] == [200, 200, 200, 200]
    assert [client.get(u).status_code for u in _job_urls(uncited)] == [404, 404, 404, 404]


def test_a_grader_of_another_lesson_reads_nothing(submitted, make_user, make_client, db):
    _, cited, _ = submitted
    hal, client = _login(make_user, make_client, "hal@example.org")
    grading.assign(db, klass=default_class(db), grader=hal, lesson_id="some-other-lesson")
    assert {client.get(f"/api/v1/jobs/{j}").status_code for j in cited} == {404}


def test_a_draft_report_opens_no_jobs(client, make_user, make_client, db, settings):
    client.register("ann@example.org")
    ann = db.scalar(select(User).where(User.email == "ann@example.org"))
    job = finished_job(db, settings, ann, "env-check")
    client.post(f"/lessons/{LESSON}/report", data={"action": "attach-latest"})  # attached, never submitted
    gina, grader = _login(make_user, make_client, "gina@example.org")
    grading.assign(db, klass=default_class(db), grader=gina, lesson_id=LESSON)
    assert grader.get(f"/api/v1/jobs/{job.id}").status_code == 404


def test_instructors_keep_full_access(submitted, make_user, make_client):
    _, cited, uncited = submitted
    _, ivy = _login(make_user, make_client, "ivy@example.org", roles=("instructor",))
    for job_id in [*cited, uncited]:
        assert ivy.get(f"/api/v1/jobs/{job_id}").status_code == 200


def test_the_owner_still_reads_their_own_jobs(submitted, client):
    _, cited, uncited = submitted
    assert {client.get(f"/api/v1/jobs/{j}").status_code for j in [*cited, uncited]} == {200}


@pytest.mark.parametrize("roles", [("learner", "grader"), ("learner", "instructor")])
def test_nobody_claims_or_grades_their_own_report(client, make_client, db, settings, make_user, roles):
    """A grader (or instructor) who is also a learner of the lesson: their report is not in their queue and
    its grading pages answer 404; the service refuses too, whatever route reaches it."""
    me = make_user("sam@example.org", roles=roles)
    grading.assign(db, klass=default_class(db), grader=me, lesson_id=LESSON)
    sam = make_client()
    sam.login("sam@example.org")
    submit_report(sam, db, settings, email="sam@example.org")  # registering again is refused; sam stays logged in
    own = db.scalar(select(LabReport).where(LabReport.owner_id == me.id))
    assert f"/classes/default/grader/reports/{own.id}" not in sam.get("/classes/default/grader").text
    page = sam.get(f"/classes/default/grader/reports/{own.id}")
    assert page.status_code == 404  # still refused, but it says why, to its owner only
    assert f"Report {own.id} is your own lab report: nobody grades their own, so another grader will." in page.text
    assert f"/lessons/{LESSON}/report" in page.text
    assert sam.post(f"/classes/default/grader/reports/{own.id}/claim").status_code == 404
    assert sam.post(f"/classes/default/grader/reports/{own.id}/grade", data=grade_form()).status_code == 404
    db.refresh(own)
    assert own.status == "submitted" and own.claimed_by_id is None
    with pytest.raises(grading.GradingError, match="your own report"):
        grading.claim(db, report=own, grader=me)
    # ...while another learner's report stays gradeable by sam
    submit_report(client, db, settings, email="ann@example.org")
    other = db.scalar(select(LabReport).where(LabReport.owner_id != me.id))
    assert sam.post(f"/classes/default/grader/reports/{other.id}/claim").status_code == 200


def test_a_grader_is_told_why_their_own_report_is_missing_and_who_holds_a_claimed_one(
    client, make_client, db, settings, make_user
):
    """Walked as a grader who is also a learner: the queue left out their own report without a word, and a second
    grader opening a report another holds was told "Claim the report to grade it" with no way to claim it."""
    me = make_user("sam@example.org", roles=("learner", "grader"))
    grading.assign(db, klass=default_class(db), grader=me, lesson_id=LESSON)
    sam = make_client()
    sam.login("sam@example.org")
    assert 'data-testid="own-reports"' not in sam.get("/classes/default/grader").text  # nothing of sam's handed in yet
    submit_report(sam, db, settings, email="sam@example.org")
    queue = " ".join(sam.get("/classes/default/grader").text.split())
    assert f"Your own lab report for {LESSON} is not listed here" in queue and 'href="/reports"' in queue
    submit_report(client, db, settings, email="ann@example.org")
    other = db.scalar(select(LabReport).where(LabReport.owner_id != me.id))
    assert sam.post(f"/classes/default/grader/reports/{other.id}/claim").status_code == 200
    gus = make_user("gus@example.org", roles=("grader",))
    grading.assign(db, klass=default_class(db), grader=gus, lesson_id=LESSON)
    g2 = make_client()
    g2.login("gus@example.org")
    page = " ".join(g2.get(f"/classes/default/grader/reports/{other.id}").text.split())
    assert "claimed by <strong>sam</strong>" in page
    assert "sam holds this report: only they grade it (an instructor can release the claim)." in page
    assert "Claim the report (above) to grade it." not in page and "Claim this report" not in page
