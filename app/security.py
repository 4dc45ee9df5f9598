"""Password hashing (argon2) and session-bound CSRF tokens."""

from __future__ import annotations

import hmac
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

# Argon2id at OWASP's recommended setting (19 MiB, 2 passes, 1 lane: ~35 ms of one core) rather than
# argon2-cffi's default RFC 9106 low-memory profile (64 MiB, 3 passes, 4 lanes: ~240 ms of CPU spread over 4
# threads). On a 2-core class server the default made 200 learners registering at once wait minutes and
# took 64 MiB per concurrent hash. Hashes made with other parameters still verify (they carry their own).
_hasher = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


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
