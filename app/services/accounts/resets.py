"""Password-reset links: a site admin (or an instructor, for a learner of their class) issues one for a user; it
sets a new password once, before it expires, and ends every session of that user.

    may_issue(db, by=…, user=…)                    -> whether `by` may issue a link for `user`
    issue(db, user=…, issued_by=…, lifetime_s=…)  -> (PasswordReset, token); earlier unused links of the user die
    find(db, token=…)                              -> the usable PasswordReset, or None
    use(db, token=…, new_password=…)               -> the User, whose sessions are all ended
    link(base_url, token)                          -> the URL to hand to the user
    send(settings, user=…, url=…)                  mail the link when COURSE_SMTP_URL is set (stdlib smtplib)

Only the token's SHA-256 is stored, like session and API tokens: a database dump opens no account.
"""

from __future__ import annotations

import hashlib
import secrets
import smtplib
import ssl
from datetime import datetime, timedelta
from email.message import EmailMessage
from urllib.parse import unquote, urlsplit

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core import passwords
from app.core.config import Settings
from app.core.models import PasswordReset, User, utcnow
from app.services.accounts import sessions, users
from app.services.classes import scopes
from app.services.errors import FieldError
from labs.api import count

SMTP_TIMEOUT_S = 20  # a slow mail server must not hold an instructor's request for longer


class ResetError(FieldError):
    pass


class MailError(RuntimeError):
    """The mail server refused or could not be reached; the message says which and why."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def may_issue(db: Session, *, by: User, user: User) -> bool:
    """A site admin for anyone; an instructor for a learner of a class they instruct who holds no other power.

    A reset link opens the account it is for. An instructor may open their learners' (as they help one who forgot a
    password), never an account that is staff of any class or holds a site role: that would hand them another
    class's learners, or the server."""
    if by.has_role("admin"):
        return True
    if user.roles or scopes.is_staff_anywhere(db, user_id=user.id):
        return False
    return scopes.instructs(db, user_id=by.id, owner_id=user.id)


def issue(db: Session, *, user: User, issued_by: User | None, lifetime_s: int) -> tuple[PasswordReset, str]:
    """A new link for `user`; any earlier unused link of theirs stops working (only the newest is live)."""
    now = utcnow()
    db.execute(
        update(PasswordReset)
        .where(PasswordReset.user_id == user.id, PasswordReset.used_at.is_(None))
        .values(used_at=now)
    )
    token = secrets.token_urlsafe(32)
    row = PasswordReset(
        user_id=user.id,
        token_hash=_digest(token),
        created_by_id=issued_by.id if issued_by else None,
        created_at=now,
        expires_at=now + timedelta(seconds=lifetime_s),
    )
    db.add(row)
    db.commit()
    return row, token


def find(db: Session, *, token: str) -> PasswordReset | None:
    row = db.scalar(select(PasswordReset).where(PasswordReset.token_hash == _digest(token or "")))
    if row is None or row.used_at is not None or row.expires_at <= utcnow():
        return None
    return row


def use(db: Session, *, token: str, new_password: str) -> User:
    """Set the password and spend the link; ResetError (field named) if the link is dead or the password bad."""
    users.check_password(new_password, "new_password")
    row = find(db, token=token)
    if row is None:
        raise ResetError("token", "this reset link has expired or was already used; ask your instructor for a new one")
    # Spend the link with a conditional update first, so two submissions of one link set one password.
    spent = db.execute(
        update(PasswordReset)
        .where(PasswordReset.id == row.id, PasswordReset.used_at.is_(None))
        .values(used_at=utcnow())
    )
    if spent.rowcount != 1:  # type: ignore[attr-defined]
        db.rollback()
        raise ResetError("token", "this reset link was just used; ask your instructor for a new one")
    user = db.get(User, row.user_id)
    assert user is not None  # the row cascades with its user
    user.password_hash = passwords.hash_password(new_password)
    db.commit()
    sessions.end_all(db, user=user)
    return user


def link(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/reset/{token}"


def expires_in_words(expires_at: datetime) -> str:
    hours = max(0, round((expires_at - utcnow()).total_seconds() / 3600))
    return count(hours, "hour")


def send(settings: Settings, *, user: User, url: str, expires_at: datetime) -> None:
    """Mail the link to the user through COURSE_SMTP_URL. MailError says what went wrong.

    smtp://host[:25]              plain SMTP (a relay on this host or a trusted network)
    smtp+starttls://host[:587]    STARTTLS, certificate checked
    smtps://host[:465]            TLS from the start, certificate checked
    user:password@ in the URL logs in.
    """
    parts = urlsplit(settings.smtp_url)
    host = parts.hostname or "localhost"
    msg = EmailMessage()
    msg["Subject"] = "Your password-reset link"
    msg["From"] = settings.mail_from or f"course@{host}"
    msg["To"] = user.email
    msg.set_content(
        f"Hello {user.display_name},\n\n"
        "an instructor issued a password-reset link for your course account. Open it to choose a new password:\n\n"
        f"    {url}\n\n"
        f"The link works once, within {expires_in_words(expires_at)}. Setting a new password logs your account out "
        "everywhere it is logged in.\n\nIf you did not ask for this, tell your instructor.\n"
    )
    context = ssl.create_default_context()
    try:
        smtp: smtplib.SMTP
        if parts.scheme == "smtps":
            smtp = smtplib.SMTP_SSL(host, parts.port or 465, timeout=SMTP_TIMEOUT_S, context=context)
        else:
            default_port = 587 if parts.scheme == "smtp+starttls" else 25
            smtp = smtplib.SMTP(host, parts.port or default_port, timeout=SMTP_TIMEOUT_S)
        with smtp:
            if parts.scheme == "smtp+starttls":
                smtp.starttls(context=context)
            if parts.username:
                smtp.login(unquote(parts.username), unquote(parts.password or ""))
            smtp.send_message(msg)
    except (OSError, smtplib.SMTPException) as exc:
        raise MailError(f"the mail server at {host} did not take the message: {exc}") from exc
