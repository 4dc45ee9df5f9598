"""The fair queue: the one order in which both executors start jobs, a job's place in it, and an ETA.

Order: fair share, as batch schedulers do it (Slurm's fair-share factor, Kueue's fair sharing). Queued jobs
start in order of their learner's recent usage, lowest first, FIFO within a learner, ties by submit time:

    usage = Σ finished runs  billed × max(run time, MIN_RUN_S) × 2^-(age / HALF_LIFE_S)   (age: since it ended)
          + Σ running runs   billed × max(elapsed, PENDING_RUN_S)
    key(job) = usage of its learner + Σ billed × PENDING_RUN_S of that learner's queued jobs ahead of it

`billed` is a run's CPU rank slots plus GPU_WEIGHT per GPU (Slurm's TRES billing). The key is the usage the
learner will have when this job starts, so a learner whose job is running, or who has more queued, goes behind one
who has waited, and the order read now is the order jobs start in: the job card's position and ETA come from it.
A learner's usage is read from the jobs table on every pick, so a learner whose run just ended has it charged at
once; one worker or many, nobody's burst of jobs can hold a later learner's single job behind it.

Infrastructure is never charged: attempts lost to a node or worker are not finished runs, and a job that ended
by such a loss (a `job_losses` row that did not requeue it) is left out. A requeued job keeps its id, so it stays
first in its learner's line.

One SQL query per pick (`fair_order`): usage summed over the last WINDOW_HALF_LIVES half-lives, only for learners
with a queued job (the owner_id index serves it), the line ahead as a window sum. Places and ETAs of every job at once
come from `simulate`, worked out once per change of the queue in each process (`snapshot`), so a class polling its
job cards reads the queue once per change, not once per poll.
The decay is piecewise linear between whole half-lives (exact at each, at most 6 % high between) because
SQLite has no exp() unless it was built with its math functions; the same expression runs on PostgreSQL. The
embedded worker's claim (jobs.claim_next) and the Ray dispatcher both call `fair_order`.
"""

from __future__ import annotations

import functools
import heapq
import json
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Float, Integer, and_, bindparam, case, exists, func, literal, or_, select
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import ColumnElement

from app.core.config import Settings
from app.core.models import FINISHED_STATUSES, Job, JobLoss, UTCDateTime, utcnow
from app.core.sqltime import epoch_s
from app.services.cluster import fit as cluster_fit
from app.services.cluster import nodes as cluster
from labs import catalog
from labs.api import count

ACTIVE = ("queued", "running")
EVERY_JOB = 1_000_000  # fair_order's limit for "all of them"
ETA_SAMPLE = 20  # recent runs an estimate is made from; older runs say less about today's cluster
SIMILAR = 2.0  # runs whose cost-model estimate is within this factor of a job's count as "the same size"

HALF_LIFE_S = 3600.0  # usage halves every hour: a heavy morning does not hold a learner back all afternoon
WINDOW_HALF_LIVES = 6  # older usage weighs under 2 % and is not read, so the sum scans a bounded window
# A GPU is the scarce resource in this course: one GPU-second bills as much as this many CPU rank-seconds.
GPU_WEIGHT = 4.0
# Every run is charged at least this long: starting one costs a worker a process and an import, and runs that end
# at once (bad parameters, a crash) would otherwise leave their learner at zero usage, first on every tie.
MIN_RUN_S = 1.0
# A run not yet over counts as at least this long (about one short lab): a learner whose job has just started,
# or who has jobs queued ahead, goes behind a learner who has waited, before any of those seconds have passed.
PENDING_RUN_S = 60.0


def _at_least(x: ColumnElement, floor: float) -> ColumnElement:
    return case((x < floor, literal(floor, Float())), else_=x)


# The statements are built once and take `now`, the half-life and the window's start as parameters: building
# them costs more Python time than SQLite takes to run them.
_NOW_S = bindparam("now_s", type_=Float())
_HALF_LIFE_S = bindparam("half_life_s", type_=Float())
_SINCE = bindparam("since", type_=UTCDateTime())


def _params(now: datetime | None, half_life_s: float) -> dict:
    now = now or utcnow()
    since = now - timedelta(seconds=WINDOW_HALF_LIVES * half_life_s)
    return {"now_s": now.timestamp(), "half_life_s": float(half_life_s), "since": since}


def _decay(age_s: ColumnElement) -> ColumnElement:
    """2^-(age / half-life), linear between whole half-lives; 0 past the window (those rows are not read anyway)."""
    h = _HALF_LIFE_S
    whens: list[tuple[ColumnElement, ColumnElement]] = [(age_s < 0.0, literal(1.0, Float()))]
    for k in range(WINDOW_HALF_LIVES):
        whens.append((age_s < (k + 1) * h, 2.0**-k * (1.0 - (age_s - k * h) / (2.0 * h))))
    return case(*whens, else_=literal(0.0, Float()))


