"""Personal API tokens for scripts. The plaintext is shown once; only its SHA-256 is stored.

A token is a credential like a session, and ends with the others: whatever ends every session of a user
(a password change, "log out everywhere", a reset link, an operator's `users create --password`) revokes
every token of theirs too (sessions.end_all), so recovering an account shuts out a script someone else set
up. A token opens the JSON API only (app/web/deps.py): never the account page, token creation or staff pages.
"""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.core.models import ApiToken, User, utcnow
from app.services.errors import FieldError

PREFIX = "cst_"  # course token: recognisable in logs and secret scanners
MAX_ACTIVE = 10


class TokenError(FieldError):
    pass


def _digest(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def create(db: Session, *, user: User, name: str) -> tuple[ApiToken, str]:
    name = (name or "").strip()
    if not 1 <= len(name) <= 80:
        raise TokenError("name", "give the token a name of 1 to 80 characters, e.g. 'lab laptop'")
    if active_count(db, user_id=user.id) >= MAX_ACTIVE:
        raise TokenError("name", f"you already have {MAX_ACTIVE} active tokens; revoke one first")
    plaintext = PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(user_id=user.id, name=name, token_hash=_digest(plaintext), prefix=plaintext[:10])
    db.add(row)
    db.commit()
    return row, plaintext


def active_count(db: Session, *, user_id: int) -> int:
    return (
        db.scalar(
            select(func.count()).select_from(ApiToken).where(ApiToken.user_id == user_id, ApiToken.revoked_at.is_(None))
        )
        or 0
    )


def user_for(db: Session, *, plaintext: str) -> User | None:
    """The token's owner, or None for an unknown or revoked token. Records the last use."""
    if not plaintext.startswith(PREFIX):
        return None
    row = db.scalar(select(ApiToken).where(ApiToken.token_hash == _digest(plaintext)))
    if row is None or row.revoked_at is not None:
        return None
    row.last_used_at = utcnow()
    db.commit()
    return db.get(User, row.user_id)


def list_for(db: Session, *, user: User) -> list[ApiToken]:
    return list(db.scalars(select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id.desc())))


def revoke(db: Session, *, user: User, token_id: int) -> bool:
    row = db.get(ApiToken, token_id)
    if row is None or row.user_id != user.id:
        return False
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        db.commit()
    return True


def revoke_all(db: Session, *, user_id: int) -> int:
    """Revoke every live token of the user, in the caller's transaction (it commits); returns how many."""
    q = update(ApiToken).where(ApiToken.user_id == user_id, ApiToken.revoked_at.is_(None)).values(revoked_at=utcnow())
    return db.execute(q).rowcount or 0  # type: ignore[attr-defined]
