"""Helpers for the report and grading tests: finished jobs holding real lab output, users by role."""

from __future__ import annotations

from app.services import jobs
from tests.app import labruns


def finished_job(db, settings, owner, lab: str):
    """A job finished the way the worker finishes one, holding a real `python -m labs run` bundle."""
    job = jobs.create_job(db, owner=owner, lab=lab, params=labruns.TINY[lab], backend="cpu")
    claimed = jobs.claim_next(db, worker_id="test-helper", lease_s=60)
    assert claimed.id == job.id
    rel = f"jobs/{job.id}/attempt-1"
    labruns.copy_to(lab, settings.data_dir / rel)
    jobs.finish(db, job_id=job.id, worker_id="test-helper", ok=True, result=labruns.result(lab), bundle_dir=rel)
    db.refresh(job)
    return job


def failed_job(db, owner, lab: str, error: str = "The lab process was killed by signal 9."):
    job = jobs.create_job(db, owner=owner, lab=lab, params=labruns.TINY[lab], backend="cpu")
    jobs.claim_next(db, worker_id="test-helper", lease_s=60)
    jobs.finish(db, job_id=job.id, worker_id="test-helper", ok=False, error=error)
    db.refresh(job)
    return job


LESSON = "transformer-scaling"
