"""Failed-login and registration throttle: growing delays per account, per trusted device and per client
address, kept in the database so every web process (and a restart) sees the same counts.

    wait_s(db, keys=…)                       seconds until these keys may try again (0: now); checked before any
                                             password work
    failed(db, keys=…)                       count a failure of each key (an account, a device); returns the wait
                                             it imposes on the next try
    failed_address(db, address=…, account=…) count a failure from an address: its delay grows with how many
                                             distinct accounts failed from there, not how many times
    succeeded(db, keys=…)                    a correct login forgets its account's (and device's) failures
    take_registration(db, address=…, …)      count one registration from an address; the wait when over the limit
    give_back_registration(db, address=…)    a registration that created nothing does not count

Keys, one row each in login_throttle:
  "account:<email>"          the email as typed, normalised, whether or not such an account exists (the throttle
                             answers alike for both). Only failures from clients without a device cookie for the
                             account count here, and only those clients wait on it.
  "device:<id>"              a browser's device cookie for one account (app/services/accounts/devices.py): its own budget.
  "address:<client>"         IPv4 address, or the /64 of an IPv6 address (one host usually holds a whole /64);
                             `failures` holds the number of distinct accounts that failed from it.
  "tried:<client>|<acct>"    one row per (address, account) that failed: the set failed_address counts.
  "register:<client>"        registrations in the current window; here `last_failure_at` is the window's start.
Each Policy allows `free` failures, then locks the key for `base_s`, doubling with each further failure up to
`cap_s`; failures are forgotten `forget_s` after the last one.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.models import LoginThrottle, utcnow
from app.services.errors import DomainError
from labs.api import count


class Throttled(DomainError):
    """Refused without looking at the request: too many recent failures from this account or address."""

    def __init__(self, wait_s: int, message: str = ""):
        super().__init__(message or f"Too many failed attempts. Try again in {in_words(wait_s)}.")
        self.wait_s = wait_s


@dataclass(frozen=True)
class Policy:
    free: int  # failures allowed before any delay
    base_s: float  # the first delay; each further failure doubles it
    cap_s: float  # the longest delay
    forget_s: float  # failures older than this (since the last one) no longer count

    def delay_s(self, failures: int) -> float:
        over = failures - self.free
        return 0.0 if over <= 0 else min(self.cap_s, self.base_s * 2 ** min(over - 1, 30))


# One account, from clients it has not seen before: a person mistypes a few times; a guesser gets ~4 tries an
# hour once at the cap. Anyone can push an account here, which is why a trusted device does not wait on it.
ACCOUNT = Policy(free=5, base_s=2, cap_s=15 * 60, forget_s=3600)
# One browser that logged in to the account before: the owner mistyping, or someone holding a copy of their
# cookie; the same small budget as the account, but nobody else's failures touch it.
DEVICE = Policy(free=5, base_s=2, cap_s=15 * 60, forget_s=3600)
# One client address, counted in distinct accounts that failed from it: a whole class behind one NAT mistypes
# a few dozen accounts at most, while credential stuffing tries each account once and slows to about one
# account a minute.
ADDRESS = Policy(free=50, base_s=1, cap_s=60, forget_s=3600)
# Registrations are counted per address over fixed windows of this length (the limit is a setting).
REGISTRATION_WINDOW_S = 600


def account_key(email: str) -> str:
    return "account:" + (email or "").strip().lower()[:254]


def address_key(host: str | None) -> str:
    if not host:
        return "address:unknown"
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return "address:" + host[:200]
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return "address:" + str(addr.ipv4_mapped)
        return "address:" + str(ipaddress.ip_network(f"{addr}/64", strict=False))
    return "address:" + str(addr)


def device_key(device: str) -> str:
    return "device:" + device[:100]


def _tried_prefix(address: str) -> str:
    return "tried:" + address.removeprefix("address:") + "|"


def _policy(key: str) -> Policy:
    if key.startswith("account:"):
        return ACCOUNT
    return DEVICE if key.startswith("device:") else ADDRESS


def wait_s(db: Session, *, keys: list[str]) -> int:
    """Whole seconds until every key may try again; 0 if none is locked."""
    now = utcnow()
    locks = db.scalars(
        select(LoginThrottle.locked_until).where(LoginThrottle.key.in_(keys), LoginThrottle.locked_until > now)
    ).all()
    return max((math.ceil((lock - now).total_seconds()) for lock in locks if lock is not None), default=0)


def _bump(db: Session, key: str, now: datetime) -> int:
    """Count one failure of `key` (a first one inserts its row); returns its failures within the policy's window."""
    forgotten = now - timedelta(seconds=_policy(key).forget_s)
    # One conditional UPDATE, so concurrent failures all count; a key seen for the first time is inserted.
    bump = (
        update(LoginThrottle)
        .where(LoginThrottle.key == key)
        .values(
            failures=case((LoginThrottle.last_failure_at < forgotten, 1), else_=LoginThrottle.failures + 1),
            last_failure_at=now,
        )
    )
    if not db.execute(bump).rowcount:  # type: ignore[attr-defined]
        _insert(db, key, now, on_conflict=bump)
    return db.scalar(select(LoginThrottle.failures).where(LoginThrottle.key == key)) or 0