def _billed() -> ColumnElement:
    return Job.ranks + GPU_WEIGHT * Job.gpus


@functools.cache
def _usage():
    """Per learner with a queued job: decayed billed seconds of finished runs in the window, plus running ones."""
    started, ended = epoch_s(Job.started_at), epoch_s(Job.finished_at)
    charge = case(
        (Job.status == "running", _billed() * _at_least(_NOW_S - started, PENDING_RUN_S)),
        else_=_billed() * _at_least(ended - started, MIN_RUN_S) * _decay(_NOW_S - ended),
    )
    ended_by_loss = exists().where(JobLoss.job_id == Job.id, JobLoss.outcome != "queued")
    return (
        select(Job.owner_id.label("owner_id"), func.sum(charge).label("usage"))
        .where(
            Job.owner_id.in_(select(Job.owner_id).where(Job.status == "queued")),
            Job.started_at.is_not(None),
            or_(
                Job.status == "running",
                and_(Job.status.in_(FINISHED_STATUSES), Job.finished_at > _SINCE, ~ended_by_loss),
            ),
        )
        .group_by(Job.owner_id)
        .subquery("usage")
    )


@functools.cache
def _keyed():
    """Queued jobs with their fair-share key (module docstring) and what breaks its ties."""
    usage = _usage()
    ahead = func.sum(_billed() * PENDING_RUN_S).over(partition_by=Job.owner_id, order_by=Job.id, rows=(None, -1))
    line = (
        select(
            Job.id.label("id"),
            Job.owner_id.label("owner_id"),
            Job.queue.label("queue"),
            Job.created_at.label("created_at"),
            func.coalesce(ahead, 0.0).label("ahead"),
        )
        .where(Job.status == "queued")
        .subquery("line")
    )
    return (
        select(
            line.c.id,
            line.c.queue,
            line.c.created_at,
            (line.c.ahead + func.coalesce(usage.c.usage, 0.0)).label("key"),
        )
        .select_from(line.outerjoin(usage, usage.c.owner_id == line.c.owner_id))
        .cte("keyed")
    )


@functools.cache
def _order(by_queue: bool):
    k = _keyed()
    q = select(k.c.id)
    if by_queue:
        q = q.where(k.c.queue.in_(bindparam("queues", expanding=True)))
    return q.order_by(k.c.key, k.c.created_at, k.c.id).limit(bindparam("limit", type_=Integer()))


@functools.cache
def _ahead_of():
    k = _keyed()
    me = k.alias("me")
    first = or_(
        k.c.key < me.c.key,
        and_(
            k.c.key == me.c.key,
            or_(k.c.created_at < me.c.created_at, and_(k.c.created_at == me.c.created_at, k.c.id < me.c.id)),
        ),
    )
    return select(func.count()).select_from(k.join(me, me.c.id == bindparam("job_id", type_=Integer()))).where(first)


def usage(db: Session, *, now: datetime | None = None, half_life_s: float = HALF_LIFE_S) -> dict[int, float]:
    """Each learner's fair-share usage in billed seconds (module docstring), for learners with a queued job."""
    u = _usage()
    rows = db.execute(select(u.c.owner_id, u.c.usage), _params(now, half_life_s))
    return {owner: float(v) for owner, v in rows}


def fair_order(
    db: Session,
    *,
    limit: int | None = 20,
    queues: tuple[str, ...] | None = None,
    now: datetime | None = None,
    half_life_s: float = HALF_LIFE_S,
) -> list[int]:
    """Ids of queued jobs in the order they should start (the first `limit`, None: all), optionally only these
    queues."""
    params = {**_params(now, half_life_s), "limit": EVERY_JOB if limit is None else limit}
    if queues is not None:
        params["queues"] = list(queues)
    return list(db.scalars(_order(queues is not None), params))


def position(db: Session, *, job: Job, now: datetime | None = None, half_life_s: float = HALF_LIFE_S) -> int | None:
    """How many queued jobs start before this one (0: it is next); None when it is not queued."""
    if job.status != "queued":
        return None
    return int(db.scalar(_ahead_of(), {**_params(now, half_life_s), "job_id": job.id}) or 0)


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
    """The lab's cost-model estimate of one run (labs.spec LabSpec.cost); None for params it no longer takes."""
    return _model_seconds(lab, json.dumps(params or {}, sort_keys=True), backend)


@functools.lru_cache(maxsize=4096)  # a class queues a handful of sizes: validating each job's params was most of an ETA
def _model_seconds(lab: str, params: str, backend: str) -> float | None:
    try:
        spec = catalog.get(lab)
        return spec.estimate_seconds(spec.params.model_validate(json.loads(params)), backend)
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


