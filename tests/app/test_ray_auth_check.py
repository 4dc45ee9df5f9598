"""Ray mode on a network refuses to start without Ray's token authentication. Anyone who reaches an
open Ray cluster's ports can run code on every node, and `ray start` leaves a cluster open unless
RAY_AUTH_MODE=token. `serve` bound off loopback, or a RAY_ADDRESS off loopback, is a network; a loopback-only
trial on one machine (the tests' own Ray cluster among them) needs no token. Real `python -m app` processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from app.cli.ray_auth import check_ray_auth
from app.core.config import Settings, SettingsError
from tests.conftest import ROOT

LONG_KEY = "k" * 48  # off loopback the development secret is refused first (check_bind); this test is about Ray


def _run(tmp_path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "RAY_")) and k != "DATABASE_URL"}
    env.update(COURSE_ENV="test", COURSE_DATA_DIR=str(tmp_path / "data"), COURSE_EXECUTOR="ray", **extra)
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("args", "extra", "where"),
    [
        (["dispatcher"], {"RAY_ADDRESS": "ray-head:6379"}, "RAY_ADDRESS=ray-head:6379 (not a loopback address)"),
        (["dispatcher"], {"RAY_ADDRESS": "10.0.0.5:6379", "RAY_AUTH_MODE": "disabled"}, "RAY_ADDRESS=10.0.0.5:6379"),
        (
            ["serve", "--host", "0.0.0.0", "--port", "0"],
            {"COURSE_SECRET_KEY": LONG_KEY},
            "serve --host 0.0.0.0 (not a loopback address)",
        ),
    ],
)
def test_ray_mode_on_a_network_without_token_auth_is_a_configuration_error(tmp_path, args, extra, where):
    out = _run(tmp_path, *args, **extra)
    assert out.returncode == 2, out.stderr[-3000:]
    [line] = out.stderr.strip().splitlines()
    assert line.startswith(f"configuration error: RAY_AUTH_MODE: COURSE_EXECUTOR=ray with {where}"), line
    assert "set RAY_AUTH_MODE=token and the same long random RAY_AUTH_TOKEN" in line
    assert ("got 'disabled'" in line) == ("RAY_AUTH_MODE" in extra)
    assert not (tmp_path / "data").exists()  # refused before anything was created


def _settings(address: str = "", executor: str = "ray") -> Settings:
    return Settings.from_env({"COURSE_ENV": "test", "COURSE_EXECUTOR": executor, "RAY_ADDRESS": address})


@pytest.mark.parametrize(
    ("command", "host", "address", "env", "refused"),
    [
        ("dispatcher", None, "ray-head:6379", {"RAY_AUTH_MODE": "token"}, False),
        ("serve", "0.0.0.0", "ray-head:6379", {"RAY_AUTH_MODE": "token"}, False),
        ("dispatcher", None, "127.0.0.1:6379", {}, False),
        ("dispatcher", None, "[::1]:6379", {}, False),
        ("dispatcher", None, "localhost:6379", {}, False),
        ("dispatcher", None, "auto", {}, False),
        ("serve", "127.0.0.1", "", {}, False),
        ("dispatcher", None, "ray://10.1.2.3:10001", {}, True),
        ("dispatcher", None, "[fd00::5]:6379", {}, True),
        ("serve", "::", "127.0.0.1:6379", {}, True),
        ("serve", "192.168.1.4", "", {"RAY_AUTH_MODE": "token"}, False),
        ("serve", "192.168.1.4", "", {"RAY_AUTH_MODE": "Token"}, True),  # Ray turns nothing on for this spelling
    ],
)
def test_which_addresses_need_token_auth(command, host, address, env, refused):
    settings = _settings(address)
    if refused:
        with pytest.raises(SettingsError, match="^RAY_AUTH_MODE: COURSE_EXECUTOR=ray with "):
            check_ray_auth(settings, command, host, env)
    else:
        check_ray_auth(settings, command, host, env)


def test_the_embedded_executor_and_other_commands_are_not_asked():
    check_ray_auth(_settings("10.0.0.5:6379", executor="embedded"), "serve", "0.0.0.0", {})
    check_ray_auth(_settings("10.0.0.5:6379"), "worker", None, {})