def _insert(db: Session, key: str, now: datetime, *, on_conflict) -> None:
    _forget_stale(db, now)  # a new key: drop the forgotten ones, so the table holds one window's keys
    try:
        with db.begin_nested():
            db.add(LoginThrottle(key=key, failures=1, last_failure_at=now))
    except IntegrityError:  # a concurrent first failure inserted it: count ours on top
        db.execute(on_conflict)


def _lock(db: Session, key: str, failures: int, now: datetime) -> int:
    """Lock `key` for its policy's delay after `failures`; returns the whole seconds (0: no lock)."""
    delay = _policy(key).delay_s(failures)
    if not delay:
        return 0
    db.execute(
        update(LoginThrottle).where(LoginThrottle.key == key).values(locked_until=now + timedelta(seconds=delay))
    )
    return math.ceil(delay)


def failed(db: Session, *, keys: list[str]) -> int:
    """Count one failure against each key; returns the seconds the next try must wait (0: none yet)."""
    now = utcnow()
    waits = [_lock(db, key, _bump(db, key, now), now) for key in keys]
    db.commit()
    return max(waits, default=0)


def failed_address(db: Session, *, address: str, account: str) -> int:
    """Count a failure on `account` (its key) from `address` (its key); returns the address's wait (0: none).

    The address's count is the number of distinct accounts that failed from it within ADDRESS.forget_s: a
    person retrying their own password adds one, a list of stolen passwords adds one per account."""
    now = utcnow()
    prefix = _tried_prefix(address)
    digest = hashlib.sha256(account.encode()).hexdigest()[:16]
    _bump(db, prefix + digest, now)
    recent = now - timedelta(seconds=ADDRESS.forget_s)
    distinct = (
        db.scalar(
            select(func.count())
            .select_from(LoginThrottle)
            .where(LoginThrottle.key.startswith(prefix, autoescape=True), LoginThrottle.last_failure_at >= recent)
        )
        or 0
    )
    record = update(LoginThrottle).where(LoginThrottle.key == address).values(failures=distinct, last_failure_at=now)
    if not db.execute(record).rowcount:  # type: ignore[attr-defined]
        _insert(db, address, now, on_conflict=record)
        db.execute(record)
    wait = _lock(db, address, distinct, now)
    db.commit()
    return wait


def succeeded(db: Session, *, keys: list[str]) -> None:
    db.execute(delete(LoginThrottle).where(LoginThrottle.key.in_(keys)))
    db.commit()


class RegistrationsThrottled(Throttled):
    """Refused before any work: this address registered its share of accounts for now."""

    def __init__(self, wait_s: int, limit: int):
        super().__init__(
            wait_s,
            f"Too many accounts were registered from your network address recently (at most {limit} every "
            f"{in_words(REGISTRATION_WINDOW_S)}). Try again in {in_words(wait_s)}, or ask your instructor to create "
            "your account.",
        )


def _register_key(address: str) -> str:
    return "register:" + address.removeprefix("address:")


def take_registration(db: Session, *, address: str, limit: int) -> int:
    """Count one registration from `address` (its key) if the window has room; returns 0, or the seconds until
    the window ends (nothing counted). Atomic on both databases: concurrent registrations never pass `limit`."""
    now = utcnow()
    key = _register_key(address)
    window_start = now - timedelta(seconds=REGISTRATION_WINDOW_S)
    new_window = LoginThrottle.last_failure_at < window_start
    # The WHERE is checked again on the locked row (SQLite: one writer; PostgreSQL re-reads it under the row
    # lock), so of many concurrent requests exactly those that fit in the limit update it.
    take = (
        update(LoginThrottle)
        .where(LoginThrottle.key == key, new_window | (LoginThrottle.failures < limit))
        .values(
            failures=case((new_window, 1), else_=LoginThrottle.failures + 1),
            last_failure_at=case((new_window, now), else_=LoginThrottle.last_failure_at),
        )
    )
    if db.execute(take).rowcount:  # type: ignore[attr-defined]
        db.commit()
        return 0
    started = db.scalar(select(LoginThrottle.last_failure_at).where(LoginThrottle.key == key))
    if started is None:  # the address's first registration in a while
        _forget_stale(db, now)
        try:
            with db.begin_nested():
                db.add(LoginThrottle(key=key, failures=1, last_failure_at=now))
            db.commit()
            return 0
        except IntegrityError:  # a concurrent first one inserted it: take ours from it like any other
            db.rollback()
            return take_registration(db, address=address, limit=limit)
    db.rollback()
    return max(1, math.ceil(REGISTRATION_WINDOW_S - (now - started).total_seconds()))


def give_back_registration(db: Session, *, address: str) -> None:
    db.execute(
        update(LoginThrottle)
        .where(LoginThrottle.key == _register_key(address), LoginThrottle.failures > 0)
        .values(failures=LoginThrottle.failures - 1)
    )
    db.commit()


def _forget_stale(db: Session, now: datetime) -> None:
    cutoff = now - timedelta(seconds=max(ACCOUNT.forget_s, DEVICE.forget_s, ADDRESS.forget_s, REGISTRATION_WINDOW_S))
    db.execute(
        delete(LoginThrottle).where(
            LoginThrottle.last_failure_at < cutoff,
            (LoginThrottle.locked_until.is_(None)) | (LoginThrottle.locked_until < now),
        )
    )


def in_words(seconds: int) -> str:
    """'8 seconds', '2 minutes', '15 minutes': when the user may try again."""
    if seconds < 60:
        return count(seconds, "second")
    minutes = math.ceil(seconds / 60)
    return count(minutes, "minute")
