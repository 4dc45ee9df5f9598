"""Dispatcher health without a Ray cluster: `dispatcher-health` reads only the dispatchers running now,
never a previous process's last error; the dispatcher's "cannot reach the Ray cluster" names the token when Ray
refused it (with the exceptions Ray 2.60 raises, as seen against a head started with RAY_AUTH_MODE=token); the
worker and the dispatcher honour COURSE_LOG_FORMAT=json; and a node's refusal of a run its budget cannot hold is
the course's loss, not the learner's. Real processes (`python -m app ...`) throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from app.executors import ray_health
from app.executors.ray_health import TOKEN_FIX, cannot_reach, token_problem
from app.executors.ray_node import budget_refusal
from tests.conftest import ROOT, free_port
from tests.executors.health import dispatcher_health


@pytest.fixture
def fake_dispatcher():
    """A process whose command line reads as `... app dispatcher` (what the health check recognises), and nothing
    else: the files it leaves are the test's to write."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "-m", "app", "dispatcher"])
    yield proc
    proc.kill()
    proc.wait()


def test_dispatcher_health_reads_the_running_dispatcher_never_a_previous_ones_error(tmp_path, fake_dispatcher):
    gone = subprocess.Popen([sys.executable, "-c", "pass", "app", "dispatcher"])
    gone.wait()  # a dispatcher that failed and exited: its files stay behind
    (tmp_path / f"course-dispatcher.{gone.pid}.failing").write_text("03:00:00 UTC: a cycle failed: OperationalError\n")
    (tmp_path / f"course-dispatcher.{gone.pid}.alive").write_text("active\n")
    out = dispatcher_health(tmp_path)
    assert out.returncode == 1 and "no dispatcher runs on this host" in out.stderr, out.stderr
    assert "OperationalError" not in out.stderr
    assert not list(tmp_path.glob(f"course-dispatcher.{gone.pid}.*"))  # removed, never read again

    pid = fake_dispatcher.pid
    (tmp_path / f"course-dispatcher.{pid}.started").write_text("04:00:00 UTC\n")  # as Health.starting leaves it
    out = dispatcher_health(
        tmp_path
    )  # its replacement has not completed a cycle yet, and says nothing of the old error
    assert out.returncode == 1 and f"has not completed a cycle yet (pid {pid})" in out.stderr, out.stderr
    assert "OperationalError" not in out.stderr
    (tmp_path / f"course-dispatcher.{pid}.alive").write_text("standing by; active: dispatcher:h:1:abcd\n")
    out = dispatcher_health(tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"dispatcher pid {pid}: standing by; active: dispatcher:h:1:abcd" in out.stdout
    old = time.time() - ray_health.ALIVE_S - 5
    os.utime(tmp_path / f"course-dispatcher.{pid}.alive", (old, old))
    (tmp_path / f"course-dispatcher.{pid}.failing").write_text("04:00:00 UTC: a cycle failed: TimeoutError\n")
    out = dispatcher_health(tmp_path)
    assert out.returncode == 1 and "last completed a cycle 3" in out.stderr and "TimeoutError" in out.stderr


# The exceptions Ray 2.60's ray.init and GcsClient raised against a head started with RAY_AUTH_MODE=token (run once
# by hand: `ray start --head` with RAY_AUTH_MODE=token RAY_AUTH_TOKEN=..., then ray.init / GcsClient from a process
# with a wrong token, no token, and no RAY_AUTH_MODE), word for word.
WRONG_TOKEN = "RPC error: InvalidAuthToken: Authentication token is missing or incorrect"
NO_TOKEN = "Token authentication is enabled but no authentication token was found"


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "b" * 32}, "refused the token in RAY_AUTH_TOKEN: it is wrong"),
        ({}, "requires token authentication and RAY_AUTH_MODE is unset here"),
        ({"RAY_AUTH_MODE": "Token", "RAY_AUTH_TOKEN": "x"}, "RAY_AUTH_MODE is 'Token' here"),
    ],
)
def test_a_token_the_head_refused_is_named_as_such(env, said):
    from ray.exceptions import AuthenticationError

    why = token_problem(AuthenticationError(WRONG_TOKEN), env)
    assert why is not None and said in why
    message = cannot_reach("10.0.0.5:6379", why, TOKEN_FIX)
    assert message.startswith(f"the dispatcher cannot reach the Ray cluster at RAY_ADDRESS=10.0.0.5:6379: {why}.")
    assert "Set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN" in message and "Start the head" not in message


def test_a_missing_token_is_named_and_other_errors_are_not_taken_for_a_token(monkeypatch, tmp_path):
    from ray.exceptions import AuthenticationError

    monkeypatch.setattr(ray_health, "DEFAULT_TOKEN", tmp_path / "no-such-token")
    why = token_problem(AuthenticationError(NO_TOKEN), {"RAY_AUTH_MODE": "token"})
    assert why == "RAY_AUTH_MODE=token is set here but no token is: RAY_AUTH_TOKEN is missing"
    # what ray.init raised for the wrong token, after ~20 s: nothing in it says "token", so it stays as Ray said it
    assert token_problem(ConnectionError("Failed to connect to Ray cluster at 127.0.0.1:35415"), {}) is None


