"""Make every login session look older than it is: the idle and absolute lifetimes without waiting."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from app.core.models import UserSession, utcnow


def age_sessions(db, *, last_seen_s: float = 0, created_s: float = 0) -> None:
    """Set every session's last use `last_seen_s` and its login `created_s` seconds back from now."""
    now = utcnow()
    db.execute(
        update(UserSession).values(
            last_seen_at=now - timedelta(seconds=last_seen_s), created_at=now - timedelta(seconds=created_s)
        )
    )
    db.commit()
