"""Password hashing (argon2), the dummy hash that keeps login time independent of whether an email
exists, and session-bound CSRF tokens."""

from __future__ import annotations

import functools
import hmac
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


@functools.cache
def dummy_hash() -> str:
    """A hash of a random secret with this hasher's parameters, made once per process. Verifying an
    unknown email's password against it costs what a real account's check costs, so the answer's
    timing does not tell whether the email has an account."""
    return _hasher.hash(secrets.token_urlsafe(32))


SESSION_KEY = "sid"  # the signed cookie's key for the server-side session token (app/services/sessions.py)
CSRF_SESSION_KEY = "csrf"
CSRF_FORM_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"


def csrf_token_for(session: dict) -> str:
    """The session's token, created on first use (a synchronizer token, not a double-submit cookie)."""
    token = session.get(CSRF_SESSION_KEY)
    if not token:
        token = secrets.token_urlsafe(32)
        session[CSRF_SESSION_KEY] = token
    return token


def csrf_matches(session: dict, presented: str | None) -> bool:
    expected = session.get(CSRF_SESSION_KEY)
    return bool(expected and presented and hmac.compare_digest(expected, presented))

