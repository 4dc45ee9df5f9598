"""What an operator of the Ray executor sees: whose memory budget a lab runs under, and what the dispatcher's health
check says while its cycles fail. Real processes throughout: `python -m app dispatcher|dispatcher-health`, the
session's Ray cluster (tests/executors/raycluster.py) and PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.executors.ray import ALIVE_S
from app.models import ClusterNode, Job
from labs.resources import MIB
from tests.conftest import ROOT, wait_for
from tests.executors.raycluster import NODE_JOB_MEMORY_MB


def _health(tmpdir: Path) -> subprocess.CompletedProcess:
    """`python -m app dispatcher-health` as compose runs it, on the host (here: the temp dir) of one dispatcher."""
    return subprocess.run(
        [sys.executable, "-m", "app", "dispatcher-health"],
        cwd=ROOT,
        env=dict(os.environ, TMPDIR=str(tmpdir)),
        capture_output=True,
        text=True,
        timeout=60,
    )


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
    wait_for(lambda: _health(host).returncode == 0, timeout=120, interval=1)
    name = make_url(ray_settings.db_url).database
    admin = create_engine(f"{postgres_server}/postgres", isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:  # the database is gone for the dispatcher: no new connection, none kept
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"), {"n": name})
        # its loop goes on, every cycle failing, and within ALIVE_S the health check says so, and why
        out = wait_for(lambda: (h := _health(host)).returncode == 1 and h, timeout=ALIVE_S + 30, interval=1)
        assert "the dispatcher last completed a cycle" in out.stderr, out.stderr
        assert "its last error:" in out.stderr and "a cycle failed: OperationalError" in out.stderr, out.stderr
        assert dispatchers.procs[0].poll() is None
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        wait_for(lambda: _health(host).returncode == 0, timeout=60, interval=1)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        admin.dispose()
