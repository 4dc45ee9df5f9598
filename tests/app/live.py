"""A real course server for HTTP-level tests whose failure only shows on a real socket: `python -m app serve`
on a free loopback port, against the test's database, without lab workers unless asked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT, free_port

LIVE_SECRET = "live-test-secret"


@dataclass
class Live:
    base: str
    port: int
    proc: subprocess.Popen
    log: Path

    def rss_bytes(self) -> int:
        """Resident memory of the serving process (with one web process, uvicorn runs in it)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS line")


@contextmanager
def course_server(tmp_path: Path, db_url: str, **env: str) -> Iterator[Live]:
    port = free_port()
    full_env = {
        **os.environ,
        "COURSE_ENV": "test",
        "COURSE_DATA_DIR": str(tmp_path / "data"),
        "COURSE_SECRET_KEY": LIVE_SECRET,
        "COURSE_WORKERS": "0",
        "COURSE_LOG_LEVEL": "WARNING",
        "DATABASE_URL": db_url,
        **env,  # a test's own values win
    }
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                urllib.request.urlopen(base + "/login", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        yield Live(base, port, proc, log)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
