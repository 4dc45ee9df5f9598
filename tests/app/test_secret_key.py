"""The published development secret never serves a network. The image runs in production
mode (a secret is required); `serve` refuses the default key on any non-loopback address; and a cookie
forged with the default key (the probe's `{"user_id": 1}`) opens nothing, since a login is a server-side row."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys

import itsdangerous
import pytest

from app.cli.preflight import check_bind, is_loopback
from app.cli.serve import check_public_url
from app.core.config import DEV_SECRET, Settings, SettingsError
from tests.conftest import ROOT, free_port


def _forge(payload: dict, key: str = DEV_SECRET) -> str:
    """A session cookie signed the way Starlette's SessionMiddleware signs one."""
    data = base64.b64encode(json.dumps(payload).encode())
    return itsdangerous.TimestampSigner(key).sign(data).decode()


@pytest.fixture
def dev_app(settings):
    """The app as the old image ran it: development mode, the published key."""
    import dataclasses

    from app.web.factory import create_app

    return create_app(dataclasses.replace(settings, environment="development", secret_key=DEV_SECRET))


def test_a_forged_cookie_is_nobody(dev_app, make_user):
    from fastapi.testclient import TestClient

    ivy = make_user("ivy@example.org", roles=("instructor",))
    with TestClient(dev_app) as c:
        for payload in ({"user_id": ivy.id}, {"sid": "guessed-token", "user_id": ivy.id}):
            c.cookies.set("course_session", _forge(payload))
            assert c.get("/api/v1/me").status_code == 401
            assert c.get("/instructor", follow_redirects=False).status_code == 303  # to /login


def test_the_image_runs_in_production_mode():
    instructions = (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
    env_lines = " ".join(line[4:] for line in instructions if line.startswith("ENV "))
    env = dict(re.findall(r"(COURSE_[A-Z_]+)=(\S+)", env_lines))
    assert env["COURSE_ENV"] == "production"
    assert "COURSE_SECRET_KEY" not in env  # never baked into the image
    with pytest.raises(SettingsError, match="COURSE_SECRET_KEY: must be set in production"):
        Settings.from_env(env)
    assert Settings.from_env({**env, "COURSE_SECRET_KEY": "x" * 40}).secure_cookies is True


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.1.1", "::1", "[::1]", "localhost"])
def test_the_development_key_may_serve_loopback(host):
    assert is_loopback(host)
    check_bind(Settings.from_env({}), host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "course.example.org"])
def test_the_development_key_is_refused_on_any_other_address(host):
    with pytest.raises(SettingsError, match="only serve on a loopback address"):
        check_bind(Settings.from_env({}), host)
    check_bind(Settings.from_env({"COURSE_SECRET_KEY": "a-real-secret-" * 3}), host)  # a real key may


def test_serve_on_all_interfaces_with_no_configuration_refuses_to_start(tmp_path):
    """The old image's command with COURSE_ENV unset: exits 2 naming the setting, before serving anything."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_") and k != "DATABASE_URL"}
    env["COURSE_DATA_DIR"] = str(tmp_path / "data")
    port = free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--host", "0.0.0.0", "--port", str(port)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "COURSE_SECRET_KEY: the development default may only serve on a loopback address" in proc.stderr
    assert not (tmp_path / "data").exists()  # refused before migrating or starting anything


def test_production_refuses_to_serve_without_a_public_url(tmp_path):
    """Links that leave the site (reset links, mails, the LTI URLs) are built from COURSE_PUBLIC_URL, never from a
    request's Host header: in production `serve` exits 2 naming it, before anything starts."""
    production = {"COURSE_ENV": "production", "COURSE_SECRET_KEY": "x" * 40}
    with pytest.raises(SettingsError, match="COURSE_PUBLIC_URL: must be set in production"):
        check_public_url(Settings.from_env(production))
    check_public_url(Settings.from_env({**production, "COURSE_PUBLIC_URL": "https://course.example.org/"}))
    check_public_url(Settings.from_env({}))  # development: the address `serve` was started on
    with pytest.raises(SettingsError, match="COURSE_PUBLIC_URL: got 'course.example.org', expected the address"):
        Settings.from_env({"COURSE_PUBLIC_URL": "course.example.org"})
    assert (
        Settings.from_env({"COURSE_PUBLIC_URL": "https://course.example.org/"}).site_url == "https://course.example.org"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_") and k != "DATABASE_URL"}
    env |= production | {"COURSE_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "COURSE_PUBLIC_URL: must be set in production" in proc.stderr
    assert not (tmp_path / "data").exists()
