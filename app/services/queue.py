"""The fair queue: the one order in which both executors start jobs, a job's place in it, and an ETA.

Order: round-robin across learners, FIFO within a learner. A learner's jobs that are queued or running
are numbered 1, 2, 3 ... in id order (their "turn"); queued jobs start by (turn, id). A learner's tenth
queued job therefore waits behind everyone's first, and a job whose learner already has one running
counts that running job as their first turn. A job requeued after an infrastructure failure keeps its id,
so it is its learner's next turn again.

One SQL window function (`row_number() OVER (PARTITION BY owner_id ORDER BY id)`) does it; SQLite (3.25+)
and PostgreSQL both run it, and `ix_jobs_status_owner_id` serves the scan. The embedded worker's claim
and the Ray dispatcher both call `fair_order`.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.models import Job, utcnow
from labs.api import count

ACTIVE = ("queued", "running")
ETA_SAMPLE = 20  # recent runs an estimate is made from; older runs say less about today's cluster


def _turns():
    """Queued and running jobs with each one's turn within its learner."""
    return (
        select(
            Job.id.label("id"),
            Job.status.label("status"),
            Job.queue.label("queue"),
            func.row_number().over(partition_by=Job.owner_id, order_by=Job.id).label("turn"),
        )
        .where(Job.status.in_(ACTIVE))
        .subquery()
    )


def fair_order(db: Session, *, limit: int = 20, queues: tuple[str, ...] | None = None) -> list[int]:
    """Ids of queued jobs in the order they should start (the first `limit`), optionally only these queues."""
    t = _turns()
    q = select(t.c.id).where(t.c.status == "queued")
    if queues is not None:
        q = q.where(t.c.queue.in_(queues))
    return list(db.scalars(q.order_by(t.c.turn, t.c.id).limit(limit)))


def position(db: Session, *, job: Job) -> int | None:
    """How many queued jobs start before this one (0: it is next); None when it is not queued."""
    if job.status != "queued":
        return None
    t = _turns()
    mine = select(t.c.turn).where(t.c.id == job.id).scalar_subquery()
    ahead = select(func.count()).where(
        t.c.status == "queued", or_(t.c.turn < mine, and_(t.c.turn == mine, t.c.id < job.id))
    )
    return int(db.scalar(ahead) or 0)


def _durations(db: Session, *conds) -> list[float]:
    rows = db.execute(
        select(Job.started_at, Job.finished_at)
        .where(Job.status == "succeeded", Job.started_at.is_not(None), Job.finished_at.is_not(None), *conds)
        .order_by(Job.finished_at.desc())
        .limit(ETA_SAMPLE)
    ).all()
    return [max(0.0, (f - s).total_seconds()) for s, f in rows if s and f]


@dataclass(frozen=True)
class Estimate:
    """A job's place and the arithmetic behind its ETA, in words a learner reads on the job card."""

    position: int | None  # queued jobs ahead of it; None once it runs
    start_in_s: float | None  # seconds until it starts (queued), None if unknown or running
    done_in_s: float | None  # seconds until it finishes, None if unknown
    basis: str  # where the numbers come from

    @property
    def known(self) -> bool:
        return self.done_in_s is not None


def estimate(db: Session, *, job: Job, slots: int, now: datetime | None = None) -> Estimate:
    """Position and ETA from the recent run times of this lab at this size (backend and ranks).

    `slots`: how many jobs the executor runs at once (embedded workers, or the cluster's running jobs).
    Jobs ahead are assumed to take what recent runs of any lab took; this job what its own lab and size took.
    """
    now = now or utcnow()
    own = _durations(db, Job.lab == job.lab, Job.backend == job.backend, Job.ranks == job.ranks)
    basis_own = f"the last {count(len(own), 'run')} of {job.lab} on {job.backend} at {count(job.ranks, 'rank')}"
    if not own:
        own = _durations(db, Job.lab == job.lab)
        basis_own = f"the last {count(len(own), 'run')} of {job.lab} at any size"
    if job.status == "running":
        elapsed = (now - job.started_at).total_seconds() if job.started_at else 0.0
        if job.progress >= 0.05:  # the lab's own progress is a better guide than history once it moves
            left = elapsed / job.progress - elapsed
            return Estimate(None, None, max(0.0, left), f"its progress so far ({job.progress:.0%} in {elapsed:.0f} s)")
        if own:
            return Estimate(None, None, max(0.0, statistics.median(own) - elapsed), basis_own)
        return Estimate(None, None, None, f"no finished run of {job.lab} yet to estimate from")
    pos = position(db, job=job)
    if pos is None:
        return Estimate(None, None, None, "")
    if not own:
        return Estimate(pos, None, None, f"no finished run of {job.lab} yet to estimate from")
    others = _durations(db) or own
    running = db.scalar(select(func.count()).where(Job.status == "running")) or 0
    slots = max(1, slots)
    # Rounds of `slots` jobs that must finish before this one starts: the running ones count as one round
    # when every slot is busy; the queued ones ahead fill further rounds.
    rounds = math.ceil(pos / slots) + (1 if running >= slots else 0)
    start = rounds * statistics.median(others)
    own_typical = statistics.median(own)
    return Estimate(pos, start, start + own_typical, basis_own)


def slots(settings: Settings, db: Session) -> int:
    """Jobs that run at once: the embedded workers, or in the cluster as many as run now (at least one)."""
    if settings.executor == "embedded" and settings.embedded_workers:
        return settings.embedded_workers
    running = db.scalar(select(func.count()).where(Job.status == "running")) or 0
    return max(1, int(running))


def estimates(db: Session, settings: Settings, jobs: list[Job]) -> dict[int, Estimate]:
    """Place in the queue and ETA of each unfinished job (the job card shows them)."""
    active = [j for j in jobs if not j.finished]
    if not active:
        return {}
    n = slots(settings, db)
    return {j.id: estimate(db, job=j, slots=n) for j in active}
