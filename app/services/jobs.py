"""Lab jobs: create, claim with a lease, heartbeat, finish, and reclaim jobs whose worker vanished.

Claiming is a conditional UPDATE (status must still be 'queued'), so two workers can never
claim the same job on SQLite or PostgreSQL. Every running job carries a lease that the worker
renews with each heartbeat; `reap_expired` requeues (or, after max_attempts, fails) a job
whose lease ran out, so no job stays 'running' forever.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from pydantic import ValidationError
from sqlalchemy import CursorResult, Result, func, select, update
from sqlalchemy.orm import Session

from app.models import Job, User, utcnow
from app.services.labhost import HostCapacity
from labs import catalog
from labs.params import describe_error

BACKEND_CHOICES = catalog.BACKEND_CHOICES
log = logging.getLogger(__name__)


class JobInputError(ValueError):
    """Bad lab name, backend or parameters; `errors` is [{field, message}]."""

    def __init__(self, errors: list[dict]):
        super().__init__("; ".join(e["message"] for e in errors))
        self.errors = errors


def _rowcount(result: Result) -> int:
    """Rows an UPDATE matched: what decides a claim or a lease renewal race (a CursorResult underneath)."""
    return cast(CursorResult, result).rowcount


@dataclass
class Progress:
    fraction: float
    message: str


def validate_request(*, lab: str, params: dict, backend: str = "auto", host: HostCapacity) -> tuple[dict, str]:
    """(normalised params, backend the job runs) or JobInputError naming each bad field.

    The catalog's rules decide, against what this host's workers can give one job, so a run the
    lab would refuse (too many ranks, too much memory, a GPU backend without a GPU) is refused here.
    """
    if lab not in catalog.LABS:
        raise JobInputError(
            [{"field": "lab", "message": f"lab: unknown lab {lab!r}; available: {', '.join(catalog.names())}"}]
        )
    if backend not in BACKEND_CHOICES:
        raise JobInputError(
            [{"field": "backend", "message": f"backend: got {backend!r}, expected one of {', '.join(BACKEND_CHOICES)}"}]
        )
    if not isinstance(params, dict):
        raise JobInputError([{"field": "params", "message": "params: expected a JSON object"}])
    spec = catalog.get(lab)
    try:
        model = spec.params.model_validate(params)
    except ValidationError as exc:
        raise JobInputError(describe_error(exc)) from None
    runs_on = host.resolve(spec, backend)
    problems = host.problems(spec, model, runs_on)
    if problems:
        raise JobInputError([{"field": p.field, "message": p.message} for p in problems])
    return model.model_dump(mode="json"), runs_on


def create_job(
    db: Session,
    *,
    owner: User,
    lab: str,
    params: dict,
    host: HostCapacity,
    backend: str = "auto",
    max_attempts: int = 2,
) -> Job:
    """Queue a job; JobInputError (nothing stored) when the catalog or this host refuses it.

    `auto` is resolved here to the best backend the host has, so the job records what will run
    and lands on the right queue.
    """
    clean, runs_on = validate_request(lab=lab, params=params, backend=backend, host=host)
    job = Job(
        owner_id=owner.id,
        lab=lab,
        params=clean,
        backend=runs_on,
        queue="gpu" if runs_on in catalog.GPU_BACKENDS else "cpu",
        status="queued",
        message="waiting for a worker",
        max_attempts=max_attempts,
    )
    db.add(job)
    db.commit()
    log.info("job %s queued: lab %s, backend %s (asked: %s), owner %s", job.id, lab, runs_on, backend, owner.id)
    return job


def get_job(db: Session, *, job_id: int) -> Job | None:
    return db.get(Job, job_id)


def get_job_for(db: Session, *, job_id: int, user: User) -> Job | None:
    """The job if `user` may see it, else None: its owner and instructors always; a grader only a job that a
    submitted report they grade cites as evidence (job ids are sequential: a plain role check would let any
    grader read every learner's results)."""
    job = db.get(Job, job_id)
    if job is None:
        return None
    if job.owner_id == user.id or user.has_role("instructor"):
        return job
    if user.has_role("grader"):
        from app.services import grading  # here, not at the top: the lab worker imports this module too

        return job if grading.grader_sees_job(db, user=user, job=job) else None
    return None


def list_jobs(db: Session, *, owner: User, lab: str | None = None, limit: int = 20) -> list[Job]:
    q = select(Job).where(Job.owner_id == owner.id)
    if lab:
        q = q.where(Job.lab == lab)
    return list(db.scalars(q.order_by(Job.id.desc()).limit(limit)))


def claim_next(db: Session, *, worker_id: str, lease_s: float, queues: tuple[str, ...] = ("cpu", "gpu")) -> Job | None:
    now = utcnow()
    candidates = db.scalars(
        select(Job.id).where(Job.status == "queued", Job.queue.in_(queues)).order_by(Job.id).limit(5)
    ).all()
    for job_id in candidates:
        res = db.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "queued")
            .values(
                status="running",
                worker_id=worker_id,
                attempts=Job.attempts + 1,
                lease_expires_at=now + timedelta(seconds=lease_s),
                heartbeat_at=now,
                started_at=now,
                progress=0.0,
                message="starting",
            )
        )
        db.commit()
        if _rowcount(res) == 1:
            job = db.get(Job, job_id)
            db.refresh(job)
            return job
    return None


