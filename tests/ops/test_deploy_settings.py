"""What an operator copies from docs/deploying.md: a DATABASE_URL whose password holds `@` or `/`, and the JSON API
with the login cookie, whose 403 names the X-CSRF-Token header it lacked."""

from __future__ import annotations

import html
import urllib.parse

import pytest
from sqlalchemy import create_engine, make_url, text

from app.core.config import Settings, SettingsError
from app.services import startup
from app.web.deps import CSRF_REFUSED

PASSWORD = "p@ss/w:rd%"


@pytest.mark.parametrize(
    "raw",
    [
        f"postgresql+psycopg://course:{PASSWORD}@127.0.0.1:5432/course",  # read as host `ss` without the check
        "postgresql+psycopg://course:p@ss@127.0.0.1/course",
    ],
)
def test_an_unencoded_at_in_the_password_is_a_configuration_error_that_does_not_echo_it(raw):
    with pytest.raises(SettingsError) as exc:
        Settings.from_env({"DATABASE_URL": raw})
    msg = str(exc.value)
    assert msg.startswith("DATABASE_URL: the URL has more than one '@' before the database name")
    assert "percent-encode the password (@ as %40, / as %2F" in msg
    assert "ss" not in msg.replace("password", "").replace("pass", "")  # no part of the password


@pytest.mark.postgres
def test_the_percent_encoded_url_names_the_right_host_and_password(postgres_server):
    """The documented encoding is the one SQLAlchemy decodes: the URL of a role whose password holds every character
    the docs name parses to that password and the real host, and `check_database` (what `serve` and `migrate` run
    first) connects as that role. (The test server trusts its clients, so it does not check the password itself.)"""
    admin = create_engine(f"{postgres_server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("DROP ROLE IF EXISTS ops_a_course"))
        conn.execute(text(f"CREATE ROLE ops_a_course LOGIN PASSWORD '{PASSWORD}'"))
    admin.dispose()
    server = make_url(postgres_server)
    encoded = urllib.parse.quote(PASSWORD, safe="")
    url = f"postgresql+psycopg://ops_a_course:{encoded}@{server.host}:{server.port}/postgres"
    settings = Settings.from_env({"DATABASE_URL": url})
    parsed = make_url(settings.db_url)
    assert (parsed.username, parsed.password, parsed.host, parsed.database) == (
        "ops_a_course",
        PASSWORD,
        server.host,
        "postgres",
    )
    startup.check_database(settings)
    assert PASSWORD not in settings.db_where and encoded not in settings.db_where


def test_the_json_api_with_the_login_cookie_is_told_which_header_it_lacks(client):
    client.register("ann@example.org")
    body = {"lab": "env-check"}
    missing = client.post("/api/v1/jobs", json=body)
    assert missing.status_code == 403
    detail = missing.json()["detail"]
    assert detail.startswith("No X-CSRF-Token header: a request authenticated by the login cookie must send")
    assert "GET /api/v1/me returns it as csrf_token" in detail
    fresh = missing.headers["x-csrf-token"]
    assert fresh == client.api_token()  # the refusal hands the token to send
    stale = client.post("/api/v1/jobs", json=body, headers={"X-CSRF-Token": "an old token"})
    assert stale.status_code == 403
    assert stale.json()["detail"].startswith("The X-CSRF-Token header does not match this session's token")
    assert client.post("/api/v1/jobs", json=body, headers={"X-CSRF-Token": fresh}).status_code == 201
    form = client.client.post("/account/name", data={"display_name": "x"})
    assert form.status_code == 403 and CSRF_REFUSED in html.unescape(form.text)  # a page's form: reload, resend