def test_token_mode_without_a_token_is_named_before_ray_could_abort_the_process(tmp_path):
    """Ray 2.60's C++ client aborts the process (a failed check, no exception) at its first call in token mode with
    no token; the dispatcher and ray-node-health ask Ray's token loader first."""
    env = dict(os.environ, RAY_AUTH_MODE="token", HOME=str(tmp_path))
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)
    code = "from app.executors.ray_health import token_refused; print(token_refused('127.0.0.1:1'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "RAY_AUTH_MODE=token is set here but no token is: RAY_AUTH_TOKEN is missing"


def _first_log_line(cmd: list[str], env: dict, wanted: str) -> dict:
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stderr is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if wanted in line:
                return json.loads(line)  # the line is one JSON object, not text
        raise AssertionError(f"no log line with {wanted!r}:\n{''.join(lines)}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_worker_and_the_dispatcher_log_json_when_asked(tmp_path):
    env = dict(os.environ, COURSE_ENV="test", COURSE_DATA_DIR=str(tmp_path / "data"), COURSE_LOG_FORMAT="json")
    env.pop("DATABASE_URL", None)
    subprocess.run([sys.executable, "-m", "app", "migrate"], cwd=ROOT, env=env, check=True, capture_output=True)
    worker = _first_log_line(
        [sys.executable, "-m", "app", "worker", "--skip-lab-check"], dict(env, COURSE_WORKERS="1"), "worker"
    )
    assert worker["level"] == "INFO" and worker["logger"].startswith("app.") and worker["pid"] > 0
    dead = f"127.0.0.1:{free_port()}"
    dispatcher = _first_log_line(
        [sys.executable, "-m", "app", "dispatcher"],
        dict(env, COURSE_EXECUTOR="ray", RAY_ADDRESS=dead, TMPDIR=str(tmp_path)),
        "cannot reach the Ray cluster",
    )
    assert dispatcher["level"] == "ERROR" and f"RAY_ADDRESS={dead}" in dispatcher["message"]


def test_a_run_over_the_nodes_budget_is_the_courses_loss_not_the_learners():
    spec = {"lab": "tp-sweep", "params": {"degrees": [2]}, "backend": "cpu"}
    refused = budget_refusal(spec, 64 * 2**20)
    assert refused is not None and refused.lost  # requeued by the dispatcher (jobs.lost), never charged
    assert "allows 64.0 MiB per job" in refused.error and "should have seen" in refused.error
    assert budget_refusal(spec, 64 * 2**30) is None
    # parameters the lab refuses itself (naming the field) are not the node's to judge
    assert budget_refusal({**spec, "params": {"degrees": "two"}}, 64 * 2**20) is None


def test_an_active_dispatcher_that_stopped_cycling_is_not_listed_as_active(tmp_path, fake_dispatcher):
    """A frozen active dispatcher's file still says "active since ..."; past the lease it wrote beside its role, the
    check says it is no longer active and names the holder a standby on this host saw last."""
    frozen, standby = fake_dispatcher.pid, subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                                                            "-m", "app", "dispatcher"])  # fmt: skip
    try:
        (tmp_path / f"course-dispatcher.{frozen}.alive").write_text(
            "active since 2026-12-04 04:15:42 UTC\ndispatcher:h:1:aaaa\n10.0\n"
        )
        (tmp_path / f"course-dispatcher.{standby.pid}.alive").write_text(
            "standing by; active: dispatcher:h:1:aaaa\n\n10.0\n"
        )
        out = dispatcher_health(tmp_path)
        assert out.returncode == 0, out.stderr
        assert f"dispatcher pid {frozen}: active since 2026-12-04 04:15:42 UTC" in out.stdout
        assert f"the lease is held by dispatcher:h:1:aaaa (pid {frozen} here, " in out.stdout
        then = time.time() - 20  # two leases without a cycle; the standby took over and says so
        os.utime(tmp_path / f"course-dispatcher.{frozen}.alive", (then, then))
        (tmp_path / f"course-dispatcher.{standby.pid}.alive").write_text(
            "active since 2026-12-04 04:20:00 UTC\ndispatcher:h:2:bbbb\n10.0\n"
        )
        out = dispatcher_health(tmp_path)
        assert out.returncode == 1
        assert "the dispatcher last completed a cycle 2" in out.stderr
        assert f"(pid {frozen}), longer than its 10 s lease: it is no longer active" in out.stderr
        assert f"dispatcher pid {frozen}:" not in out.stdout
        assert f"the lease is held by dispatcher:h:2:bbbb (pid {standby.pid} here, " in out.stdout
    finally:
        standby.kill()
        standby.wait()
