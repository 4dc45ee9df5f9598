"""What an operator of the Ray executor sees: whose memory budget a lab runs under, what the dispatcher's health
check says while its cycles fail, and what the log says (and how fast the server stops) with no Ray head at
RAY_ADDRESS. Real processes throughout: `python -m app serve|dispatcher|dispatcher-health`, the session's Ray
cluster (tests/executors/raycluster.py) and PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import socketserver
import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.core.models import ClusterNode, Job
from labs.resources import MIB
from tests.conftest import ROOT, free_port, wait_for
from tests.executors.health import dispatcher_health
from tests.executors.raycluster import NODE_JOB_MEMORY_MB


@pytest.mark.ray
@pytest.mark.postgres
def test_a_lab_runs_under_the_nodes_own_memory_budget_not_the_dispatchers(dispatchers, ray_client, ray_db):
    # The dispatcher's host allows the least any host may (512 MiB); the node allows its own NODE_JOB_MEMORY_MB (as a
    # GPU host sets COURSE_JOB_MEMORY_MB for itself). A two-rank CPU sweep holds ~1 GiB (three Python processes with
    # torch), so it finishes only under the node's budget.
    dispatchers.start(COURSE_JOB_MEMORY_MB="512")
    c = ray_client
    c.register("ann@example.org")
    r = c.post(
        "/api/v1/jobs",
        json={"lab": "tp-sweep", "params": {"degrees": [2]}, "backend": "cpu"},
        headers={"X-CSRF-Token": c.api_token()},
    )
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]

    def finished():
        ray_db.expire_all()
        j = ray_db.get(Job, job_id)
        return j if j.finished else None

    try:
        job = wait_for(finished, timeout=180, interval=0.3)
    except AssertionError:
        raise AssertionError(f"job {job_id} did not finish:\n{dispatchers.logs()}") from None
    assert job.status == "succeeded", f"{job.message}: {job.error}\n{dispatchers.logs()}"
    assert job.placement["memory_limit_bytes"] == NODE_JOB_MEMORY_MB * MIB  # recorded where the job ran
    # and the node says so to the cluster, for the dispatcher's Ray memory requests and the instructor's page
    node = next(n for n in ray_db.query(ClusterNode).filter(ClusterNode.alive.is_(True)) if n.resources.get("GPU"))
    assert node.labels["course/job_memory_mb"] == str(NODE_JOB_MEMORY_MB)


@pytest.mark.ray
@pytest.mark.postgres
def test_a_dispatcher_whose_database_goes_away_fails_its_health_check_until_it_is_back(
    dispatchers, ray_settings, postgres_server, tmp_path
):
    host = tmp_path / "dispatcher-host"  # the dispatcher's /tmp, as in its own container
    host.mkdir()
    dispatchers.start(TMPDIR=str(host))
    wait_for(lambda: dispatcher_health(host).returncode == 0, timeout=120, interval=1)
    name = make_url(ray_settings.db_url).database
    admin = create_engine(f"{postgres_server}/postgres", isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:  # the database is gone for the dispatcher: no new connection, none kept
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"), {"n": name})
        # its loop goes on, every cycle failing, and within COURSE_DISPATCHER_ALIVE_SECONDS the health check says so,
        # and why (8 s here, not the default 30: the setting is the same code path)
        alive_s = 8
        out = wait_for(
            lambda: (h := dispatcher_health(host, alive_s)).returncode == 1 and h, timeout=alive_s + 30, interval=1
        )
        assert "the dispatcher last completed a cycle" in out.stderr, out.stderr
        assert "its last error:" in out.stderr and "a cycle failed: OperationalError" in out.stderr, out.stderr
        assert dispatchers.procs[0].poll() is None
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        wait_for(lambda: dispatcher_health(host).returncode == 0, timeout=60, interval=1)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        admin.dispose()


@pytest.fixture
def redis_like():
    """A server that is no Ray head: it answers every connection with a Redis error line and hangs up (6379 was
    Ray's default head port, and Redis's)."""

    class Reply(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.sendall(b"-ERR unknown command\r\n")

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Reply) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"127.0.0.1:{server.server_address[1]}"
        server.shutdown()


@pytest.mark.parametrize("head", ["nothing", "not ray"])
def test_with_no_ray_head_the_log_names_ray_address_and_the_server_stops_at_once(tmp_path, head, request):
    if head == "nothing":
        dead = f"127.0.0.1:{free_port()}"  # nothing listens there
        why = f"nothing answers at {dead} (Connection refused)"
    else:  # ray.init would wait in C++ for minutes here as against nothing
        dead = request.getfixturevalue("redis_like")
        why = f"something answers at {dead} but it is no Ray head (not gRPC: its reply began b'-ERR unkn')"
    env = dict(
        os.environ,
        COURSE_ENV="test",
        COURSE_DATA_DIR=str(tmp_path / "data"),
        COURSE_EXECUTOR="ray",
        RAY_ADDRESS=dead,
        TMPDIR=str(tmp_path),  # this test's own dispatcher health files
    )
    env.pop("DATABASE_URL", None)
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(free_port())],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,  # its own process group, so Ctrl+C can be sent to it as a terminal does
        )
    try:
        wanted = (
            f"the dispatcher cannot reach the Ray cluster at RAY_ADDRESS={dead}: {why}. Start the head there first (`ray start --head --port={dead.rsplit(':')[1]} "
            "--num-cpus=0 --num-gpus=0`, docs/deploying.md: Bare metal with Ray) or set RAY_ADDRESS to the head's host:port"
        )
        wait_for(lambda: wanted in log_path.read_text(), timeout=120, interval=0.2)
        assert log_path.read_text().count("cannot reach the Ray cluster") == 1  # once, not per retry
        health = dispatcher_health(tmp_path)
        assert health.returncode == 1 and f"RAY_ADDRESS={dead}" in health.stderr
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl+C: the server and the dispatcher it started
        proc.wait(timeout=60)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log_path.read_text()
    assert took < 5, f"the server took {took:.1f} s to stop\n{text[-3000:]}"
    assert "stopped before it connected to Ray" in text
    assert "Failed to connect to GCS" not in text  # Ray was never asked while nothing listened
