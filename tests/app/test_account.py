"""Accounts: change the display name and the password, log out everywhere, and password-reset links
an instructor issues (page and CLI), mailed through a real SMTP server when COURSE_SMTP_URL is set."""

from __future__ import annotations

import dataclasses
import email
import os
import re
import subprocess
import sys
from datetime import timedelta

import pytest
from aiosmtpd.controller import Controller
from sqlalchemy import func, select, update

from app.core.models import ApiToken, PasswordReset, User, UserSession, utcnow
from tests.conftest import ROOT, free_port


def _user(db, email_: str) -> User:
    db.expire_all()
    return db.scalar(select(User).where(User.email == email_))


# ---------------------------------------------------------------- display name and password


def test_change_display_name(client, db):
    client.register("ann@example.org")
    r = client.post("/account/name", data={"display_name": "  Ann Lee "})
    assert r.status_code == 200 and "Your display name is now “Ann Lee”" in r.text
    assert _user(db, "ann@example.org").display_name == "Ann Lee"
    assert "Ann Lee" in client.get("/").text


@pytest.mark.parametrize("name", ["", "   ", "x" * 81, "x" * 300])
def test_a_bad_display_name_names_the_field_and_changes_nothing(client, db, name):
    client.register("ann@example.org", name="Ann")
    r = client.post("/account/name", data={"display_name": name}, follow_redirects=False)
    assert r.status_code == 400
    error = re.search(r'<p class="error" id="display_name-error" role="alert">([^<]+)</p>', r.text).group(1)
    assert error == f"Display name: use 1 to 80 characters (you gave {len(name.strip())})"
    assert _user(db, "ann@example.org").display_name == "Ann"


def test_a_300_character_name_comes_back_in_the_form_under_its_own_error(client, db):
    """Not the framework's bare 'ERROR 422 ... String should have at most 200 characters' page: the whole
    account page, the typed value kept in the field, the field limited to 80 characters in the browser too."""
    client.register("ann@example.org", name="Ann")
    typed = "Ann " + "y" * 296
    r = client.post("/account/name", data={"display_name": typed})
    assert r.status_code == 400 and "Check your input" not in r.text
    field = re.search(r'<input id="display_name"[^>]*>', r.text).group(0)
    assert f'value="{typed}"' in field and 'maxlength="80"' in field and 'aria-invalid="true"' in field
    assert "you gave 300" in r.text and 'id="password-h"' in r.text  # the rest of the page is there
    assert 'maxlength="80"' in client.get("/account").text
    assert _user(db, "ann@example.org").display_name == "Ann"


# ---------------------------------------------------------------- Post/Redirect/Get