def heartbeat(db: Session, *, job_id: int, worker_id: str, lease_s: float, progress: Progress | None) -> bool:
    """Renew the lease (and record progress). False means the lease was lost: stop working on it."""
    now = utcnow()
    values: dict = {"heartbeat_at": now, "lease_expires_at": now + timedelta(seconds=lease_s)}
    if progress is not None:
        values.update(progress=progress.fraction, message=progress.message[:500])
    res = db.execute(
        update(Job).where(Job.id == job_id, Job.worker_id == worker_id, Job.status == "running").values(**values)
    )
    db.commit()
    return _rowcount(res) == 1


def finish(
    db: Session,
    *,
    job_id: int,
    worker_id: str,
    ok: bool,
    result: dict | None = None,
    error: str | None = None,
    bundle_dir: str | None = None,
    message: str = "",
) -> bool:
    res = db.execute(
        update(Job)
        .where(Job.id == job_id, Job.worker_id == worker_id, Job.status == "running")
        .values(
            status="succeeded" if ok else "failed",
            progress=1.0 if ok else Job.progress,
            result=result,
            error=error,
            bundle_dir=bundle_dir,
            message=message or ("finished" if ok else "failed"),
            finished_at=utcnow(),
            lease_expires_at=None,
        )
    )
    db.commit()
    return _rowcount(res) == 1


def release(db: Session, *, job_id: int, worker_id: str, reason: str) -> None:
    """An orderly shutdown hands the job back without spending one of its attempts."""
    db.execute(
        update(Job)
        .where(Job.id == job_id, Job.worker_id == worker_id, Job.status == "running")
        .values(status="queued", worker_id=None, lease_expires_at=None, attempts=Job.attempts - 1, message=reason)
    )
    db.commit()


def reap_expired(db: Session, *, now: datetime | None = None) -> list[int]:
    """Requeue or fail running jobs whose lease ran out. Returns the ids touched."""
    now = now or utcnow()
    touched = []
    stale = db.scalars(select(Job).where(Job.status == "running", Job.lease_expires_at < now)).all()
    for job in stale:
        lost = f"worker {job.worker_id} stopped renewing its lease (attempt {job.attempts} of {job.max_attempts})"
        values: dict[str, object]
        if job.attempts < job.max_attempts:
            values = dict(status="queued", worker_id=None, lease_expires_at=None, message=f"requeued: {lost}")
        else:
            values = dict(
                status="failed",
                lease_expires_at=None,
                finished_at=now,
                error=f"The lab could not finish: {lost}. No attempts are left; run it again.",
                message="failed: worker lost",
            )
        res = db.execute(
            update(Job).where(Job.id == job.id, Job.status == "running", Job.lease_expires_at < now).values(**values)
        )
        if _rowcount(res) == 1:
            touched.append(job.id)
            if values["status"] == "queued":
                log.warning("job %s requeued: %s", job.id, lost)
            else:
                log.error("job %s failed: %s; no attempts left", job.id, lost)
    db.commit()
    return touched


def latest_succeeded(db: Session, *, owner: User, labs: Collection[str]) -> dict[str, Job]:
    """The owner's newest succeeded job of each lab in `labs` (labs they never ran are absent), in one query:
    the inner SELECT picks each lab's newest id through the owner_id index, the outer reads those rows by
    primary key. Lesson parts that show a learner's own runs call it; parts that do not never query."""
    if not labs:
        return {}
    newest = (
        select(func.max(Job.id))
        .where(Job.owner_id == owner.id, Job.status == "succeeded", Job.lab.in_(sorted(labs)))
        .group_by(Job.lab)
    )
    return {job.lab: job for job in db.scalars(select(Job).where(Job.id.in_(newest)))}
