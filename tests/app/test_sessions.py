"""Sessions are server-side rows, so logout, "log out everywhere" and a password change end
them for good, and idle and absolute lifetimes hold. A cookie copied before the event is replayed from a second
client, the way a thief would."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import delete, event, select

from app.core.models import User, UserRole, UserSession, utcnow
from app.services.accounts import sessions
from tests.app.aging import age_sessions

pytestmark = pytest.mark.both_backends  # sessions are rows read and renewed on every request

COOKIE = "course_session"


def _replay(make_client, cookie: str):
    """A second browser holding a copy of `cookie`."""
    thief = make_client()
    thief.client.cookies.set(COOKIE, cookie)
    return thief


def _me(client) -> int:
    return client.get("/api/v1/me").status_code


def test_a_cookie_saved_before_logout_no_longer_works(client, make_client, db):
    client.register("ann@example.org")
    saved = client.client.cookies[COOKIE]
    assert _me(_replay(make_client, saved)) == 200  # the copy works while the session lives
    client.post("/logout")
    assert _me(client) == 401
    assert _me(_replay(make_client, saved)) == 401
    assert db.scalar(select(UserSession.id)) is None  # the row is gone, not just the cookie


def test_log_out_everywhere_ends_every_browser(client, make_client, db):
    client.register("ann@example.org")
    laptop = make_client()
    assert laptop.login("ann@example.org").status_code == 303
    phone_cookie = client.client.cookies[COOKIE]
    r = laptop.post("/account/logout-everywhere", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login?notice=everywhere"
    assert "logged out everywhere" in laptop.get("/login?notice=everywhere").text
    assert _me(laptop) == 401 and _me(client) == 401
    assert _me(_replay(make_client, phone_cookie)) == 401
    assert db.scalar(select(UserSession.id)) is None


def test_password_change_ends_the_other_sessions_and_keeps_this_one(client, make_client, db):
    client.register("ann@example.org")
    other = make_client()
    other.login("ann@example.org")
    r = client.post(
        "/account/password",
        data={
            "current_password": "correct horse",
            "new_password": "battery staple",
            "confirm_password": "battery staple",
        },
    )
    assert r.status_code == 200 and "1 other session logged out" in r.text
    assert _me(client) == 200
    assert _me(other) == 401
    assert make_client().login("ann@example.org").status_code == 400  # the old password is gone
    assert make_client().login("ann@example.org", password="battery staple").status_code == 303


def test_login_rotates_the_session_and_ends_the_one_it_replaces(client, make_client, db):
    client.register("ann@example.org")
    before = client.client.cookies[COOKIE]
    client.login("ann@example.org")  # logging in again in the same browser
    assert client.client.cookies[COOKIE] != before
    assert _me(_replay(make_client, before)) == 401
    assert len(db.scalars(select(UserSession)).all()) == 1


def test_idle_lifetime_ends_a_session(client, db, settings):
    client.register("ann@example.org")
    age_sessions(db, last_seen_s=settings.session_idle_s - 120, created_s=settings.session_idle_s)
    assert _me(client) == 200  # used within the idle lifetime: still in, and the use is recorded
    db.expire_all()
    assert utcnow() - db.scalar(select(UserSession.last_seen_at)) < timedelta(seconds=60)
    age_sessions(db, last_seen_s=settings.session_idle_s + 1, created_s=settings.session_idle_s + 1)
    assert _me(client) == 401
    assert db.scalar(select(UserSession.id)) is None  # the expired row is deleted on sight


def test_absolute_lifetime_ends_an_active_session(client, db, settings):
    client.register("ann@example.org")
    age_sessions(db, last_seen_s=0, created_s=settings.session_max_s + 1)
    assert _me(client) == 401


def test_lifetimes_come_from_settings():
    from app.core.config import Settings

    s = Settings.from_env({"COURSE_SESSION_IDLE_HOURS": "2", "COURSE_SESSION_MAX_DAYS": "3"})
    assert (s.session_idle_s, s.session_max_s) == (7200, 3 * 86400)


def test_a_page_view_reads_the_session_in_one_statement_and_writes_nothing(client, app):
    """The lookup is on every request of every page: one indexed query joined with the user and roles."""
    client.register("ann@example.org")
    client.get("/api/v1/me")  # first use after login may touch last_seen_at; the next ones within a minute do not
    statements: list[str] = []

    def record(conn, cursor, statement, *args):
        statements.append(statement)

    event.listen(app.state.engine, "before_cursor_execute", record)
    try:
        assert _me(client) == 200
    finally:
        event.remove(app.state.engine, "before_cursor_execute", record)
    login = [s for s in statements if "user_sessions" in s]  # /me also lists the classes, by the user's id
    assert len(login) == 1, statements
    assert "users" in login[0] and "user_roles" in login[0]
    assert all(s.lstrip().upper().startswith("SELECT") for s in statements), statements


def test_only_a_digest_of_the_token_is_stored(db, make_user):
    user = make_user("ann@example.org")
    token = sessions.start(db, user=user, idle_s=3600, max_s=86400)
    row = db.scalar(select(UserSession))
    assert row.token_hash == sessions.digest(token) and token not in row.token_hash
    active = sessions.lookup(db, token=token, idle_s=3600, max_s=86400)
    assert active is not None and active.user.email == "ann@example.org" and active.user.roles == set()
    assert sessions.lookup(db, token=token + "x", idle_s=3600, max_s=86400) is None


def test_the_pages_peek_reads_what_the_full_lookup_reads_and_hands_every_write_back(db, make_user, settings):
    """`peek` (lesson parts and the dashboard, app/web/deps.py Viewer) reads the session as plain columns. It must
    name the same user with the same roles as `lookup`, find nothing for a wrong token, and answer None, so
    that the caller does the whole lookup in a worker thread, whenever a write is due: a touch or an expiry."""
    idle, life = settings.session_idle_s, settings.session_max_s
    staff = make_user("sam@example.org", roles=("learner", "grader", "instructor"))
    plain = make_user("pat@example.org")
    db.execute(delete(UserRole).where(UserRole.user_id == plain.id))  # no role at all: the outer join's NULL row
    db.commit()
    db.expire(plain)
    for user in (staff, plain):
        token = sessions.start(db, user=user, idle_s=idle, max_s=life)
        peeked = sessions.peek(db.connection(), token=token, idle_s=idle, max_s=life)
        full = sessions.lookup(db, token=token, idle_s=idle, max_s=life)
        assert peeked is not None and full is not None
        assert peeked.session_id == full.session.id
        assert peeked.reader == sessions.Reader.of(full.user)
        assert (peeked.reader.id, peeked.reader.email, peeked.reader.roles) == (user.id, user.email, user.roles)
        assert sessions.peek(db.connection(), token=token + "x", idle_s=idle, max_s=life) is None
    assert plain.roles == set() and sessions.Reader.of(staff).has_role("admin")
    age_sessions(db, last_seen_s=sessions.TOUCH_S + 5, created_s=sessions.TOUCH_S + 5)
    assert sessions.peek(db.connection(), token=token, idle_s=idle, max_s=life) is None  # a touch is due
    assert sessions.lookup(db, token=token, idle_s=idle, max_s=life) is not None  # which the lookup writes
    assert sessions.peek(db.connection(), token=token, idle_s=idle, max_s=life) is not None
    age_sessions(db, last_seen_s=30, created_s=life + 1)
    assert sessions.peek(db.connection(), token=token, idle_s=idle, max_s=life) is None  # past its lifetime


def test_account_page_lists_sessions_and_marks_this_one(client, make_client, db):
    client.register("ann@example.org")
    make_client().login("ann@example.org")
    page = client.get("/account").text
    assert page.count("testclient") == 2  # two sessions, each named by its browser
    assert "(this browser)" in page
    assert db.scalar(select(User.id)) is not None


@pytest.mark.parametrize(
    "agent,label",
    [
        ("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "Firefox on Linux"),
        ("Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36",
         "Chrome on Android"),
        ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 Version/17.5 Mobile/15E148 "
         "Safari/604.1", "Safari on iPhone"),
        ("curl/8.5.0", "curl/8.5.0"),
        ("", "unknown browser"),
    ],
)  # fmt: skip
def test_sessions_are_named_by_browser_and_system(agent, label):
    assert sessions.browser_label(agent) == label