def test_saving_the_name_redirects_to_the_account_page_with_a_fixed_confirmation(client, db):
    client.register("ann@example.org", name="Ann")
    r = client.post("/account/name", data={"display_name": "Ann Lee"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/account?done=name#profile-h"
    page = client.get(r.headers["location"])
    assert page.status_code == 200 and "Your display name is now “Ann Lee”." in page.text
    assert "is now" not in client.get("/account").text  # the confirmation comes from the address only


@pytest.mark.parametrize("done", ["<b>hacked</b>", "Your+account+is+deleted", "name%22", "NAME"])
def test_the_address_cannot_put_its_own_words_on_the_account_page(client, done):
    client.register("ann@example.org", name="Ann")
    page = client.get(f"/account?done={done}&others=5")
    assert page.status_code == 200 and 'class="ok"' not in page.text
    assert "hacked" not in page.text and "deleted" not in page.text


def test_a_password_change_redirects_and_says_how_many_sessions_ended(client, make_client, db):
    client.register("ann@example.org")
    other = make_client()
    other.login("ann@example.org")
    form = {"current_password": "correct horse", "new_password": "battery staple", "confirm_password": "battery staple"}
    r = client.post("/account/password", data=form, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/account?done=password&others=1#password-h"
    page = client.get(r.headers["location"]).text
    assert "Password changed; 1 other session logged out. This browser stays in." in page
    assert other.get("/api/v1/me").status_code == 401


def test_revoking_a_token_redirects_to_the_account_page(client, db):
    client.register("ann@example.org")
    client.post("/account/tokens", data={"name": "lab laptop"})
    token_id = re.search(r"/account/tokens/(\d+)/revoke", client.get("/account").text).group(1)
    r = client.post(f"/account/tokens/{token_id}/revoke", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/account?done=token-revoked#tok-h"
    page = client.get(r.headers["location"]).text
    assert "Token revoked: scripts using it now get 401." in page and "revoked " in page
    assert db.scalar(select(ApiToken.revoked_at).where(ApiToken.id == int(token_id))) is not None


@pytest.mark.parametrize("path", ["/account/name", "/account/password", "/account/tokens", "/account/tokens/1/revoke"])
def test_a_form_address_opened_directly_leads_to_the_account_page(client, path):
    client.register("ann@example.org")
    r = client.get(path, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/account")
    assert "Your account" in client.get(path).text


def _token_form(client) -> dict:
    page = client.get("/account").text
    return {"name": "lab laptop", "once": re.search(r'name="once" value="([^"]+)"', page).group(1)}


def test_a_new_token_is_shown_once_and_a_reload_makes_no_second_token(client, db):
    """Creating a token renders its plaintext in the POST's own response (never in an address or the session
    cookie), uncached; sending that same form again, as a reload does, is refused and makes nothing."""
    client.register("ann@example.org")
    form = _token_form(client)
    r = client.post("/account/tokens", data=form, follow_redirects=False)
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    token = re.search(r'id="new-token" class="token">([^<]+)<', r.text).group(1)
    assert "it is not shown again" in r.text and 'href="/account#tok-h"' in r.text
    assert token not in r.headers.get("location", "") and token not in str(client.client.cookies.values())
    again = client.post("/account/tokens", data=form, follow_redirects=False)
    assert again.status_code == 409 and 'id="token-error"' in again.text and "already sent" in again.text
    assert 'id="new-token"' not in again.text and token not in again.text
    assert db.scalar(select(func.count()).select_from(ApiToken)) == 1
    # a fresh form (the page's next render) makes a second one on purpose
    assert client.post("/account/tokens", data=_token_form(client)).status_code == 200
    assert db.scalar(select(func.count()).select_from(ApiToken)) == 2


def test_a_refused_token_name_is_kept_and_named(client, db):
    client.register("ann@example.org")
    r = client.post("/account/tokens", data={"name": "z" * 81})
    assert r.status_code == 400 and "Token name: give the token a name of 1 to 80 characters" in r.text
    assert re.search(r'<input id="token-name"[^>]*value="z{81}"', r.text)
    assert db.scalar(select(func.count()).select_from(ApiToken)) == 0


def test_the_tokens_table_stacks_on_phones(client):
    client.register("ann@example.org")
    client.post("/account/tokens", data={"name": "lab laptop"})
    page = client.get("/account").text
    wrap = re.search(r'<div class="table-wrap"[^>]*><table class="stack">\s*<caption id="tokens-cap">', page)
    assert wrap and 'tabindex="0" role="region" aria-labelledby="tokens-cap"' in wrap.group(0)
    for label in ("Name", "Starts with", "Created", "Last used"):
        assert f'<td data-label="{label}">' in page
    assert '<td class="action"><form method="post" action="/account/tokens/' in page


@pytest.mark.parametrize(
    "form,field,message",
    [
        ({"current_password": "wrong one!", "new_password": "battery staple", "confirm_password": "battery staple"},
         "current_password", "not your current password"),
        ({"current_password": "correct horse", "new_password": "short", "confirm_password": "short"},
         "new_password", "use 8 to 256 characters"),
        ({"current_password": "correct horse", "new_password": "battery staple", "confirm_password": "battery stapel"},
         "confirm_password", "differ"),
    ],
)  # fmt: skip
def test_a_refused_password_change_names_the_field_and_changes_nothing(client, make_client, db, form, field, message):
    client.register("ann@example.org")
    other = make_client()
    other.login("ann@example.org")
    before = _user(db, "ann@example.org").password_hash
    r = client.post("/account/password", data=form)
    assert r.status_code == 400 and f'id="{field}-error"' in r.text and message in r.text
    assert _user(db, "ann@example.org").password_hash == before
    assert other.get("/api/v1/me").status_code == 200  # no session ended either


def test_every_password_problem_is_reported_at_once_under_its_field(client, make_client, db):
    client.register("ann@example.org")
    other = make_client()
    other.login("ann@example.org")
    before = _user(db, "ann@example.org").password_hash
    form = {"current_password": "wrong one!", "new_password": "short", "confirm_password": "shirt"}
    r = client.post("/account/password", data=form, follow_redirects=False)
    assert r.status_code == 400
    errors = dict(re.findall(r'<p class="error" id="(\w+)-error" role="alert">([^<]+)</p>', r.text))
    assert errors == {
        "current_password": "Current password: this is not your current password",
        "new_password": "New password: use 8 to 256 characters (you gave 5)",
        "confirm_password": "New password again: the two new passwords differ: type the new password again, exactly",
    }
    for field in errors:
        assert re.search(rf'<input id="{field}"[^>]*aria-invalid="true" aria-describedby="{field}-error"', r.text)
    assert _user(db, "ann@example.org").password_hash == before
    assert other.get("/api/v1/me").status_code == 200


@pytest.mark.parametrize(
    "path,data",
    [
        ("/account/name", {"display_name": "Eve"}),
        (
            "/account/password",
            {"current_password": "correct horse", "new_password": "x" * 9, "confirm_password": "x" * 9},
        ),
        ("/account/logout-everywhere", {}),
        ("/account/reset-links", {"email": "ann@example.org"}),
        ("/reset/whatever", {"new_password": "x" * 9, "confirm_password": "x" * 9}),
    ],
)
def test_every_account_post_needs_the_csrf_token(client, make_user, db, path, data):
    make_user("ivy@example.org", roles=("instructor",))
    client.login("ivy@example.org")
    r = client.client.post(path, data=data)
    assert r.status_code == 403 and "security token" in r.text
    assert client.get("/api/v1/me").status_code == 200


# ---------------------------------------------------------------- reset links


def _instructor(make_user, make_client):
    make_user("ivy@example.org", roles=("instructor",))
    c = make_client()
    c.login("ivy@example.org")
    return c


SITE = "http://127.0.0.1:8000"  # Settings.site_url with COURSE_PUBLIC_URL unset and no `serve`


def _issue(ivy, email_: str = "ann@example.org") -> str:
    r = ivy.post("/account/reset-links", data={"email": email_})
    assert r.status_code == 200, r.text[-1500:]
    return re.search(r'<code id="reset-link" class="token">([^<]+)</code>', r.text).group(1)


def test_an_instructor_issues_a_reset_link_that_works_once_and_ends_every_session(client, make_client, make_user, db):
    client.register("ann@example.org")
    phone = make_client()
    phone.login("ann@example.org")
    ivy = _instructor(make_user, make_client)
    link = _issue(ivy)
    assert link.startswith("http://127.0.0.1:8000/reset/")  # the site's address (no COURSE_PUBLIC_URL in tests)
    path = link.removeprefix(SITE)
    anon = make_client()
    assert anon.get(path).status_code == 200
    r = anon.post(
        path, data={"new_password": "battery staple", "confirm_password": "battery staple"}, follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"].startswith("/login?notice=reset")
    assert "Your new password is set" in anon.get(r.headers["location"]).text
    assert client.get("/api/v1/me").status_code == 401 and phone.get("/api/v1/me").status_code == 401
    assert db.scalar(select(UserSession.id).where(UserSession.user_id == _user(db, "ann@example.org").id)) is None
    assert make_client().login("ann@example.org", password="battery staple").status_code == 303
    # once only
    again = anon.post(path, data={"new_password": "other password", "confirm_password": "other password"})
    assert again.status_code == 404 and "expired or was already used" in again.text
    assert make_client().login("ann@example.org", password="battery staple").status_code == 303


def test_a_reset_link_with_a_bad_password_keeps_working(client, make_client, make_user, db):
    client.register("ann@example.org")
    path = _issue(_instructor(make_user, make_client)).removeprefix(SITE)
    anon = make_client()
    r = anon.post(path, data={"new_password": "short", "confirm_password": "short"})
    assert r.status_code == 400 and 'id="new_password-error"' in r.text
    r = anon.post(path, data={"new_password": "battery staple", "confirm_password": "battery stable"})
    assert r.status_code == 400 and 'id="confirm_password-error"' in r.text
    assert client.get("/api/v1/me").status_code == 200  # nothing changed yet
    ok = anon.post(path, data={"new_password": "battery staple", "confirm_password": "battery staple"})
    assert ok.status_code == 200  # followed to the login page


def test_expired_and_superseded_links_do_not_work(client, make_client, make_user, db):
    client.register("ann@example.org")
    ivy = _instructor(make_user, make_client)
    first = _issue(ivy).removeprefix(SITE)
    second = _issue(ivy).removeprefix(SITE)
    anon = make_client()
    assert anon.get(first).status_code == 404  # issuing a new link cancels the earlier one
    db.execute(update(PasswordReset).values(expires_at=utcnow() - timedelta(seconds=1)))
    db.commit()
    assert anon.get(second).status_code == 404
    r = anon.post(second, data={"new_password": "battery staple", "confirm_password": "battery staple"})
    assert r.status_code == 404
    assert make_client().login("ann@example.org").status_code == 303  # the old password still works


def test_an_unknown_email_names_the_field(make_client, make_user):
    r = _instructor(make_user, make_client).post("/account/reset-links", data={"email": "nobody@example.org"})
    assert r.status_code == 400 and 'id="email-error"' in r.text and "nobody@example.org" in r.text


def test_only_instructors_issue_reset_links(client):
    client.register("ann@example.org")
    assert client.get("/account/reset-links").status_code == 403
    assert client.post("/account/reset-links", data={"email": "ann@example.org"}).status_code == 403


def test_only_a_digest_of_the_reset_token_is_stored(client, make_client, make_user, db):
    client.register("ann@example.org")
    token = _issue(_instructor(make_user, make_client)).rsplit("/", 1)[1]
    stored = db.scalar(select(PasswordReset.token_hash))
    assert token not in stored and len(stored) == 64


class _Inbox:
    def __init__(self):
        self.messages: list[email.message.Message] = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 Message accepted for delivery"


@pytest.fixture
def smtp_server():
    """A real SMTP server (aiosmtpd) on a free loopback port; yields (url, inbox)."""
    inbox = _Inbox()
    port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield f"smtp://127.0.0.1:{port}", inbox
    finally:
        controller.stop()


def test_with_smtp_the_link_is_mailed_not_shown(settings, smtp_server, make_user, db):
    from fastapi.testclient import TestClient

    from app.web.factory import create_app
    from tests.conftest import Browserless

    url, inbox = smtp_server
    app = create_app(dataclasses.replace(settings, smtp_url=url, public_url="https://course.example.org"))
    make_user("ann@example.org")
    make_user("ivy@example.org", roles=("instructor",))
    with TestClient(app) as raw:
        ivy = Browserless(raw)
        ivy.login("ivy@example.org")
        r = ivy.post("/account/reset-links", data={"email": "ann@example.org"})
    assert r.status_code == 200 and "A reset link was mailed to ann@example.org" in r.text
    assert 'id="reset-link"' not in r.text
    [msg] = inbox.messages
    assert msg["To"] == "ann@example.org" and msg["Subject"] == "Your password-reset link"
    body = msg.get_payload(decode=True).decode()
    link = re.search(r"https://course\.example\.org/reset/\S+", body).group(0)
    token = link.rsplit("/", 1)[1]
    from app.services.accounts import resets

    assert resets.find(db, token=token) is not None


def test_a_mail_server_that_is_down_still_leaves_the_link_to_copy(settings, make_user):
    from fastapi.testclient import TestClient

    from app.web.factory import create_app
    from tests.conftest import Browserless

    app = create_app(dataclasses.replace(settings, smtp_url=f"smtp://127.0.0.1:{free_port()}"))
    make_user("ann@example.org")
    make_user("ivy@example.org", roles=("instructor",))
    with TestClient(app) as raw:
        ivy = Browserless(raw)
        ivy.login("ivy@example.org")
        r = ivy.post("/account/reset-links", data={"email": "ann@example.org"})
    assert r.status_code == 502 and "The link was not mailed" in r.text and 'id="reset-link"' in r.text


def _cli(settings, *args, **env_extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "DATABASE_URL"))}
    env.update(COURSE_ENV="test", COURSE_DATA_DIR=str(settings.data_dir), DATABASE_URL=settings.db_url, **env_extra)
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_cli_reset_link(settings, make_user, db, smtp_server):
    make_user("ann@example.org")
    out = _cli(settings, "users", "reset-link", "--email", "ann@example.org", COURSE_PUBLIC_URL="https://c.example.org")
    assert out.returncode == 0, out.stderr
    link = re.search(r"https://c\.example\.org/reset/(\S+)", out.stdout)
    from app.services.accounts import resets

    assert link and resets.find(db, token=link.group(1)) is not None
    assert f"reset link for ann@example.org in {settings.db_where} " in out.stdout  # which database it wrote to
    missing = _cli(settings, "users", "reset-link", "--email", "nobody@example.org")
    assert missing.returncode == 2 and "--email: no account" in missing.stderr
    url, inbox = smtp_server
    mailed = _cli(settings, "users", "reset-link", "--email", "ann@example.org", COURSE_SMTP_URL=url)
    assert (
        mailed.returncode == 0
        and f"mailed a reset link to ann@example.org, an account in {settings.db_where}" in mailed.stdout
    )
    assert "/reset/" not in mailed.stdout and len(inbox.messages) == 1
    db.expire_all()
    assert resets.find(db, token=link.group(1)) is None  # the mailed link replaced the printed one


@pytest.mark.parametrize("host", ["evil.example:666", "127.0.0.1:9999"])
def test_a_reset_link_never_takes_the_requests_host_header(client, make_client, make_user, app, host):
    """With COURSE_PUBLIC_URL unset, `Host: evil.example:666` made the link http://evil.example:666/reset/<token>."""
    client.register("ann@example.org")
    ivy = _instructor(make_user, make_client)
    r = ivy.post("/account/reset-links", data={"email": "ann@example.org"}, headers={"Host": host})
    link = re.search(r'<code id="reset-link" class="token">([^<]+)</code>', r.text).group(1)
    assert link.startswith(f"{SITE}/reset/") and host not in r.text
    app.state.settings = dataclasses.replace(app.state.settings, public_url="https://course.example.org")
    r = ivy.post("/account/reset-links", data={"email": "ann@example.org"}, headers={"Host": host})
    assert re.search(r'id="reset-link" class="token">https://course\.example\.org/reset/', r.text)
