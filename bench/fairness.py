"""How fair the queue is with one worker: fair share (app/services/jobs/queue.py) against first-come-first-served.

    .venv/bin/python bench/fairness.py                    # 20 learners, a few seconds
    .venv/bin/python bench/fairness.py --heavy-every 3 --burst 10
    .venv/bin/python bench/fairness.py --database-url postgresql+psycopg://...   # an empty database of your own

20 learners arrive a few seconds apart; every fourth sends a burst of 8 env-check jobs, the others one each. One
worker runs them, one at a time, twice in the same run on fresh databases: once picking in the fair order
(`queue.fair_order`, then `jobs.claim`: what the embedded worker's `jobs.claim_next` does) and once first come,
first served (submit time, then id), the baseline. Each run takes env-check's cost-model time with a seeded ±25 %
jitter (the same jitter for both orders).

The worker's clock is virtual: each pick is made with `now` at the simulated time and the job's started/finished
times are written as simulated, so the bench measures the order the real SQL gives, not this machine's speed,
and ends in seconds. It prints, for each order:
- Jain's fairness index, (Σx)² / (n·Σx²), of the service each learner got while the queue was contended (the
  time to do half of all the work asked for), each learner's worker-seconds x normalised by its max-min fair share
  of that time (water-filling over what each asked for, as Jain et al. normalise by the optimal allocation);
  1.0 is perfectly fair; the target for fair share is ≥ 0.9;
- the longest and the median wait (submit to start) of a learner who sent one job;
- the mean time one pick's SQL took on this machine, and fair share's against first come's as a ratio.
Loopback only (a throwaway SQLite file by default); bounded: every job is picked at most once.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import select, update  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from app.core import migrate  # noqa: E402
from app.core.config import Settings  # noqa: E402
from app.core.db import make_engine, make_sessionmaker  # noqa: E402
from app.core.models import Job, utcnow  # noqa: E402
from app.services.accounts import users  # noqa: E402
from app.services.jobs import lifecycle as job_service  # noqa: E402
from app.services.jobs import limits as limit_service  # noqa: E402
from app.services.jobs import queue as queue_service  # noqa: E402
from app.services.jobs.labhost import HostCapacity  # noqa: E402

LAB = "env-check"
JITTER = 0.25  # run times vary by up to this fraction either way, seeded, so seconds (not only counts) matter
TARGET_JAIN = 0.9  # the target for the fair order (1 is perfectly fair)


@dataclass(frozen=True)
class Arrival:
    learner: int
    at_s: float  # seconds after the start
    runs_s: list[float]  # one entry per job in the burst: how long it runs


@dataclass
class Outcome:
    service_s: list[float]  # per learner: worker-seconds within the contended window
    one_job_waits_s: list[float]
    window_s: float
    pick_ms: list[float]


def plan(learners: int, heavy_every: int, burst: int, gap_s: float, seed: int) -> list[Arrival]:
    run_s = queue_service.model_seconds(LAB, {}, "cpu") or 5.0
    rng = random.Random(seed)
    out = []
    for i in range(learners):
        n = burst if i % heavy_every == 0 else 1
        out.append(Arrival(i, i * gap_s, [run_s * rng.uniform(1 - JITTER, 1 + JITTER) for _ in range(n)]))
    return out


Picker = Callable[[Session, datetime], list[int]]


def pick_fair(db: Session, now: datetime) -> list[int]:
    return queue_service.fair_order(db, limit=5, now=now)


def pick_fifo(db: Session, now: datetime) -> list[int]:
    q = select(Job.id).where(Job.status == "queued").order_by(Job.created_at, Job.id).limit(5)
    return list(db.scalars(q))


def simulate(database_url: str, arrivals: list[Arrival], pick: Picker) -> Outcome:
    data = Path(tempfile.mkdtemp(prefix="fairness-bench-"))
    settings = Settings.from_env({"COURSE_ENV": "test", "COURSE_DATA_DIR": str(data)}, database_url=database_url)
    migrate.upgrade(settings.db_url)
    engine = make_engine(settings.db_url)
    db = make_sessionmaker(engine)()
    try:
        return _run(db, arrivals, pick)
    finally:
        db.close()
        engine.dispose()


def _run(db: Session, arrivals: list[Arrival], pick: Picker) -> Outcome:
    prof = users.create_user(db, email="prof@example.org", password="correct horse", roles=["admin"])
    # No limits: the order, not a refusal at submit, is what is measured.
    limit_service.set_limits(db, by=prof, user_id=None, values=dict.fromkeys(limit_service.FIELDS))
    people = [users.create_user(db, email=f"l{a.learner}@example.org", password="correct horse") for a in arrivals]
    host, t0 = HostCapacity.local_default(), utcnow()
    owner_of: dict[int, int] = {}  # job id -> learner index
    run_of: dict[int, float] = {}
    pending = sorted(arrivals, key=lambda a: a.at_s)
    now_s, total = 0.0, sum(sum(a.runs_s) for a in arrivals)
    window_s = total / 2
    service = [0.0] * len(arrivals)
    waits: dict[int, float] = {}
    pick_ms: list[float] = []

    def arrive(until_s: float) -> None:
        while pending and pending[0].at_s <= until_s:
            a = pending.pop(0)
            for run_s in a.runs_s:
                job = job_service.create_job(db, owner=people[a.learner], lab=LAB, params={}, backend="cpu", host=host)
                db.execute(update(Job).where(Job.id == job.id).values(created_at=t0 + timedelta(seconds=a.at_s)))
                owner_of[job.id], run_of[job.id] = a.learner, run_s
            db.commit()

    for _ in range(sum(len(a.runs_s) for a in arrivals)):  # each job is picked once
        arrive(now_s)
        if not db.scalar(select(Job.id).where(Job.status == "queued").limit(1)):
            now_s = pending[0].at_s  # idle until the next learner arrives
            arrive(now_s)
        started = time.perf_counter()
        ids = pick(db, t0 + timedelta(seconds=now_s))
        pick_ms.append((time.perf_counter() - started) * 1000)
        job = next(j for j in (job_service.claim(db, job_id=i, worker_id="w", lease_s=60) for i in ids) if j)
        learner, run_s = owner_of[job.id], run_of[job.id]
        if len([a for a in arrivals if a.learner == learner][0].runs_s) == 1:
            waits[learner] = now_s - next(a.at_s for a in arrivals if a.learner == learner)
        assert job_service.finish(db, job_id=job.id, worker_id="w", ok=True)
        start, end = now_s, now_s + run_s
        db.execute(
            update(Job)
            .where(Job.id == job.id)
            .values(started_at=t0 + timedelta(seconds=start), finished_at=t0 + timedelta(seconds=end))
        )
        db.commit()
        service[learner] += max(0.0, min(end, window_s) - start)
        now_s = end
    return Outcome(service, list(waits.values()), window_s, pick_ms)


def fair_shares(asked: list[float], capacity: float) -> list[float]:
    """Max-min fair split of `capacity` (water-filling): nobody gets more than they asked for, the rest evenly."""
    share, left, open_ = [0.0] * len(asked), capacity, sorted(range(len(asked)), key=lambda i: asked[i])
    while open_:
        each = left / len(open_)
        i = open_[0]
        if asked[i] <= each:
            share[i] = asked[i]
            left -= asked[i]
            open_.pop(0)
        else:
            for j in open_:
                share[j] = each
            break
    return share


def jain(xs: list[float]) -> float:
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--learners", type=int, default=20)
    ap.add_argument("--heavy-every", type=int, default=4, help="every Nth learner sends a burst (the first does)")
    ap.add_argument("--burst", type=int, default=8, help="jobs in a heavy learner's burst")
    ap.add_argument("--gap", type=float, default=3.0, help="seconds between two learners' arrivals")
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--database-url", default="", help="an empty database to use (default: a throwaway SQLite file)")
    args = ap.parse_args()
    if not 2 <= args.learners <= 200 or not 1 <= args.burst <= 50 or args.heavy_every < 1:
        ap.error("--learners 2..200, --burst 1..50, --heavy-every at least 1")
    arrivals = plan(args.learners, args.heavy_every, args.burst, args.gap, args.seed)
    asked = [sum(a.runs_s) for a in arrivals]
    heavy = sum(1 for a in arrivals if len(a.runs_s) > 1)
    print(
        f"{args.learners} learners ({heavy} send {args.burst} jobs, {args.learners - heavy} send 1), {LAB} runs of "
        f"{statistics.mean(r for a in arrivals for r in a.runs_s):.1f} s on average, one worker"
    )
    results = {}
    for name, picker in (("first come", pick_fifo), ("fair share", pick_fair)):
        url = args.database_url or f"sqlite:///{Path(tempfile.mkdtemp(prefix='fairness-')) / 'bench.db'}"
        if args.database_url:
            _empty(url)  # both orders start from the same empty database
        out = simulate(url, arrivals, picker)
        share = fair_shares(asked, out.window_s)
        index = jain([got / fair for got, fair in zip(out.service_s, share, strict=True) if fair > 0])
        results[name] = (index, out)
        print(
            f"{name:>10}: Jain's index {index:.3f} over the first {out.window_s:.0f} s; one-job learners wait "
            f"at most {max(out.one_job_waits_s):.0f} s (median {statistics.median(out.one_job_waits_s):.0f} s); "
            f"a pick's SQL {statistics.mean(out.pick_ms):.2f} ms"
        )
    (f_index, f_out), (b_index, b_out) = results["fair share"], results["first come"]
    print(
        f"fair share / first come: Jain's index {f_index / b_index:.2f}x, longest one-job wait "
        f"{max(f_out.one_job_waits_s) / max(b_out.one_job_waits_s):.2f}x, pick SQL time "
        f"{statistics.mean(f_out.pick_ms) / statistics.mean(b_out.pick_ms):.2f}x"
    )
    ok = f_index >= TARGET_JAIN
    print(f"target: fair share's Jain's index >= {TARGET_JAIN}: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


def _empty(database_url: str) -> None:
    """Drop every table of the given database (the previous order's run, or whatever was there)."""
    from sqlalchemy import MetaData

    engine = make_engine(database_url)
    meta = MetaData()
    meta.reflect(engine)
    meta.drop_all(engine)
    engine.dispose()


if __name__ == "__main__":
    sys.exit(main())
