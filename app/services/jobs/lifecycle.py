"""Lab jobs: create (within the learner's limits), claim in fair order with a lease, heartbeat, cancel,
finish, and reclaim jobs whose worker vanished.

Claiming is a conditional UPDATE (status must still be 'queued'), so two workers (or two dispatchers)
can never claim the same job on SQLite or PostgreSQL. Every running job carries a lease that its worker
renews; `reap_expired` requeues (or, after max_attempts, fails) a job whose lease ran out, so no job
stays 'running' forever. Both executors claim in the order of app/services/jobs/queue.py.

Who pays: a run that ended by the lab itself (success, its own error, its memory budget, its time
limit) or by the learner's cancel is charged GPU-seconds; an attempt lost to infrastructure (a worker,
node or dispatcher that died) is requeued without a charge and without counting as the learner's failure.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from pydantic import ValidationError
from sqlalchemy import CursorResult, Result, Row, bindparam, func, select, update
from sqlalchemy.orm import Session

from app.core.models import Job, JobLoss, Person, User, utcnow
from app.services.classes import scopes
from app.services.cluster.nodes import ClusterCapacity
from app.services.errors import Conflict
from app.services.jobs import limits as limit_service
from app.services.jobs import queue as queue_service
from app.services.jobs.labhost import HostCapacity
from labs import catalog
from labs.api import LabParams, byte_size, describe_error
from labs.catalog import LabSpec, Problem

BACKEND_CHOICES = catalog.BACKEND_CHOICES
log = logging.getLogger(__name__)


@dataclass
class Progress:
    """What a heartbeat records: how far the lab says it is and its last line (app/executors/labproc.py reads
    them from the lab's progress events)."""

    fraction: float
    message: str


class JobInputError(ValueError):
    """Bad lab name, backend or parameters; `errors` is [{field, message}], with `detail` (the arithmetic behind a
    refusal, in lines) where a lab's limit gives one."""

    def __init__(self, errors: list[dict]):
        super().__init__("; ".join(e["message"] for e in errors))
        self.errors = errors


def _rowcount(result: Result) -> int:
    """Rows an UPDATE matched: what decides a claim or a lease renewal race (a CursorResult underneath)."""
    return cast(CursorResult, result).rowcount


def validate_request(*, lab: str, params: dict, backend: str = "auto", host: HostCapacity) -> tuple[dict, str]:
    """(normalised params, backend the job runs) or JobInputError naming each bad field.

    The catalog's rules decide, against what this host's workers can give one job, so a run the
    lab would refuse (too many ranks, too much memory, a GPU backend without a GPU) is refused here.
    """
    if lab not in catalog.LABS:
        raise JobInputError(
            [{"field": "lab", "message": f"lab: unknown lab {lab[:60]!r}; available: {', '.join(catalog.names())}"}]
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
    problems = _whose_budget(host, spec, model, runs_on, host.problems(spec, model, runs_on))
    if problems:
        raise JobInputError(
            [{"field": p.field, "message": p.message} | ({"detail": p.detail} if p.detail else {}) for p in problems]
        )
    clean = model.model_dump(mode="json")
    try:  # the stored params are validated again wherever the job is read: they must read the same
        spec.params.model_validate(clean)
    except ValidationError as exc:
        raise JobInputError(describe_error(exc)) from None
    return clean, runs_on


def _whose_budget(
    host: HostCapacity, spec: LabSpec, model: LabParams, backend: str, problems: list[Problem]
) -> list[Problem]:
    """In Ray mode the catalog's "over the per-job budget" is a node's budget: the message then says which node's
    (the largest of the lab nodes online), so the learner knows no node could hold the run as asked."""
    if not isinstance(host, ClusterCapacity) or not host.memory_why:
        return problems
    need = spec.resources(model, backend)
    if need.memory_bytes <= host.capacity.memory_bytes:
        return problems
    field = need.memory_field or "params"
    out, said = [], False
    for p in problems:
        if not said and p.field == field and "per-job budget" in p.message:  # the catalog's memory problem
            p, said = Problem(p.field, f"{p.message.rstrip('.')} ({host.memory_why})", p.detail), True
        out.append(p)
    return out


def create_job(
    db: Session,
    *,
    owner: User,
    lab: str,
    params: dict,
    host: HostCapacity,
    backend: str = "auto",
    max_attempts: int = 2,
    replace_queued: bool = False,
) -> Job:
    """Queue a job; JobInputError (nothing stored) when the catalog or the executor refuses it, LimitReached
    (nothing stored) when the learner is at one of their limits.

    `auto` is resolved here to the best backend the executor has now, so the job records what will run and
    lands on the right queue; in the distributed mode the dispatcher resolves `auto` again when it starts the
    job, against the nodes online then (`requested_backend` keeps what was asked).
    `replace_queued`: the learner's still-queued runs of this lab are cancelled first (not running ones): the
    new run is what they want, and it should not wait behind, nor count against their limits with, the old one.
    """
    clean, runs_on = validate_request(lab=lab, params=params, backend=backend, host=host)
    spec = catalog.get(lab)
    need = spec.resources(spec.params.model_validate(clean), runs_on)
    # From here to the commit the learner's lock is held: the limits count what this learner has, and no
    # other submit of theirs can insert in between (two at once would both see room for one more).
    db.commit()  # end any read transaction, so the lock is the first thing the checking transaction does
    limit_service.hold(db, user_id=owner.id)
    try:
        replaced = []
        if replace_queued:
            replaced = list(
                db.scalars(select(Job).where(Job.owner_id == owner.id, Job.lab == lab, Job.status == "queued"))
            )
        limit_service.check(db, user=owner, ignoring=[j.id for j in replaced])
    except BaseException:
        db.rollback()  # release the lock; nothing was written
        raise
    now = utcnow()
    for old in replaced:
        db.execute(
            update(Job)
            .where(Job.id == old.id, Job.status == "queued")
            .values(status="cancelled", message="replaced by a newer run of this lab", finished_at=now)
        )
    job = Job(
        owner_id=owner.id,
        lab=lab,
        params=clean,
        backend=runs_on,
        requested_backend=backend,
        queue="gpu" if runs_on in catalog.GPU_BACKENDS else "cpu",
        ranks=need.ranks,
        gpus=need.gpus,
        status="queued",
        message=_queued_message(host),
        max_attempts=max_attempts,
    )
    db.add(job)
    db.commit()
    queue_service.changed(db)
    log.info("job %s queued: lab %s, backend %s (asked: %s), owner %s", job.id, lab, runs_on, backend, owner.id)
    return job


def _queued_message(host: HostCapacity) -> str:
    """A new job's first word on its card: in Ray mode with no lab node online, that its size was checked against the
    web host's own per-job budget, which the node that joins may not give."""
    if isinstance(host, ClusterCapacity) and not host.lab_nodes:
        return (
            "waiting for a lab node: none is online, so this run was checked against the web host's per-job memory "
            f"budget of {byte_size(host.capacity.memory_bytes)} (COURSE_JOB_MEMORY_MB there, or its default), not a lab "
            "node's; a node that joins with a smaller budget cannot run it"
        )
    return "waiting for a worker"


def set_backend(db: Session, *, job: Job, backend: str) -> None:
    """The dispatcher resolved `auto` to `backend` at start: record it with the resources that backend needs."""
    spec = catalog.get(job.lab)
    need = spec.resources(spec.params.model_validate(job.params), backend)
    job.backend, job.ranks, job.gpus = backend, need.ranks, need.gpus
    job.queue = "gpu" if backend in catalog.GPU_BACKENDS else "cpu"
    db.commit()


def get_job_for(db: Session, *, job_id: int, user: User, as_learner: bool = False) -> Job | None:
    """The job if `user` may see it, else None: its owner; a site admin (the cluster page lists every job in the
    queue); an instructor of a class the owner learns in; staff of a class only a job that a submitted report they
    grade there cites as evidence (job ids are sequential: a plain role check would let any grader read every
    learner's results). `as_learner`: whatever the user's roles, only their own jobs (an API token's request:
    app/web/deps.py `acts_as_learner`)."""
    job = db.get(Job, job_id)
    if job is None:
        return None
    if job.owner_id == user.id:
        return job
    if as_learner:
        return None
    if may_cancel(db, job, user):
        return job
    from app.services.grading import (
        grades as grading,  # here, not at the top: the lab worker imports this module too
    )

    return job if grading.grader_sees_job(db, user=user, job=job) else None


# What a page's job-status poll compares (app/web/views/live_jobs.py), and no more: by primary key, no JSON columns.
_LIVE = select(
    Job.id,
    Job.owner_id,
    Job.lab,
    Job.status,
    Job.progress,
    Job.message,
    Job.attempts,
    Job.cancel_requested_at,
    Job.node,
    Job.started_at,
    Job.finished_at,
).where(Job.id.in_(bindparam("ids", expanding=True)))


def live_rows(db: Session, *, ids: Collection[int]) -> list[Row]:
    """The jobs a page follows, as plain rows (one indexed read); whose they are is the caller's check."""
    return list(db.execute(_LIVE, {"ids": sorted(ids)})) if ids else []


def jobs_by_id(db: Session, *, ids: Collection[int]) -> list[Job]:
    """Jobs by id, in id order; whose they are is the caller's check."""
    return list(db.scalars(select(Job).where(Job.id.in_(sorted(ids))).order_by(Job.id))) if ids else []


def list_jobs(db: Session, *, owner: Person, lab: str | None = None, limit: int = 20) -> list[Job]:
    q = select(Job).where(Job.owner_id == owner.id)
    if lab:
        q = q.where(Job.lab == lab)
    return list(db.scalars(q.order_by(Job.id.desc()).limit(limit)))


def claim(db: Session, *, job_id: int, worker_id: str, lease_s: float) -> Job | None:
    """Claim one queued job (conditional UPDATE): the job, or None when someone else got it first."""
    now = utcnow()
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
            node=None,
            placement=None,
        )
    )
    db.commit()
    if _rowcount(res) != 1:
        return None
    job = db.get(Job, job_id)
    db.refresh(job)
    return job