def estimate(db: Session, *, job: Job, slots: int, now: datetime | None = None) -> Estimate:
    """Position and ETA of one job, from `simulate` (the whole queue worked out at once)."""
    found = simulate(db, slots=slots, now=now).get(job.id)
    return found if found is not None and job.status in ACTIVE else Estimate(None, None, None, "")


def simulate(
    db: Session, *, slots: int, now: datetime | None = None, waiting: Callable[[Job | Row], str | None] | None = None
) -> dict[int, Estimate]:
    """Every queued and running job's Estimate, worked out together: each job's run from `run_estimate`; a running
    job's ETA is what is left of it; the queued jobs, in fair order, each start in the slot that frees first (of
    `slots`, the executor's jobs at once), after the running jobs and every queued job ahead of it.

    One read of the fair order, one of the active jobs, one per (lab, backend) of recent runs: the same however long
    the queue. `waiting`: why no node can run a queued job now (`no_start`), None when one can; such a job gets its
    place and the reason, no ETA. A queued job whose run cannot be estimated holds its slot PENDING_RUN_S for those behind it."""
    now = now or utcnow()
    history: History = {}
    order = fair_order(db, limit=None, now=now)
    rows = {r.id: r for r in db.execute(_ACTIVE_ROWS)}
    out: dict[int, Estimate] = {}
    busy = []  # seconds until each slot frees, running jobs first
    for r in rows.values():
        if r.status == "running":
            e = run_estimate(db, lab=r.lab, params=r.params, backend=r.backend, history=history)
            elapsed = (now - r.started_at).total_seconds() if r.started_at else 0.0
            left, basis = _left(r, e, elapsed)
            out[r.id] = Estimate(None, None, left, basis)
            busy.append(left or 0.0)
    n = max(1, slots)
    busy = sorted(busy)[:n] + [0.0] * max(0, n - len(busy))
    heapq.heapify(busy)
    for pos, job_id in enumerate(order):
        q = rows.get(job_id)
        if q is None or q.status != "queued":  # moved on between the two reads: its place still counts
            continue
        r = q
        mine = run_estimate(db, lab=r.lab, params=r.params, backend=r.backend, history=history)
        start = busy[0]
        if waiting is not None and (why := waiting(r)) is not None:
            out[r.id] = Estimate(pos, None, None, why)
        elif mine is None:
            out[r.id] = Estimate(pos, None, None, f"no estimate for {r.lab} with these parameters")
        else:
            out[r.id] = Estimate(pos, start, start + mine.seconds, mine.basis)
        heapq.heapreplace(busy, start + (mine.seconds if mine else PENDING_RUN_S))
    return out


def _left(job: Job | Row, est: RunEstimate | None, elapsed: float) -> tuple[float | None, str]:
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


def no_start(settings: Settings, db: Session) -> Callable[[Job | Row], str | None]:
    """Ray mode: for a queued job, the reason it has no ETA when no lab node online can run it (app/services/cluster/
    fit.py names the resource and the node); None when one can. An ETA there would be a promise the cluster cannot
    keep: the job starts only when a node that can run it joins."""
    if settings.executor != "ray":
        return lambda job: None
    nodes = cluster.online_nodes(db)

    def why(job: Job | Row) -> str | None:
        f = cluster_fit.fit(
            nodes,
            lab=job.lab,
            params=job.params or {},
            requested=job.requested_backend or job.backend,
            backend=job.backend,
            fallback_memory=settings.job_memory_bytes,
        )
        if f.backend is not None:
            return None
        if f.resource == "nodes":
            return f"{f.why}, so no start can be estimated; it starts when one joins"
        return f"no lab node online can run it: {f.why}; it starts only when a node that can joins"

    return why


# ---------------------------------------------------------------- one snapshot of the queue per process

# Every job card, job list and API answer, and each page's status poll, reads the queue's places and ETAs from this
# process's snapshot: `simulate` once when the queue changed, not once per card and poll. Whether it changed is one
# read of the active jobs' ids and attempts per status (FINGERPRINT), asked before each use, or at most every
# SNAPSHOT_CHECK_S by the polls; a snapshot older than SNAPSHOT_MAX_S is worked out again even when nothing changed
# (running jobs' progress and the decay of usage move ETAs a little). In Ray mode a second read, of the online lab
# nodes, joins it: a node joining or leaving decides which queued jobs can start (`no_start`) with no job changing.
SNAPSHOT_CHECK_S = 1.0
SNAPSHOT_MAX_S = 10.0

