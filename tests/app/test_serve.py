"""`python -m app serve` and `python -m app worker`, started the way a deployment starts them.

A lab whose runner does not import stops both at start-up with the lab's name and the reason (not a 404
later); several web processes share one set of embedded lab workers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, wait_for

BROKEN_TORCH = 'raise ImportError("this torch build is broken on purpose (test)")\n'


def _env(tmp_path: Path, **extra: str) -> dict:
    env = dict(os.environ, COURSE_ENV="test", COURSE_DATA_DIR=str(tmp_path / "data"), **extra)
    env.pop("DATABASE_URL", None)
    return env


@pytest.fixture
def broken_torch(tmp_path) -> dict:
    """An environment in which `import torch` fails, as after a bad upgrade: every lab runner breaks."""
    fake = tmp_path / "site"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(BROKEN_TORCH)
    return _env(tmp_path, PYTHONPATH=f"{fake}{os.pathsep}{ROOT}")


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["worker"]])
def test_a_lab_that_does_not_import_stops_start_up_naming_it(broken_torch, command):
    out = subprocess.run(
        [sys.executable, "-m", "app", *command], cwd=ROOT, env=broken_torch, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 1
    # fp8-step's runner imports torch at module level (the others import it when they run)
    assert "lab fp8-step: its runner does not import: ImportError: this torch build is broken on purpose" in out.stderr


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the direct children of `pid`, from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append((int(entry.name), cmd))
    return out


def test_several_web_processes_share_one_set_of_lab_workers(tmp_path):
    port = free_port()
    env = _env(tmp_path, COURSE_WEB_PROCESSES="2", COURSE_WORKERS="1", COURSE_SECRET_KEY="serve-test")
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    try:

        def up() -> bool:
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=2).status == 200
            except OSError:
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()
                return False

        wait_for(up, timeout=120, interval=0.3)
        children = _children(proc.pid)
        workers = [c for c in children if "app worker" in c[1]]
        web = [c for c in children if "spawn_main" in c[1]]
        assert len(workers) == 1, children
        assert len(web) == 2, children
        for pid, _ in web:  # the web processes start no lab workers of their own
            assert not [c for c in _children(pid) if "app worker" in c[1]]
        for _ in range(4):  # requests land on either web process
            urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=5).read()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            proc.kill()
            log.close()
    text = (tmp_path / "serve.log").read_text()
    assert "2 web process(es), 1 lab worker(s)" in text and "lab workers stopped" in text
    # COURSE_ACCESS_LOG is off: no web process logs its requests (each one's logging set-up turned uvicorn's
    # access logger back on after uvicorn switched it off)
    assert "GET /login" not in text
    time.sleep(0.5)
    assert not _children(proc.pid)


def test_access_log_switch_decides_whether_uvicorn_has_a_handler_for_requests():
    """uvicorn logs requests only when its access logger has a handler (via propagation too)."""
    import logging

    from app.core import logs

    access = logging.getLogger("uvicorn.access")
    saved = access.propagate
    try:
        logs.configure("INFO", access_log=True)
        assert access.hasHandlers()
        logs.configure("INFO", access_log=False)  # a repeated call switches it too
        assert not access.hasHandlers()
    finally:
        access.propagate = saved


def _serve(tmp_path: Path, **extra: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = _env(tmp_path, COURSE_REGISTRATIONS_PER_ADDRESS="1", COURSE_WORKERS="0", **extra)
    env.pop("FORWARDED_ALLOW_IPS", None)
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    log.close()

    def up() -> bool:
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=2).status == 200
        except OSError:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            return False

    wait_for(up, timeout=120, interval=0.3)
    return proc, port


def _register_from(port: int, email: str, forwarded_for: str) -> int:
    """Register as a browser would, every request claiming to come through a proxy for `forwarded_for`."""
    import re

    import requests

    s = requests.Session()
    s.headers["X-Forwarded-For"] = forwarded_for
    page = s.get(f"http://127.0.0.1:{port}/register", timeout=10).text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    form = {"email": email, "password": "correct horse", "display_name": "Ann", "csrf_token": token}
    return s.post(f"http://127.0.0.1:{port}/register", data=form, allow_redirects=False, timeout=30).status_code


@pytest.mark.parametrize("trusted", ["", "127.0.0.1"])
def test_forwarded_headers_are_believed_only_from_the_proxies_the_operator_lists(tmp_path, trusted):
    """uvicorn believed X-Forwarded-For from 127.0.0.1 by default: behind a pass-through proxy on this host (or from
    this host itself) a client chose the address the registration throttle counts, one registration a fresh
    "address". Now nothing is believed unless COURSE_FORWARDED_ALLOW_IPS names the proxy."""
    proc, port = _serve(tmp_path, COURSE_FORWARDED_ALLOW_IPS=trusted) if trusted else _serve(tmp_path)
    try:
        assert _register_from(port, "ann@example.org", "198.51.100.1") == 303
        second = _register_from(port, "bob@example.org", "198.51.100.2")
        # untrusted: both count as 127.0.0.1, whose one registration per window is used; trusted: two addresses
        assert second == (303 if trusted else 429)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            proc.kill()
    log = (tmp_path / "serve.log").read_text()
    assert f"links that leave the site use http://127.0.0.1:{port}, where this server listens" in log


def test_the_started_address_stands_in_for_the_public_url():
    from app.cli.serve import started_url

    assert started_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert started_url("::1", 8080) == "http://[::1]:8080"
    assert started_url("0.0.0.0", 80).startswith("http://") and "0.0.0.0" not in started_url("0.0.0.0", 80)