def claim_next(db: Session, *, worker_id: str, lease_s: float, queues: tuple[str, ...] = ("cpu", "gpu")) -> Job | None:
    """The next job in fair order (app/services/jobs/queue.py) this worker can run, claimed; None when none is queued."""
    for job_id in queue_service.fair_order(db, limit=5, queues=queues):
        job = claim(db, job_id=job_id, worker_id=worker_id, lease_s=lease_s)
        if job is not None:
            return job
    return None


class Lease:
    """A heartbeat's answer: truthy while the worker still holds the job; `cancel` once someone asked to stop it."""

    def __init__(self, held: bool, cancel: bool = False):
        self.held, self.cancel = held, cancel

    def __bool__(self) -> bool:
        return self.held


def heartbeat(
    db: Session, *, job_id: int, worker_id: str, lease_s: float, progress: Progress | None, node: str | None = None
) -> Lease:
    """Renew the lease (and record progress). False means the lease was lost: stop working on it."""
    now = utcnow()
    values: dict = {"heartbeat_at": now, "lease_expires_at": now + timedelta(seconds=lease_s)}
    if progress is not None:
        values.update(progress=progress.fraction, message=progress.message[:500])
    if node is not None:
        values["node"] = node[:120]
    row = db.execute(
        update(Job)
        .where(Job.id == job_id, Job.worker_id == worker_id, Job.status == "running")
        .values(**values)
        .returning(Job.cancel_requested_at)
    ).first()
    db.commit()
    if row is None:
        return Lease(False)
    return Lease(True, cancel=row[0] is not None)


