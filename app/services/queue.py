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

import statistics
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.models import Job, utcnow
from labs import catalog
from labs.api import count

ACTIVE = ("queued", "running")
ETA_SAMPLE = 20  # recent runs an estimate is made from; older runs say less about today's cluster
SIMILAR = 2.0  # runs whose cost-model estimate is within this factor of a job's count as "the same size"


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


def model_seconds(lab: str, params: dict | None, backend: str) -> float | None:
    """The lab's cost-model estimate of one run (labs.catalog LabSpec.cost); None for params it no longer takes."""
    try:
        spec = catalog.get(lab)
        return spec.estimate_seconds(spec.params.model_validate(params or {}), backend)
    except (KeyError, ValueError):  # an unknown lab or params of an older version: nothing to scale by
        return None


@dataclass(frozen=True)
class RunEstimate:
    """How long one run of a lab at a size takes here, and where that comes from."""

    seconds: float
    basis: str


History = dict[tuple[str, str], list[tuple[float, float]]]  # (lab, backend) -> its recent runs' ratios


def _ratios(db: Session, lab: str, backend: str, history: History | None) -> list[tuple[float, float]]:
    """(took / its model, its model) of this lab's recent finished runs on `backend`; read once per (lab, backend)
    when the caller keeps a `history` for the jobs it estimates together."""
    if history is not None and (lab, backend) in history:
        return history[(lab, backend)]
    rows = db.execute(
        select(Job.params, Job.started_at, Job.finished_at)
        .where(
            Job.status == "succeeded",
            Job.lab == lab,
            Job.backend == backend,
            Job.started_at.is_not(None),
            Job.finished_at.is_not(None),
        )
        .order_by(Job.finished_at.desc())
        .limit(ETA_SAMPLE)
    ).all()
    ratios: list[tuple[float, float]] = []  # (took / its model, its model)
    for prm, s, f in rows:
        m = model_seconds(lab, prm, backend)
        took = (f - s).total_seconds()
        if m and took > 0:
            ratios.append((took / m, m))
    if history is not None:
        history[(lab, backend)] = ratios
    return ratios


def run_estimate(
    db: Session, *, lab: str, params: dict | None, backend: str, history: History | None = None
) -> RunEstimate | None:
    """Seconds one run takes: the lab's cost model for its size, scaled by how long this lab's recent runs on this
    backend took against their own cost-model estimates (runs of a similar size first). The model alone answers
    until a run has finished; the ratio corrects it for this host's speed and load afterwards."""
    guess = model_seconds(lab, params, backend)
    if guess is None:
        return None
    ratios = _ratios(db, lab, backend, history)
    if not ratios:
        return RunEstimate(guess, "the lab's cost model for this size; no run of it has finished here yet")
    similar = [r for r, m in ratios if 1 / SIMILAR <= m / guess <= SIMILAR]
    used = similar or [r for r, _ in ratios]
    size = "of a similar size" if similar else "of other sizes"
    return RunEstimate(
        guess * statistics.median(used), f"from the last {count(len(used), 'run')} of {lab} {size} on {backend}"
    )


def estimate(
    db: Session, *, job: Job, slots: int, now: datetime | None = None, history: History | None = None
) -> Estimate:
    """Position and ETA: this job's run from `run_estimate`; the queue ahead of it from the same estimate of each job
    running (what is left of it) and each queued job that starts first, shared among `slots`.

    `slots`: how many jobs the executor runs at once (embedded workers, or the cluster's running jobs).
    """
    now = now or utcnow()
    history = {} if history is None else history  # each (lab, backend)'s runs read once, however long the queue
    mine = run_estimate(db, lab=job.lab, params=job.params, backend=job.backend, history=history)
    if job.status == "running":
        elapsed = (now - job.started_at).total_seconds() if job.started_at else 0.0
        left, basis = _left(job, mine, elapsed)
        return Estimate(None, None, left, basis)
    pos = position(db, job=job)
    if pos is None:
        return Estimate(None, None, None, "")
    if mine is None:
        return Estimate(pos, None, None, f"no estimate for {job.lab} with these parameters")
    slots = max(1, slots)
    running = list(db.scalars(select(Job).where(Job.status == "running")))
    ahead_ids = fair_order(db, limit=pos) if pos else []
    ahead = list(db.scalars(select(Job).where(Job.id.in_(ahead_ids)))) if ahead_ids else []
    busy = []  # seconds until each slot frees, running jobs first
    for r in running:
        e = run_estimate(db, lab=r.lab, params=r.params, backend=r.backend, history=history)
        el = (now - r.started_at).total_seconds() if r.started_at else 0.0
        busy.append(_left(r, e, el)[0] or 0.0)
    busy = sorted(busy)[:slots] + [0.0] * max(0, slots - len(busy))
    for a in sorted(ahead, key=lambda j: ahead_ids.index(j.id)):  # each starts in the slot that frees first
        e = run_estimate(db, lab=a.lab, params=a.params, backend=a.backend, history=history)
        busy.sort()
        busy[0] += e.seconds if e else mine.seconds
    start = min(busy)
    return Estimate(pos, start, start + mine.seconds, mine.basis)


def _left(job: Job, est: RunEstimate | None, elapsed: float) -> tuple[float | None, str]:
    """Seconds left of a running job: the run estimate minus what has passed, leaning on the lab's own progress as
    it grows (progress says nothing about start-up, so it is trusted only in proportion to how far it got)."""
    p = job.progress or 0.0
    by_progress = elapsed / p - elapsed if p >= 0.05 else None
    if est is None:
        if by_progress is None:
            return None, f"no estimate for {job.lab} with these parameters"
        return max(0.0, by_progress), f"its progress so far ({p:.0%} in {elapsed:.0f} s)"
    by_estimate = est.seconds - elapsed
    if by_progress is None or by_estimate > 0 and p < 0.5:
        # Early on, or still inside its estimate: the estimate, or the progress if the run has overrun it.
        left = by_estimate if by_estimate > 0 else (by_progress if by_progress is not None else 0.0)
        return max(0.0, left), est.basis
    return max(
        0.0, p * by_progress + (1 - p) * max(0.0, by_estimate)
    ), f"its progress so far ({p:.0%} in {elapsed:.0f} s)"


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
    history: History = {}  # shared by the jobs listed together: one read per (lab, backend)
    return {j.id: estimate(db, job=j, slots=n, history=history) for j in active}
