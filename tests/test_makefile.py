"""`make run` serves where it is told: PORT and HOST, with the README's defaults."""

import subprocess

from tests.conftest import ROOT


def _run_line(*args: str) -> str:
    out = subprocess.run(["make", "-n", "run", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return next(line for line in out.stdout.splitlines() if "-m app serve" in line)


def test_make_run_defaults_to_localhost_8000():
    assert _run_line().endswith("-m app serve --host 127.0.0.1 --port 8000")


def test_make_run_takes_port_and_host():
    assert _run_line("PORT=8123").endswith("--host 127.0.0.1 --port 8123")
    assert _run_line("PORT=8123", "HOST=0.0.0.0").endswith("--host 0.0.0.0 --port 8123")
