"""Per-learner limits, set by instructors: jobs in flight, jobs per rolling hour, GPU-seconds per rolling day,
and the storage quota for uploaded bundles (MiB on disk and how many are kept).

The course default is the `queue_limits` row with no user; an instructor may give one learner an override
row, which replaces the default for that learner (a blank limit there means "no limit"). `check` runs before
a job is created: at a limit, LimitReached names the limit, the numbers, and when it frees, and nothing is
stored. GPU-seconds count only what `jobs.finish` charged (runs the lab or the learner ended), never an
attempt lost to infrastructure. `check_storage` runs before an upload is kept: over the quota, QuotaExceeded
names it, the learner's usage and how to free space, and nothing is stored.

A check and the insert it allows are one transaction holding the learner's lock (`hold`): without it, 30
submits at once all counted the same 9 jobs in flight and a limit of 10 let 12 to 15 through.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.core.digits import whole_number
from app.core.models import Bundle, Job, QueueLimit, User, utcnow
from app.services.errors import DomainError, FieldError
from labs.api import byte_size, count

# What a course starts with until an instructor changes it: enough for a learner to queue a few runs of each
# lab, few enough that one learner cannot fill a class's queue; two GPU-hours a day of a shared host. A lab
# bundle is a few MiB at most: 50 uploads in 200 MiB is every lab many times over, and 100 learners' worth
# fits a small disk. Migration 0009 writes the same storage defaults into rows made before the quota existed.
DEFAULTS = {
    "max_in_flight": 10,
    "max_per_hour": 60,
    "max_gpu_seconds_per_day": 7200,
    "max_stored_mib": 200,
    "max_stored_bundles": 50,
}
FIELDS = {
    "max_in_flight": ("jobs in flight", 1, 1000),
    "max_per_hour": ("jobs per hour", 1, 10000),
    "max_gpu_seconds_per_day": ("GPU-seconds per day", 0, 10**7),
    "max_stored_mib": ("MiB of stored uploads", 0, 10**6),
    "max_stored_bundles": ("stored uploads", 0, 10**5),
}
MIB = 1024 * 1024
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


class LimitReached(DomainError):
    """The learner is at `limit`; `frees_at` (None: when one of their jobs ends) says when they may submit again."""

    def __init__(self, limit: str, message: str, frees_at: datetime | None):
        super().__init__(message)
        self.limit, self.frees_at = limit, frees_at

    def retry_after_s(self, now: datetime | None = None) -> int | None:
        if self.frees_at is None:
            return None
        return max(1, int((self.frees_at - (now or utcnow())).total_seconds()) + 1)


class QuotaExceeded(DomainError):
    """An upload would take the learner past `limit` (bytes: "storage"; count: "stored uploads"); the message
    names the quota, their usage and how to free space."""

    def __init__(self, limit: str, message: str):
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True)
class Limits:
    max_in_flight: int | None
    max_per_hour: int | None
    max_gpu_seconds_per_day: int | None
    max_stored_mib: int | None = DEFAULTS["max_stored_mib"]
    max_stored_bundles: int | None = DEFAULTS["max_stored_bundles"]
    override: bool = False  # this learner has their own row


def _of(row: QueueLimit, *, override: bool) -> Limits:
    return Limits(
        row.max_in_flight,
        row.max_per_hour,
        row.max_gpu_seconds_per_day,
        row.max_stored_mib,
        row.max_stored_bundles,
        override=override,
    )


def course_default(db: Session) -> Limits:
    row = db.scalar(select(QueueLimit).where(QueueLimit.user_id.is_(None)))
    if row is None:
        return Limits(
            DEFAULTS["max_in_flight"],
            DEFAULTS["max_per_hour"],
            DEFAULTS["max_gpu_seconds_per_day"],
            DEFAULTS["max_stored_mib"],
            DEFAULTS["max_stored_bundles"],
        )
    return _of(row, override=False)


def for_user(db: Session, *, user_id: int) -> Limits:
    row = db.scalar(select(QueueLimit).where(QueueLimit.user_id == user_id))
    if row is None:
        return course_default(db)
    return _of(row, override=True)


def hold(db: Session, *, user_id: int) -> None:
    """Take the learner's lock until this transaction ends, so a limit check and the insert it allows are one
    step: a second submit or upload by the same learner waits here and then counts the first one's row.

    PostgreSQL: the user's row FOR NO KEY UPDATE (inserts elsewhere that only reference the user, a session
    or an answer, are not blocked). SQLite has no row locks; a write is what takes its one write lock, so the
    transaction starts with a write that changes nothing (it waits up to the busy timeout, as writes do).
    """
    if db.get_bind().dialect.name == "postgresql":
        db.execute(select(User.id).where(User.id == user_id).with_for_update(key_share=True))
    else:
        db.execute(
            update(User)
            .where(User.id == user_id)
            .values(display_name=User.display_name)
            .execution_options(synchronize_session=False)
        )


@dataclass(frozen=True)
class Usage:
    in_flight: int
    last_hour: int
    gpu_seconds_day: float


def usage(db: Session, *, user_id: int, now: datetime | None = None, ignoring: list[int] | None = None) -> Usage:
    now = now or utcnow()
    skip = ignoring or []
    mine = (Job.owner_id == user_id, Job.id.not_in(skip)) if skip else (Job.owner_id == user_id,)
    in_flight = db.scalar(select(func.count()).where(*mine, Job.status.in_(("queued", "running")))) or 0
    last_hour = db.scalar(select(func.count()).where(*mine, Job.created_at > now - HOUR)) or 0
    gpu = db.scalar(select(func.coalesce(func.sum(Job.gpu_seconds), 0.0)).where(*mine, Job.finished_at > now - DAY))
    return Usage(int(in_flight), int(last_hour), float(gpu or 0.0))


def check(db: Session, *, user: User, now: datetime | None = None, ignoring: list[int] | None = None) -> None:
    """LimitReached when `user` may not create a job now (`ignoring`: jobs about to be replaced)."""
    now = now or utcnow()
    lim = for_user(db, user_id=user.id)
    use = usage(db, user_id=user.id, now=now, ignoring=ignoring)
    if lim.max_in_flight is not None and use.in_flight >= lim.max_in_flight:
        raise LimitReached(
            "jobs in flight",
            f"You have {use.in_flight} jobs queued or running, your limit of jobs in flight "
            f"({lim.max_in_flight}). It frees when one of them finishes, or when you cancel one.",
            None,
        )
    if lim.max_per_hour is not None and use.last_hour >= lim.max_per_hour:
        created = list(
            db.scalars(
                select(Job.created_at)
                .where(Job.owner_id == user.id, Job.created_at > now - HOUR)
                .order_by(Job.created_at)
                .limit(use.last_hour - lim.max_per_hour + 1)
            )
        )
        frees = (created[-1] or now) + HOUR
        raise LimitReached(
            "jobs per hour",
            f"You started {use.last_hour} jobs in the last hour, your limit of jobs per hour "
            f"({lim.max_per_hour}). It frees at {frees:%H:%M:%S} UTC.",
            frees,
        )
    if lim.max_gpu_seconds_per_day is not None and use.gpu_seconds_day >= lim.max_gpu_seconds_per_day:
        charged = db.execute(
            select(Job.finished_at, Job.gpu_seconds)
            .where(Job.owner_id == user.id, Job.finished_at > now - DAY, Job.gpu_seconds > 0)
            .order_by(Job.finished_at)
        ).all()
        total, frees = use.gpu_seconds_day, now + DAY
        for finished_at, seconds in charged:  # the oldest charges leave the rolling day first
            total -= seconds
            if total < lim.max_gpu_seconds_per_day:
                frees = (finished_at or now) + DAY
                break
        raise LimitReached(
            "GPU-seconds per day",
            f"Your jobs used {use.gpu_seconds_day:.0f} GPU-seconds in the last 24 hours, your limit of GPU-seconds "
            f"per day ({lim.max_gpu_seconds_per_day}). It frees at {frees:%Y-%m-%d %H:%M} UTC; CPU runs "
            f"use no GPU-seconds.",
            frees,
        )


@dataclass(frozen=True)
class Stored:
    bundles: int
    bytes: int


def stored(db: Session, *, user_id: int) -> Stored:
    """What the learner's uploads take: how many are kept and their bytes on disk."""
    n, total = db.execute(
        select(func.count(), func.coalesce(func.sum(Bundle.stored_bytes), 0)).where(Bundle.owner_id == user_id)
    ).one()
    return Stored(int(n), int(total))


