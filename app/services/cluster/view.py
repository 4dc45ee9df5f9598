"""What the instructor's cluster page shows: nodes and their capabilities, running and queued jobs in fair order,
each learner's usage against their limits, and the attempts lost to infrastructure in the last day. Read-only;
cancelling goes through jobs.cancel."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.models import Job, User
from app.services.cluster import dispatch_lease
from app.services.cluster import nodes as cluster_service
from app.services.jobs import lifecycle as job_service
from app.services.jobs import limits as limit_service
from app.services.jobs import queue as queue_service
from app.services.jobs.labhost import HostCapacity

STANDBY_SEEN_S = 30.0  # a standby not seen in this long is gone (its cycles are TICK_S apart)


@dataclass(frozen=True)
class DispatcherRow:
    id: str
    role: str  # active | standby
    since: datetime | None  # active: when it took the lease; standby: when it started
    heartbeat: datetime | None  # active: its last lease renewal; standby: its last cycle
    error: str | None


def dispatchers(db: Session) -> tuple[list[DispatcherRow], dispatch_lease.Election]:
    """The active dispatcher (first) and the standbys seen lately, from the lease row and dispatchers_seen."""
    e = dispatch_lease.election(db)
    rows = []
    active = e.active
    if e.lease is not None and e.lease.holder and not e.expired:
        rows.append(
            DispatcherRow(
                e.lease.holder, "active", e.lease.acquired_at, e.lease.renewed_at, active.error if active else None
            )
        )
    rows += [DispatcherRow(d.id, "standby", d.started_at, d.seen_at, d.error) for d in e.standbys(STANDBY_SEEN_S)]
    return rows, e


@dataclass(frozen=True)
class LearnerUsage:
    user: User
    usage: limit_service.Usage
    limits: limit_service.Limits


def overview(db: Session, *, settings: Settings, host: HostCapacity) -> dict:
    running = list(db.scalars(select(Job).where(Job.status == "running").order_by(Job.started_at)))
    order = queue_service.fair_order(db, limit=200)
    queued_by_id = {j.id: j for j in db.scalars(select(Job).where(Job.id.in_(order)))} if order else {}
    queued = [queued_by_id[i] for i in order if i in queued_by_id]
    active_owner_ids = {j.owner_id for j in running} | {j.owner_id for j in queued}
    recent_owner_ids = set(
        db.scalars(select(Job.owner_id).where(Job.created_at > limit_service.utcnow() - limit_service.DAY))
    )
    losses, losses_where = job_service.recent_losses(db, since=limit_service.utcnow() - limit_service.DAY)
    lost_jobs = {j.id: j for j in db.scalars(select(Job).where(Job.id.in_({x.job_id for x in losses})))}
    overrides = limit_service.overrides(db)
    wanted = active_owner_ids | recent_owner_ids | set(overrides) | {j.owner_id for j in lost_jobs.values()}
    owners = {u.id: u for u in db.scalars(select(User).where(User.id.in_(wanted)))}
    usage = [
        LearnerUsage(u, limit_service.usage(db, user_id=u.id), limit_service.for_user(db, user_id=u.id))
        for u in sorted(owners.values(), key=lambda u: u.email)
        if u.id in active_owner_ids | recent_owner_ids
    ]
    rows, election = dispatchers(db) if settings.executor == "ray" else ([], None)
    return {
        "executor": settings.executor,
        "dispatchers": rows,
        "election": election,
        "dispatcher_lease_s": settings.dispatcher_lease_s,
        "default_job_memory_mb": settings.job_memory_bytes // 2**20,  # what placement assumes for an unlabelled node
        "nodes": cluster_service.all_nodes(db) if settings.executor == "ray" else [],
        "host": host,
        "running": running,
        "queued": queued,
        "owners": owners,
        "usage": usage,
        "losses": [(loss, lost_jobs[loss.job_id]) for loss in losses],
        "losses_where": losses_where,
        "default_limits": limit_service.course_default(db),
        "overrides": overrides,
        "embedded_workers": settings.embedded_workers,
    }