def renew_all(db: Session, *, worker_id: str, lease_s: float) -> set[int]:
    """Renew every lease `worker_id` holds in one UPDATE (the dispatcher's timer); the ids whose cancel was asked."""
    now = utcnow()
    rows = db.execute(
        update(Job)
        .where(Job.worker_id == worker_id, Job.status == "running")
        .values(heartbeat_at=now, lease_expires_at=now + timedelta(seconds=lease_s))
        .returning(Job.id, Job.cancel_requested_at)
    ).all()
    db.commit()
    return {job_id for job_id, cancel in rows if cancel is not None}


def say_waiting(db: Session, *, job: Job, message: str) -> None:
    """What a queued job waits for, on its card (a no-op when it says so already, or has left the queue)."""
    message = message[:500]
    if job.message == message:
        return
    db.execute(update(Job).where(Job.id == job.id, Job.status == "queued").values(message=message))
    db.commit()


def record_placement(db: Session, *, job_id: int, worker_id: str, node: str, placement: dict) -> None:
    db.execute(
        update(Job)
        .where(Job.id == job_id, Job.worker_id == worker_id, Job.status == "running")
        .values(node=node[:120], placement=placement)
    )
    db.commit()


def cancel(db: Session, *, job: Job, by: User) -> Job:
    """Stop a job: a queued one at once; a running one is marked, and its worker stops it within a heartbeat.

    Conflict when it has already finished. The caller has checked that `by` may cancel it (owner or instructor).
    """
    now = utcnow()
    who = "you" if by.id == job.owner_id else "an instructor"
    res = db.execute(
        update(Job)
        .where(Job.id == job.id, Job.status == "queued")
        .values(status="cancelled", message=f"cancelled by {who} before it started", finished_at=now)
    )
    if _rowcount(res) == 0:
        db.execute(
            update(Job)
            .where(Job.id == job.id, Job.status == "running", Job.cancel_requested_at.is_(None))
            .values(cancel_requested_at=now, message=f"stopping: cancelled by {who}")
        )
    db.commit()
    queue_service.changed(db)
    db.refresh(job)
    if job.status in ("succeeded", "failed"):
        raise Conflict(f"Job {job.id} has already {job.status}; there is nothing to cancel.")
    log.info("job %s: cancel asked by user %s (now %s)", job.id, by.id, job.status)
    return job


