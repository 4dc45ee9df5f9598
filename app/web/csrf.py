"""Session-bound CSRF tokens (synchronizer tokens) and the session cookie's key for the login token."""

from __future__ import annotations

import hmac
import secrets

SESSION_KEY = "sid"  # the signed cookie's key for the server-side session token (app/services/accounts/sessions.py)
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
