"""When a test run ends, nothing it started is still running; a run that leaves something fails and names it.

The run's first pytest process (the xdist controller, or the only process) puts a marker of its own in the
environment, COURSE_TEST_RUN=<uuid>, before any worker starts. Every process the run starts inherits it (the
workers, PostgreSQL, Chromium, `python -m app serve` and its workers, labs, a Ray head and node with every agent
and worker they start) and keeps it in /proc/PID/environ whatever title it gives itself later (Ray's agents
rename themselves, so their command lines cannot be matched). After the workers have exited, the controller
looks for processes that carry the marker, gives them GRACE_S to finish exiting, then fails the run with each
one's pid and command line, and kills them so the next run starts on a clean machine.

Fixtures use the same mechanism for what they start: `pids_with_env(NAME, value)` finds every process started
with NAME=value in its environment (tests/executors/raycluster.py stops its cluster so).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

MARK = "COURSE_TEST_RUN"
GRACE_S = 10.0  # a process told to stop at the last teardown may still be writing its logs and closing sockets
_LEFT = pytest.StashKey[dict]()


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def command_line(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        return cmd or f"[{Path(f'/proc/{pid}/comm').read_text().strip()}]"
    except OSError:
        return "?"


def pids_with_env(name: str, value: str) -> list[int]:
    """Live processes other than this one started with `name=value` in their environment."""
    entry = f"{name}={value}".encode()
    found = []
    for d in os.scandir("/proc"):
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{d.name}/environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if entry in environ.split(b"\0") and alive(int(d.name)):
            found.append(int(d.name))
    return found


def kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def ends_with_this_process(pid: int) -> bool:
    """multiprocessing's resource tracker that this process started (torch and multiprocessing start one on first
    use): it reads a pipe only this process holds open, so it exits when this process does."""
    return parent(pid) == os.getpid() and "multiprocessing.resource_tracker" in command_line(pid)


def still_running(run_id: str, grace_s: float = GRACE_S) -> dict[int, str]:
    """pid -> command line of the run's processes still alive after up to `grace_s` seconds."""
    deadline = time.monotonic() + grace_s

    def left() -> list[int]:
        return [pid for pid in pids_with_env(MARK, run_id) if not ends_with_this_process(pid)]

    while (pids := left()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return {pid: command_line(pid) for pid in pids}


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller: a marker of this run's own, even inside another run
        os.environ[MARK] = uuid.uuid4().hex


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_sessionfinish(session: pytest.Session):
    """Innermost wrapper: xdist has shut its workers down (and every session fixture is torn down) by the time
    this resumes, and the terminal's summary, which prints the list, comes after it."""
    result = yield
    if not hasattr(session.config, "workerinput") and (left := still_running(os.environ[MARK])):
        session.config.stash[_LEFT] = left
        kill(list(left))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    return result


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    left = config.stash.get(_LEFT, {})
    if left:
        terminalreporter.write_sep("=", f"{len(left)} processes the tests started were still running", red=True)
        for pid, cmd in sorted(left.items()):
            terminalreporter.write_line(f"pid {pid}: {cmd[:300]}")
        terminalreporter.write_line(
            f"(waited {GRACE_S:g} s after the last teardown, then killed them: fix the fixture)"
        )
