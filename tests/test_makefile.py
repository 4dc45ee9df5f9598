"""`make run` serves where it is told: PORT and HOST, with the README's defaults; `make test-quick` leaves out
what it says it does."""

import re
import subprocess
import tomllib

from tests.conftest import ROOT


def _run_line(*args: str) -> str:
    out = subprocess.run(["make", "-n", "run", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return next(line for line in out.stdout.splitlines() if "-m app serve" in line)


def test_make_run_defaults_to_localhost_8000():
    assert _run_line().endswith("-m app serve --host 127.0.0.1 --port 8000")


def test_make_run_takes_port_and_host():
    assert _run_line("PORT=8123").endswith("--host 127.0.0.1 --port 8123")
    assert _run_line("PORT=8123", "HOST=0.0.0.0").endswith("--host 0.0.0.0 --port 8123")


def test_the_quick_loop_leaves_out_every_server_and_the_slow_tests():
    """`make test-quick` (docs/testing.md) deselects exactly the markers of what the suite starts, each one a marker
    pyproject.toml registers: a renamed marker would otherwise select everything again, silently."""
    out = subprocess.run(["make", "-n", "test-quick"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    expression = re.search(r'-m "([^"]+)"', out).group(1)
    deselected = re.findall(r"not (\w+)", expression)
    assert sorted(deselected) == ["browser", "postgres", "ray", "slow"]
    registered = {
        m.split(":")[0]
        for m in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    }
    assert set(deselected) <= registered
