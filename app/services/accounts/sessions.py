"""Server-side login sessions: the database row is the session, the browser holds only a random token.

    start(db, user=…, user_agent=…, …)         -> token for the cookie (a fresh row; login, registration)
    lookup(db, token=…, idle_s=…, max_s=…)     -> Active(session, user) or None: every request with a cookie
    peek(conn, token=…, idle_s=…, max_s=…)     -> Peeked(session_id, Reader), or None when the lookup has a write to
                                                  do (or finds nothing): the most-read pages' login, no ORM
    end(db, token=…)                            logout of this browser
    end_all(db, user=…, keep_id=None)           "log out everywhere", and every API token revoked with it; a password
                                                  change keeps its own session
    list_for(db, user=…)                        the account page's list of sessions

The cookie itself is Starlette's signed session cookie ({"sid": token, "csrf": …}); signing keeps the
anonymous CSRF token honest, but authentication rests on the row alone: a cookie signed with a leaked
key, or saved before logout, names no row and so no user.

A session ends `idle_s` after its last use and `max_s` after login, whichever comes first. `last_seen_at`
is written at most once per TOUCH_S, so a page view is a single indexed read, not a read and a write.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, bindparam, delete, select, update
from sqlalchemy.orm import Session, joinedload

from app.core.models import User, UserRole, UserSession, utcnow
from app.services.accounts import tokens

TOUCH_S = 60  # idle lifetimes are hours long: a minute of slack in last_seen_at costs nothing and saves a write a view


@dataclass(frozen=True)
class Active:
    session: UserSession
    user: User


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def start(db: Session, *, user: User, user_agent: str = "", idle_s: int, max_s: int) -> str:
    """A new session for `user`; returns the token the cookie carries (only its digest is stored)."""
    _purge_expired(
        db, user_id=user.id, idle_s=idle_s, max_s=max_s
    )  # rows of browsers that never came back end here, one user at a time
    token = secrets.token_urlsafe(32)
    db.add(UserSession(user_id=user.id, token_hash=digest(token), user_agent=(user_agent or "")[:200]))
    db.commit()
    return token


# Built once (every request with a cookie runs it): the session, its user and the user's roles in one
# statement over the unique index on token_hash.
_LOOKUP = (
    select(UserSession)
    .options(joinedload(UserSession.user, innerjoin=True).joinedload(User.role_rows))
    .where(UserSession.token_hash == bindparam("token_hash"))
)


def _ended(*, created_at: datetime, last_seen_at: datetime, now: datetime, idle_s: int, max_s: int) -> bool:
    return now - last_seen_at > timedelta(seconds=idle_s) or now - created_at > timedelta(seconds=max_s)


def expired(row: UserSession, *, now: datetime, idle_s: int, max_s: int) -> bool:
    return _ended(created_at=row.created_at, last_seen_at=row.last_seen_at, now=now, idle_s=idle_s, max_s=max_s)


def _find(db: Session, token: str) -> UserSession | None:
    return db.scalars(_LOOKUP, {"token_hash": digest(token)}).unique().one_or_none()


@dataclass(frozen=True, slots=True)
class Reader:
    """A logged-in user as the most-read pages see them (lesson parts, the dashboard; app/web/deps.py Viewer):
    the fields a page and its queries use, read-only and tied to no database session. Those pages only
    read, and their one write (the visit) goes by `id`; anything that changes a user loads the `User`."""

    id: int
    email: str
    display_name: str
    roles: frozenset[str]

    def has_role(self, role: str) -> bool:
        return role in self.roles

    @classmethod
    def of(cls, user: User) -> Reader:
        return cls(user.id, user.email, user.display_name, frozenset(user.roles))


@dataclass(frozen=True, slots=True)
class Peeked:
    session_id: int
    reader: Reader


# The same join as _LOOKUP as plain columns (a row per role, or one row with a NULL role): no ORM objects,
# no identity map, and no Session transaction around it. With both it was most of a lesson page's login.
_PEEK = (
    select(
        UserSession.id,
        UserSession.created_at,
        UserSession.last_seen_at,
        User.id,
        User.email,
        User.display_name,
        UserRole.role,
    )
    .join(User, User.id == UserSession.user_id)
    .outerjoin(UserRole, UserRole.user_id == User.id)
    .where(UserSession.token_hash == bindparam("token_hash"))
)


def peek(conn: Connection, *, token: str, idle_s: int, max_s: int) -> Peeked | None:
    """`lookup` for the event loop, on a plain pooled connection: the one read, and the live session when
    that is all there is to do. None when there is no such session, or when it expired (a delete) or is due
    a touch (an update): a write may wait on a lock, so the caller then does the whole `lookup` in a worker
    thread."""
    rows = conn.execute(_PEEK, {"token_hash": digest(token)}).all()
    if not rows:
        return None
    session_id, created_at, last_seen_at, user_id, email, display_name, _ = rows[0]
    now = utcnow()
    if _ended(created_at=created_at, last_seen_at=last_seen_at, now=now, idle_s=idle_s, max_s=max_s) or (
        now - last_seen_at > timedelta(seconds=TOUCH_S)
    ):
        return None
    roles = frozenset(row[6] for row in rows if row[6] is not None)
    return Peeked(session_id, Reader(user_id, email, display_name, roles))


def lookup(db: Session, *, token: str, idle_s: int, max_s: int) -> Active | None:
    """The live session of `token` with its user (roles loaded), or None. An expired row is deleted."""
    row = _find(db, token)
    if row is None:
        return None
    now = utcnow()
    if expired(row, now=now, idle_s=idle_s, max_s=max_s):
        db.execute(delete(UserSession).where(UserSession.id == row.id))
        db.commit()
        return None
    if now - row.last_seen_at > timedelta(seconds=TOUCH_S):
        db.execute(update(UserSession).where(UserSession.id == row.id).values(last_seen_at=now))
        db.commit()
        row.last_seen_at = now
    return Active(row, row.user)


# Order matters: Edge's agent also names Chrome, and Chrome's names Safari.
_BROWSERS = (("Edg/", "Edge"), ("Firefox/", "Firefox"), ("Chrome/", "Chrome"), ("Safari/", "Safari"))
_SYSTEMS = (
    ("Android", "Android"),  # before Linux: Android agents name both
    ("iPhone", "iPhone"),  # before macOS: iOS agents say "like Mac OS X"
    ("iPad", "iPad"),
    ("Windows", "Windows"),
    ("Mac OS X", "macOS"),
    ("CrOS", "ChromeOS"),
    ("Linux", "Linux"),
)


def browser_label(user_agent: str) -> str:
    """'Firefox on Linux', 'Chrome on Android': enough to tell one's sessions apart; else the agent's start."""
    browser = next((name for key, name in _BROWSERS if key in user_agent), None)
    system = next((name for key, name in _SYSTEMS if key in user_agent), None)
    if browser and system:
        return f"{browser} on {system}"
    return user_agent[:60] or "unknown browser"


def end(db: Session, *, token: str) -> None:
    db.execute(delete(UserSession).where(UserSession.token_hash == digest(token)))
    db.commit()


def end_all(db: Session, *, user: User, keep_id: int | None = None) -> int:
    """End every session of `user` except `keep_id`, and revoke every API token of theirs in the same commit;
    returns how many sessions ended.

    Why the tokens too: everything that calls this is someone taking the account back (a new password, a reset
    link, "log out everywhere"). A token left alive would let whoever held the account before keep reading
    and submitting as its owner. Nothing keeps a token: the one browser a password change keeps is the
    person who just proved the password, and they can make a new token there."""
    q = delete(UserSession).where(UserSession.user_id == user.id)
    if keep_id is not None:
        q = q.where(UserSession.id != keep_id)
    count = db.execute(q).rowcount  # type: ignore[attr-defined]
    tokens.revoke_all(db, user_id=user.id)
    db.commit()
    return count or 0


def list_for(db: Session, *, user: User, idle_s: int, max_s: int) -> list[UserSession]:
    """The user's live sessions, most recently used first."""
    rows = db.scalars(
        select(UserSession).where(UserSession.user_id == user.id).order_by(UserSession.last_seen_at.desc())
    )
    now = utcnow()
    return [r for r in rows if not expired(r, now=now, idle_s=idle_s, max_s=max_s)]


def _purge_expired(db: Session, *, user_id: int, idle_s: int, max_s: int) -> None:
    now = utcnow()
    db.execute(
        delete(UserSession).where(
            UserSession.user_id == user_id,
            (UserSession.last_seen_at < now - timedelta(seconds=idle_s))
            | (UserSession.created_at < now - timedelta(seconds=max_s)),
        )
    )