_ACTIVE_ROWS = select(
    Job.id, Job.status, Job.lab, Job.params, Job.backend, Job.requested_backend, Job.progress, Job.started_at
).where(Job.status.in_(ACTIVE))
# a job joins (new id), starts (moves between the statuses), ends (leaves), or goes back after a lost attempt
# (its attempts): each changes a count or a sum here
_FINGERPRINT = (
    select(Job.status, func.count(), func.sum(Job.id), func.max(Job.id), func.sum(Job.attempts))
    .where(Job.status.in_(ACTIVE))
    .group_by(Job.status)
)


@dataclass
class Snapshot:
    at: datetime  # when the estimates were worked out; they are told from now by subtracting the age
    made: float  # time.monotonic() then
    checked: float  # time.monotonic() of the last fingerprint that matched
    fingerprint: tuple
    status: dict[int, str]  # job id -> queued | running, then
    estimates: dict[int, Estimate]

    def estimate(self, job_id: int, now: datetime) -> Estimate:
        est = self.estimates.get(job_id)
        if est is None:
            return Estimate(None, None, None, "")
        age = max(0.0, (now - self.at).total_seconds())
        start = None if est.start_in_s is None else max(0.0, est.start_in_s - age)
        done = None if est.done_in_s is None else max(0.0, est.done_in_s - age)
        return Estimate(est.position, start, done, est.basis)


_snapshots: dict[str, Snapshot] = {}
_making = threading.Lock()


def fingerprint(db: Session, settings: Settings) -> tuple:
    jobs = tuple(sorted(tuple(row) for row in db.execute(_FINGERPRINT)))
    if settings.executor != "ray":
        return jobs
    return jobs, cluster.online_fingerprint(db)


def changed(db: Session) -> None:
    """This process changed the queue (a submit, a cancel): its next reader works the snapshot out again, so the
    learner who did it sees it at once. Other processes see it at their next check."""
    _snapshots.pop(str(db.get_bind().engine.url), None)


def snapshot(db: Session, settings: Settings, *, check: bool = True, force: bool = False) -> Snapshot:
    """This process's snapshot of the queue for `db`'s database: the kept one while the queue is unchanged, else a
    new one. `check=False`: trust a snapshot checked within SNAPSHOT_CHECK_S without reading anything; `force`:
    work it out again whatever the fingerprint says."""
    key = str(db.get_bind().engine.url)
    kept = _snapshots.get(key)
    mono = time.monotonic()
    if kept is not None and not force and mono - kept.made < SNAPSHOT_MAX_S:
        if not check and mono - kept.checked < SNAPSHOT_CHECK_S:
            return kept
        if fingerprint(db, settings) == kept.fingerprint:
            kept.checked = mono
            return kept
    with _making:  # one thread works it out; the others waiting here take what it made
        latest = _snapshots.get(key)
        if latest is not None and latest is not kept and latest.made >= mono:
            return latest
        mark, now = fingerprint(db, settings), utcnow()
        ests = simulate(db, slots=slots(settings, db), now=now, waiting=no_start(settings, db))
        status = {i: ("running" if e.position is None else "queued") for i, e in ests.items()}
        made = Snapshot(now, time.monotonic(), time.monotonic(), mark, status, ests)
        _snapshots[key] = made
        return made


def estimates(db: Session, settings: Settings, jobs: Sequence[Job | Row], *, check: bool = True) -> dict[int, Estimate]:
    """Place in the queue and ETA of each unfinished job (the job card shows them), from the snapshot; a queued job
    that no lab node online can run gets its place and the reason, without an ETA. A job whose status differs from
    the snapshot's has moved since it was made: the snapshot is worked out again, once. `check=False`: a snapshot
    checked within SNAPSHOT_CHECK_S is trusted without a read (the pages' polls)."""
    active = [j for j in jobs if j.status in ACTIVE]
    if not active:
        return {}
    snap = snapshot(db, settings, check=check)
    if any(snap.status.get(j.id) != j.status for j in active):
        snap = snapshot(db, settings, force=True)
    now = utcnow()
    return {j.id: snap.estimate(j.id, now) for j in active}


def kept_estimates(db: Session, jobs: Sequence[Job | Row]) -> dict[int, Estimate] | None:
    """`estimates` from this process's snapshot when that needs no read at all (checked within SNAPSHOT_CHECK_S,
    every job where it was); None otherwise. Lets a poll on the event loop leave any read to a worker thread."""
    kept = _snapshots.get(str(db.get_bind().engine.url))
    if kept is None or time.monotonic() - kept.checked >= SNAPSHOT_CHECK_S:
        return None
    active = [j for j in jobs if j.status in ACTIVE]
    if any(kept.status.get(j.id) != j.status for j in active):
        return None
    now = utcnow()
    return {j.id: kept.estimate(j.id, now) for j in active}
