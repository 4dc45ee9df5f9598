"""Device cookies: a browser that has logged in to an account keeps being able to log in to it while someone
elsewhere guesses its password (OWASP, "Slow Down Online Guessing Attacks with Device Cookies").

    trusted(cookie, email=…, secret=…)   -> this browser's device id for the account, or None (an untrusted client)
    remember(cookie, email=…, secret=…)  -> the cookie's new value after a successful login to the account

Why: an account-wide lockout lets anyone lock anyone out (six wrong passwords, from anywhere), and behind one
gateway address an address lockout shuts out a whole class. With a device cookie the login throttle
(app/services/accounts/users.py `login`) judges a browser that has proved the password before by its own small failure
budget ("device:<id>", app/services/accounts/throttle.py) and ignores the account's and the address's locks; a client
without one keeps the account-wide lockout. The cookie grants nothing by itself: the password is still checked.

The cookie is signed with the app's secret key and bound to accounts: one entry per account (the email's
keyed digest, a random device id, when it was issued), the newest MAX_ENTRIES, each good for MAX_AGE_S. A new
login renews its entry with a fresh id, so a copied cookie's failure budget is not the owner's.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from itsdangerous import BadSignature, URLSafeTimedSerializer

COOKIE = "course_device"
MAX_AGE_S = 180 * 86400  # a term and a half: a learner logs in from the same laptop all course long
MAX_ENTRIES = 5  # accounts one browser vouches for (a shared lab computer, a TA with a second account)
_SALT = "course-device-cookie"  # keeps this signature from verifying as any other the secret key makes

Entry = tuple[str, str, int]  # (account digest, device id, issued at: Unix seconds)


def _serializer(secret: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret, salt=_SALT)


def _account(email: str, secret: str) -> str:
    # Keyed, so the readable (signed, not encrypted) cookie does not confirm a guessed email to whoever reads it.
    return hmac.new(secret.encode(), email.encode(), hashlib.sha256).hexdigest()[:20]


def _entries(cookie: str | None, secret: str, now: int) -> list[Entry]:
    if not cookie:
        return []
    try:
        data = _serializer(secret).loads(cookie, max_age=MAX_AGE_S)
    except BadSignature:  # forged, from another secret key, or expired (SignatureExpired is one)
        return []
    if not isinstance(data, list):
        return []
    entries: list[Entry] = []
    for item in data[:MAX_ENTRIES]:
        if (
            isinstance(item, list)
            and len(item) == 3
            and isinstance(item[0], str)
            and isinstance(item[1], str)
            and isinstance(item[2], int)
            and now - item[2] < MAX_AGE_S
        ):
            entries.append((item[0], item[1], item[2]))
    return entries


def trusted(cookie: str | None, *, email: str, secret: str) -> str | None:
    """The device id this cookie holds for the account of `email` (normalised), or None."""
    account = _account(email, secret)
    return next((device for acc, device, _ in _entries(cookie, secret, int(time.time())) if acc == account), None)


def remember(cookie: str | None, *, email: str, secret: str) -> str:
    """The cookie after a successful login to `email`'s account: its entry first, with a new device id."""
    now = int(time.time())
    account = _account(email, secret)
    kept = [list(e) for e in _entries(cookie, secret, now) if e[0] != account]
    return _serializer(secret).dumps([[account, secrets.token_urlsafe(12), now], *kept][:MAX_ENTRIES])