FREE_SPACE = (
    "To free space, delete uploads you no longer need under “Your uploads” on My lab reports (/reports); "
    "uploads a submitted report cites are kept. Or ask an instructor to raise your quota."
)


def check_storage(db: Session, *, user: User, adding_bytes: int) -> None:
    """QuotaExceeded when keeping one more upload of `adding_bytes` would take `user` past their quota."""
    lim = for_user(db, user_id=user.id)
    use = stored(db, user_id=user.id)
    if lim.max_stored_bundles is not None and use.bundles + 1 > lim.max_stored_bundles:
        raise QuotaExceeded(
            "stored uploads",
            f"you have {count(use.bundles, 'upload')} stored, your quota of stored uploads "
            f"({lim.max_stored_bundles}); nothing from this one was kept. {FREE_SPACE}",
        )
    if lim.max_stored_mib is not None and use.bytes + adding_bytes > lim.max_stored_mib * MIB:
        raise QuotaExceeded(
            "storage",
            f"this upload keeps {byte_size(adding_bytes)} and your uploads already take {byte_size(use.bytes)} "
            f"of your storage quota of {byte_size(lim.max_stored_mib * MIB)}; nothing from this one was kept. "
            f"{FREE_SPACE}",
        )


def parse(form: dict) -> dict[str, int | None]:
    """The limits from a form; FieldError naming the field for anything but blank or a whole number in range."""
    out: dict[str, int | None] = {}
    for name, (words, lo, hi) in FIELDS.items():
        raw = str(form.get(name, "")).strip()
        if raw == "":
            out[name] = None
            continue
        value = whole_number(raw, lo=lo, hi=hi)
        if value is None:
            raise FieldError(
                name, f"{words}: got {raw!r}, expected a whole number from {lo} to {hi}, or blank for none"
            )
        out[name] = value
    return out


def set_limits(db: Session, *, by: User, user_id: int | None, values: dict[str, int | None]) -> None:
    """Store the course default (user_id None) or one learner's override."""
    cond = QueueLimit.user_id.is_(None) if user_id is None else QueueLimit.user_id == user_id
    row = db.scalar(select(QueueLimit).where(cond))
    if row is None:
        row = QueueLimit(user_id=user_id)
        db.add(row)
    for name, value in values.items():
        setattr(row, name, value)
    row.updated_by_id, row.updated_at = by.id, utcnow()
    db.commit()


def clear_override(db: Session, *, user_id: int) -> bool:
    """Remove the learner's own limits; False if they had none."""
    row = db.scalar(select(QueueLimit).where(QueueLimit.user_id == user_id))
    if row is None:
        return False
    db.delete(row)
    db.commit()
    return True


def overrides(db: Session) -> dict[int, Limits]:
    rows = db.scalars(select(QueueLimit).where(QueueLimit.user_id.is_not(None)))
    return {r.user_id: _of(r, override=True) for r in rows if r.user_id is not None}
