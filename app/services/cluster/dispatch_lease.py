"""One active Ray dispatcher, elected through the database (docs/dispatcher.md).

Every dispatcher calls `try_acquire` once a cycle. It reads the lease row, then writes it with an UPDATE whose
WHERE repeats what it read (the holder) and asks that the lease be its own, free, or expired: a compare-and-set.
On PostgreSQL a second UPDATE of the same row waits for the first to commit and then re-checks its WHERE against
the new row (READ COMMITTED), and SQLite runs one writer at a time, so of two dispatchers racing for an expired
lease exactly one sees a row updated. The winner is active until it stops renewing for `lease_s`; the others
stand by and try again each cycle. Times are the dispatchers' own clocks (UTC): hosts that run dispatchers keep
them in step (NTP), as they must for the jobs' leases already.

`dispatchers_seen` keeps each dispatcher's latest cycle (active or standing by, and its last error) for the
instructor's cluster page.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, delete, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.models import DispatcherLease, DispatcherSeen, Job, utcnow

NAME = "ray"  # the one lease row of a deployment (migration 0012 inserts it)
PREFIX = "dispatcher:"  # jobs.worker_id of a job a dispatcher claimed starts so
FORGET_AFTER = timedelta(days=1)  # a dispatcher not seen for this long leaves the cluster page


def new_id() -> str:
    """host:pid:uuid, unique across restarts of the same pid: a job claimed by a dispatcher that died is never
    taken for the new one's (jobs.worker_id holds it, String(80))."""
    return f"{PREFIX}{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Lease:
    active: bool  # the caller holds the lease now
    holder: str | None  # who holds it (the caller, or the active dispatcher a standby names)
    acquired_at: datetime | None
    renewed_at: datetime | None
    expires_at: datetime | None
    took_over_from: str | None = None  # the caller just became active, after this holder's lease ran out


def try_acquire(db: Session, *, me: str, lease_s: float, now: datetime | None = None) -> Lease:
    """Take or renew the lease if it is ours, free or expired (one conditional UPDATE); else who holds it."""
    now = now or utcnow()
    row = db.get(DispatcherLease, NAME, populate_existing=True)
    if row is None:  # a database migrated by hand without the row: the first dispatcher inserts it
        try:
            db.add(DispatcherLease(name=NAME))
            db.commit()
        except IntegrityError:
            db.rollback()
        row = db.get(DispatcherLease, NAME, populate_existing=True)
        assert row is not None
    seen_holder = row.holder
    free = seen_holder is None or seen_holder == me or row.expires_at is None or row.expires_at < now
    if not free:
        db.rollback()
        return Lease(False, seen_holder, row.acquired_at, row.renewed_at, row.expires_at)
    L = DispatcherLease
    res = db.execute(
        update(L)
        .where(
            L.name == NAME,
            L.holder.is_(None) if seen_holder is None else L.holder == seen_holder,  # the compare of the CAS
            or_(L.holder.is_(None), L.holder == me, L.expires_at.is_(None), L.expires_at < now),
        )
        .values(
            holder=me,
            acquired_at=case((L.holder == me, L.acquired_at), else_=now),
            renewed_at=now,
            expires_at=now + timedelta(seconds=lease_s),
        )
        .execution_options(synchronize_session=False)
    )
    db.commit()
    won = getattr(res, "rowcount", 0) == 1
    row = db.get(DispatcherLease, NAME, populate_existing=True)
    assert row is not None
    db.rollback()  # end the read's transaction: a standby must not hold one open between cycles
    took = seen_holder if won and seen_holder not in (None, me) else None
    return Lease(won, row.holder, row.acquired_at, row.renewed_at, row.expires_at, took_over_from=took)


def release(db: Session, *, me: str) -> bool:
    """An orderly stop hands the lease on at once: a standby takes it at its next cycle."""
    res = db.execute(
        update(DispatcherLease)
        .where(DispatcherLease.name == NAME, DispatcherLease.holder == me)
        .values(holder=None, expires_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    db.commit()
    return getattr(res, "rowcount", 0) == 1


def orphaned_jobs(db: Session, *, me: str) -> list[Job]:
    """Running jobs another dispatcher claimed: once this one holds the lease, their dispatcher is gone (or no
    longer active, and stops its tasks), so they are lost attempts to give back now, not at their lease's end."""
    return list(
        db.scalars(select(Job).where(Job.status == "running", Job.worker_id.like(f"{PREFIX}%"), Job.worker_id != me))
    )


def record(db: Session, *, me: str, role: str, error: str | None = None, now: datetime | None = None) -> None:
    """This dispatcher's latest cycle (role: active | standby | stopped), for the cluster page."""
    now = now or utcnow()
    row = db.get(DispatcherSeen, me)
    if row is None:
        row = DispatcherSeen(id=me, started_at=now)
        db.add(row)
    row.role, row.seen_at, row.error = role, now, error
    db.execute(delete(DispatcherSeen).where(DispatcherSeen.seen_at < now - FORGET_AFTER))
    db.commit()


@dataclass(frozen=True)
class Election:
    """What the cluster page shows: the lease, and every dispatcher seen lately."""

    lease: DispatcherLease | None
    dispatchers: list[DispatcherSeen]
    now: datetime

    @property
    def active(self) -> DispatcherSeen | None:
        if self.lease is None or self.lease.holder is None or self.expired:
            return None
        return next((d for d in self.dispatchers if d.id == self.lease.holder), None)

    @property
    def expired(self) -> bool:
        return self.lease is None or self.lease.expires_at is None or self.lease.expires_at < self.now

    def standbys(self, within_s: float) -> list[DispatcherSeen]:
        """Dispatchers that stood by in a cycle of the last `within_s` seconds."""
        since = self.now - timedelta(seconds=within_s)
        holder = self.lease.holder if self.lease else None
        return [d for d in self.dispatchers if d.role == "standby" and d.seen_at >= since and d.id != holder]


def election(db: Session) -> Election:
    lease = db.get(DispatcherLease, NAME)
    seen = list(db.scalars(select(DispatcherSeen).order_by(DispatcherSeen.started_at)))
    return Election(lease, seen, utcnow())
