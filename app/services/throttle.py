"""Failed-login throttle: growing delays per account and per client address, kept in the database so every
web process (and a restart) sees the same counts.

    wait_s(db, keys=…)        seconds until these keys may try again (0: now); checked before any password work
    failed(db, keys=…)        count a failure; returns the wait it imposes on the next try
    succeeded(db, key=…)      a correct login forgets its account's failures (never an address's)

A key is "account:<email>" (the email as typed, normalised, whether or not such an account exists, so the
throttle answers alike for both) or "address:<client>" (IPv4 address, or the /64 of an IPv6 address:
one host usually holds a whole /64). Each Policy allows `free` failures, then locks the key for `base_s`,
doubling with each further failure up to `cap_s`; failures are forgotten `forget_s` after the last one.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.models import LoginThrottle, utcnow
from app.services.errors import DomainError
from labs.api import count


class Throttled(DomainError):
    """Refused without looking at the request: too many recent failures from this account or address."""

    def __init__(self, wait_s: int):
        super().__init__(f"Too many failed attempts. Try again in {in_words(wait_s)}.")
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


# One account: a person mistypes a few times; a guesser gets ~4 tries an hour once at the cap.
ACCOUNT = Policy(free=5, base_s=2, cap_s=15 * 60, forget_s=3600)
# One client address may be a whole classroom behind one NAT: more room before any delay and a short cap,
# yet spraying one password over many accounts still slows to about one try a minute.
ADDRESS = Policy(free=50, base_s=1, cap_s=60, forget_s=3600)


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


def _policy(key: str) -> Policy:
    return ACCOUNT if key.startswith("account:") else ADDRESS


def wait_s(db: Session, *, keys: list[str]) -> int:
    """Whole seconds until every key may try again; 0 if none is locked."""
    now = utcnow()
    locks = db.scalars(
        select(LoginThrottle.locked_until).where(LoginThrottle.key.in_(keys), LoginThrottle.locked_until > now)
    ).all()
    return max((math.ceil((lock - now).total_seconds()) for lock in locks if lock is not None), default=0)


def failed(db: Session, *, keys: list[str]) -> int:
    """Count one failure against each key; returns the seconds the next try must wait (0: none yet)."""
    now = utcnow()
    waits = [0]
    for key in keys:
        policy = _policy(key)
        forgotten = now - timedelta(seconds=policy.forget_s)
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
            _forget_stale(db, now)  # a new key: drop the forgotten ones, so the table holds one window's keys
            try:
                with db.begin_nested():
                    db.add(LoginThrottle(key=key, failures=1, last_failure_at=now))
            except IntegrityError:  # a concurrent first failure inserted it: count ours on top
                db.execute(bump)
        failures = db.scalar(select(LoginThrottle.failures).where(LoginThrottle.key == key)) or 0
        delay = policy.delay_s(failures)
        if delay:
            lock = now + timedelta(seconds=delay)
            db.execute(update(LoginThrottle).where(LoginThrottle.key == key).values(locked_until=lock))
            waits.append(math.ceil(delay))
    db.commit()
    return max(waits)


def succeeded(db: Session, *, key: str) -> None:
    db.execute(delete(LoginThrottle).where(LoginThrottle.key == key))
    db.commit()


def _forget_stale(db: Session, now: datetime) -> None:
    cutoff = now - timedelta(seconds=max(ACCOUNT.forget_s, ADDRESS.forget_s))
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