def _charge(job: Job, now) -> float:
    """GPU-seconds of the attempt that is ending: the GPUs it held times how long it held them."""
    if not job.gpus or job.started_at is None:
        return 0.0
    return job.gpus * max(0.0, (now - job.started_at).total_seconds())


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
    status: str | None = None,
) -> bool:
    """Record how the lab's attempt ended (the learner's result, charged); False if the job is not ours anymore.

    `status` overrides succeeded/failed: "cancelled" for a run stopped at the learner's or an instructor's request.
    """
    job = db.get(Job, job_id)
    if job is None:
        return False
    now = utcnow()
    final = status or ("succeeded" if ok else "failed")
    res = db.execute(
        update(Job)
        .where(Job.id == job_id, Job.worker_id == worker_id, Job.status == "running")
        .values(
            status=final,
            progress=1.0 if ok else Job.progress,
            result=result,
            error=error,
            bundle_dir=bundle_dir,
            message=message or final,
            finished_at=now,
            lease_expires_at=None,
            gpu_seconds=Job.gpu_seconds + _charge(job, now),
        )
    )
    db.commit()
    return _rowcount(res) == 1


def lost(db: Session, *, job_id: int, worker_id: str, reason: str) -> str | None:
    """An attempt lost to infrastructure (node, task or worker died): requeue it, or fail it with the reason
    after its last attempt. Never charged. Returns the new status, or None if the job was not ours."""
    job = db.get(Job, job_id)
    if job is None:
        return None
    db.refresh(job)
    now = utcnow()
    where = (Job.id == job_id, Job.worker_id == worker_id, Job.status == "running")
    values: dict[str, object]
    if job.cancel_requested_at is not None:
        values = dict(status="cancelled", finished_at=now, lease_expires_at=None, message="cancelled")
    elif job.attempts < job.max_attempts:
        values = dict(
            status="queued",
            worker_id=None,
            lease_expires_at=None,
            message=f"requeued: {reason} (attempt {job.attempts} of {job.max_attempts}; not counted against you)",
        )
    else:
        values = dict(
            status="failed",
            lease_expires_at=None,
            finished_at=now,
            error=f"The lab could not finish because of the course's infrastructure: {reason}. "
            f"All {job.max_attempts} attempts were lost this way; nothing is counted against you. Run it again.",
            message="failed: infrastructure",
        )
    loss = _loss(job, worker_id=worker_id, reason=reason, outcome=str(values["status"]), now=now)
    res = db.execute(update(Job).where(*where).values(**values))
    if _rowcount(res) == 1:
        db.add(loss)
    db.commit()
    if _rowcount(res) != 1:
        return None
    log.warning("job %s %s: %s", job_id, values["status"], reason)
    return str(values["status"])


