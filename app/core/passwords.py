"""Password hashing (argon2), and the dummy hash that keeps login time independent of whether an email
exists."""

from __future__ import annotations

import functools
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


@functools.cache
def dummy_hash() -> str:
    """A hash of a random secret with this hasher's parameters, made once per process. Verifying an
    unknown email's password against it costs what a real account's check costs, so the answer's
    timing does not tell whether the email has an account."""
    return _hasher.hash(secrets.token_urlsafe(32))
