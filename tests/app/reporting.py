"""Helpers for the report and grading tests: finished jobs holding real lab output, users by role."""

from __future__ import annotations

from app.services.jobs import lifecycle as jobs
from app.services.jobs.labhost import HostCapacity
from tests.app import labruns
from tests.conftest import default_class

LOCAL = HostCapacity.local_default()  # what create_app uses without a probe: CPU only


# What app/executors/labproc.py writes for a lab that crashed (a failure that is the run's, and charged).
CRASHED = (
    "The lab process crashed (SIGSEGV, signal 11): a fault in the lab's code or a library it calls, not an error "
    "in your parameters' values. Tell your instructor this job's number."
)


def finished_job(db, settings, owner, lab: str):
    """A job finished the way the worker finishes one, holding a real `python -m labs run` bundle."""
    job = jobs.create_job(db, owner=owner, lab=lab, params=labruns.TINY[lab], backend="cpu", host=LOCAL)
    claimed = jobs.claim_next(db, worker_id="test-helper", lease_s=60)
    assert claimed.id == job.id
    rel = f"jobs/{job.id}/attempt-1"
    labruns.copy_to(lab, settings.data_dir / rel)
    jobs.finish(db, job_id=job.id, worker_id="test-helper", ok=True, result=labruns.result(lab), bundle_dir=rel)
    db.refresh(job)
    return job


def failed_job(db, owner, lab: str, error: str = CRASHED):
    job = jobs.create_job(db, owner=owner, lab=lab, params=labruns.TINY[lab], backend="cpu", host=LOCAL)
    jobs.claim_next(db, worker_id="test-helper", lease_s=60)
    jobs.finish(db, job_id=job.id, worker_id="test-helper", ok=False, error=error)
    db.refresh(job)
    return job


LESSON = "transformer-scaling"


LEVELS = {
    "environment": "complete",
    "numerics": "explained",
    "tp-mapping": "shown",
    "timeline": "explained",
    "reasoning": "sound",
    "stretch": "attempted",
}  # 2 + 4 + 1.5 + 4 + 3 + 1.5 = 16 of 20


def submit_report(client, db, settings, email: str = "ann@example.org", answers: dict | None = None, name: str = "Ann"):
    """Register a learner, give them finished runs of every lab, attach them and submit; returns the user."""
    from app.core.models import User

    client.register(email, name=name)
    learner = db.query(User).filter_by(email=email).one()
    for lab in ("env-check", "fp8-step", "tp-sweep", "overlap-trace"):
        finished_job(db, settings, learner, lab)
    client.post(f"/lessons/{LESSON}/report", data={"action": "attach-latest"})
    answers = answers or {"numbers": "The gap is tiny."}
    # Every evidence item gets a run; the questions left unanswered are confirmed as missing, as the report page
    # asks before it submits an incomplete report.
    unanswered = [f"answer-{q}" for q in ("numbers", "overlap", "sharding") if q not in answers]
    form = {"action": "submit-incomplete" if unanswered else "submit", "missing-ok": unanswered}
    form.update({f"answer-{k}": v for k, v in answers.items()})
    page = client.get(f"/lessons/{LESSON}/report").text
    import re

    for slot, value, selected in re.findall(
        r'name="evidence-([a-z0-9-]+)">\s*<option value="">— none —</option>\s*'
        r'(?:<option value="([^"]+)"( selected)?)?',
        page,
    ):
        # A TINY fp8-step run has no spike, so "Attach my latest runs" leaves the numerics item, which asks for
        # one, empty: the learner picks their run from its menu, as the page lets them.
        form[f"evidence-{slot}"] = value if selected or slot == "bf16-fp8-numerics" else ""
    r = client.post(f"/lessons/{LESSON}/report", data=form)
    assert r.status_code == 200 and "Submitted as version" in r.text, r.text[-2000:]
    return learner


def grade_form(version: int = 1, base_revision: int = 0, levels: dict | None = None, **text) -> dict:
    return {
        "version": str(version),
        "base_revision": str(base_revision),
        "feedback": text.get("feedback", "Well read."),
        "notes": text.get("notes", ""),
        **{f"level-{k}": v for k, v in (levels or LEVELS).items()},
    }


def claimed_by_grader(make_user, make_client, db, report, email: str = "gina@example.org"):
    """A grader assigned to the report's lesson, logged in in a client of their own, holding its claim; returns
    that client."""
    from app.services.grading import grades as grading

    grader = make_user(email, roles=("grader",))
    grading.assign(db, klass=default_class(db), grader=grader, lesson_id=report.lesson_id)
    client = make_client()
    client.login(email)
    client.post(f"/classes/default/grader/reports/{report.id}/claim")
    return client