def _loss(job: Job, *, worker_id: str | None, reason: str, outcome: str, now: datetime) -> JobLoss:
    """The lost attempt's row for the cluster page. Made before the UPDATE that gives the job back: the session
    applies that UPDATE to the loaded `job` too, clearing its worker."""
    return JobLoss(
        job_id=job.id, attempt=job.attempts, worker_id=worker_id, node=job.node, reason=reason, outcome=outcome, at=now
    )


def recent_losses(db: Session, *, since: datetime, limit: int = 50) -> tuple[list[JobLoss], list[tuple[str, int]]]:
    """The newest attempts lost to infrastructure since `since` (at most `limit`), and how many were lost where
    (node, else worker), most first: a node that keeps losing work stands out."""
    rows = list(db.scalars(select(JobLoss).where(JobLoss.at >= since).order_by(JobLoss.id.desc()).limit(limit)))
    where = func.coalesce(JobLoss.node, JobLoss.worker_id, "unknown")
    counts = db.execute(
        select(where, func.count()).where(JobLoss.at >= since).group_by(where).order_by(func.count().desc(), where)
    )
    return rows, [(str(w), int(n)) for w, n in counts]


def losses_of(db: Session, jobs: Collection[Job]) -> dict[int, list[JobLoss]]:
    """The lost attempts of each of `jobs`, oldest first, for their cards. Only a job past its first attempt
    can have one, so a card of a first attempt (nearly every card) costs no query."""
    ids = [j.id for j in jobs if j.attempts > 1]
    out: dict[int, list[JobLoss]] = {}
    if ids:
        for loss in db.scalars(select(JobLoss).where(JobLoss.job_id.in_(ids)).order_by(JobLoss.id)):
            out.setdefault(loss.job_id, []).append(loss)
    return out


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
        if job.cancel_requested_at is not None:
            values = dict(status="cancelled", lease_expires_at=None, finished_at=now, message="cancelled")
        elif job.attempts < job.max_attempts:
            values = dict(status="queued", worker_id=None, lease_expires_at=None, message=f"requeued: {lost}")
        else:
            values = dict(
                status="failed",
                lease_expires_at=None,
                finished_at=now,
                error=f"The lab could not finish: {lost}. No attempts are left; run it again.",
                message="failed: worker lost",
            )
        loss = _loss(job, worker_id=job.worker_id, reason=lost, outcome=str(values["status"]), now=now)
        res = db.execute(
            update(Job).where(Job.id == job.id, Job.status == "running", Job.lease_expires_at < now).values(**values)
        )
        if _rowcount(res) == 1:
            touched.append(job.id)
            db.add(loss)
            if values["status"] in ("queued", "cancelled"):
                log.warning("job %s requeued: %s", job.id, lost)
            else:
                log.error("job %s failed: %s; no attempts left", job.id, lost)
    db.commit()
    return touched


def latest_per_lab(
    db: Session, *, owner: Person, labs: Collection[str] | None = None, succeeded: bool = False
) -> dict[str, Job]:
    """The owner's newest job of each lab (of `labs`, when given; only succeeded ones with `succeeded`), by lab
    name; labs they never ran are absent. One query: the inner SELECT picks each lab's newest id through the
    owner_id index, the outer reads those rows by primary key."""
    if labs is not None and not labs:
        return {}
    where = [Job.owner_id == owner.id]
    if labs is not None:
        where.append(Job.lab.in_(sorted(labs)))
    if succeeded:
        where.append(Job.status == "succeeded")
    newest = select(func.max(Job.id)).where(*where).group_by(Job.lab)
    return {job.lab: job for job in db.scalars(select(Job).where(Job.id.in_(newest)))}


def latest_succeeded(db: Session, *, owner: Person, labs: Collection[str]) -> dict[str, Job]:
    """The owner's newest succeeded job of each lab in `labs`. Lesson parts that show a learner's own runs call
    it; parts that do not never query."""
    return latest_per_lab(db, owner=owner, labs=labs, succeeded=True)


def may_cancel(db: Session, job: Job, user: User) -> bool:
    """The owner may cancel their job, a site admin any job (the cluster page), an instructor a job of their class's
    learner; a grader may look but not stop it."""
    if job.owner_id == user.id or user.has_role("admin"):
        return True
    return scopes.instructs(db, user_id=user.id, owner_id=job.owner_id)
