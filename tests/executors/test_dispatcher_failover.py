"""Dispatcher failover against the session's real Ray cluster (tests/executors/raycluster.py) and PostgreSQL:
two `python -m app dispatcher` processes elect one, the standby says so and takes over within seconds of the
active one's SIGKILL, giving back its running job uncharged; and `ray-node-health` judges this node by its node id
in the cluster's view, on a host where the head's raylet runs too. (In tests/executors, not tests/ops, to share
the session's cluster: another would cost ~15 s of CPU.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from app.core.models import DispatcherLease, Job, JobLoss, utcnow
from app.services.accounts import users
from tests.conftest import ROOT, free_port, wait_for
from tests.executors.raycluster import RAY, pids_with
from tests.leftovers import kill


def _holder(ray_db) -> str | None:
    ray_db.expire_all()
    row = ray_db.get(DispatcherLease, "ray")
    return row.holder if row and row.expires_at and row.expires_at > utcnow() else None


@pytest.mark.ray
@pytest.mark.postgres
def test_a_standby_dispatcher_takes_over_within_seconds_and_gives_back_the_dead_ones_job(dispatchers, ray_db, tmp_path):
    lease_s = 2
    a_host, b_host = tmp_path / "host-a", tmp_path / "host-b"
    a_host.mkdir()
    b_host.mkdir()
    a = dispatchers.start(COURSE_DISPATCHER_LEASE_SECONDS=str(lease_s), TMPDIR=str(a_host))
    active = wait_for(lambda: _holder(ray_db), timeout=120, interval=0.2)
    assert f":{a.pid}:" in active
    # a job the active dispatcher holds, on its last attempt: taken over, it fails as infrastructure (not charged)
    # rather than running a lab here
    owner = users.create_user(ray_db, email="ann@example.org", password="correct horse", display_name="Ann")
    job = Job(
        owner_id=owner.id, lab="env-check", params={}, backend="cpu", status="running", attempts=2, max_attempts=2,
        worker_id=active, started_at=utcnow(), lease_expires_at=utcnow() + timedelta(seconds=60),
    )  # fmt: skip
    ray_db.add(job)
    ray_db.commit()
    b = dispatchers.start(COURSE_DISPATCHER_LEASE_SECONDS=str(lease_s), TMPDIR=str(b_host))
    standing = f"is standing by: dispatcher {active} is active"
    wait_for(lambda: standing in dispatchers.logs(None), timeout=120, interval=0.2)
    health = subprocess.run(
        [sys.executable, "-m", "app", "dispatcher-health"],
        cwd=ROOT,
        env=dict(os.environ, TMPDIR=str(b_host)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert health.returncode == 0 and f"dispatcher pid {b.pid}: standing by; active: {active}" in health.stdout

    a.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    new = wait_for(lambda: (h := _holder(ray_db)) not in (None, active) and h, timeout=30, interval=0.1)
    took = time.monotonic() - killed
    assert f":{b.pid}:" in new
    assert took < lease_s + 3, f"the standby took {took:.1f} s to take over"
    job_id = job.id

    def given_back():
        ray_db.expire_all()
        j = ray_db.get(Job, job_id)
        return j if j.status != "running" else None

    job = wait_for(given_back, timeout=10, interval=0.1)  # in the cycle that took the lease
    assert job.status == "failed" and "nothing is counted against you" in job.error and job.gpu_seconds == 0
    loss = ray_db.query(JobLoss).filter(JobLoss.job_id == job.id).one()
    assert loss.reason == f"its dispatcher {active} stopped and {new} took over"
    assert f"dispatcher {new} is the active dispatcher (took over from {active})" in dispatchers.logs(None)
    print(f"standby took over {took:.1f} s after the active dispatcher's SIGKILL (lease {lease_s} s)")


def _node_health(cluster, data_dir) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*cluster.enter, sys.executable, "-m", "app", "ray-node-health"],
        cwd=ROOT,
        env=dict(cluster.env, COURSE_NODE_DATA_DIR=str(data_dir), RAY_ADDRESS=cluster.address),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.ray
def test_ray_node_health_fails_when_this_nodes_raylet_is_dead_though_the_heads_runs(ray_cluster, dispatchers, tmp_path):
    """A second, small node joins the session's cluster on the same host as the head (and the GPU node); its
    health check follows its own raylet and node id: ALIVE, then failing at once after its raylet's SIGKILL, and
    the cluster's view of that node id turns DEAD (what the check reads while a raylet process remains but the GCS
    no longer hears from it: waiting for that with a SIGSTOPped raylet takes Ray's 3 x 10 s health-check timeout).
    The dispatcher's log says in one line that the raylet is terminated, without the raylet's state dump."""
    dispatchers.start()
    data = tmp_path / "small-node"
    lo = ray_cluster.worker_ports + 112
    out = subprocess.run(
        [
            *ray_cluster.enter, RAY, "start", f"--address={ray_cluster.address}", "--node-ip-address=127.0.0.1",
            "--num-cpus=0", "--num-gpus=0", "--disable-usage-stats", "--object-store-memory=80000000",
            f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
            f"--metrics-export-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}", f"--runtime-env-agent-port={free_port()}",
            f"--min-worker-port={lo}", f"--max-worker-port={lo + 6}",
        ],
        env=dict(ray_cluster.env, COURSE_NODE_DATA_DIR=str(data)),
        capture_output=True,
        text=True,
        timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    from app.executors.ray_node import this_nodes_raylets

    mine, heads = this_nodes_raylets({"COURSE_NODE_DATA_DIR": str(data)})
    try:
        assert len(mine) == 1 and heads and not any(h.lab_labels for h in heads), (mine, heads)
        # the session's GPU node, started with `ray-node-flags`, carries the course's labels; the small one none
        assert any(r.lab_labels for r in this_nodes_raylets({})[0]) and not mine[0].lab_labels
        raylet = mine[0]
        healthy = _node_health(ray_cluster, data)
        assert healthy.returncode == 0, healthy.stderr
        assert f"node {raylet.node_id} (raylet pid {raylet.pid}) is ALIVE" in healthy.stdout
        kill([raylet.pid])  # as an operator's host loss looks: SIGKILL of the node's raylet, the head's still running
        gone = _node_health(ray_cluster, data)
        assert gone.returncode == 1
        assert "no raylet of this lab node runs here" in gone.stderr and "the head's raylet" in gone.stderr
        # and the cluster's view of the node id, which the check reads while a raylet process remains (a hung one)
        ask = f"from app.executors.ray_node import node_state; print(node_state({raylet.gcs_address!r}, {raylet.node_id!r}))"

        def state() -> str:
            out = subprocess.run([*ray_cluster.enter, sys.executable, "-c", ask], cwd=ROOT, env=ray_cluster.env,
                                 capture_output=True, text=True, timeout=60)  # fmt: skip
            return out.stdout.strip()

        wait_for(lambda: state() == "DEAD", timeout=30, interval=0.5)
        said = wait_for(lambda: "Raylet is terminated" in (t := dispatchers.logs(None)) and t, timeout=30, interval=0.2)
        assert "Ray (raylet): Raylet is terminated. Termination is unexpected." in said, said[-3000:]
        assert "[state-dump]" not in said, said[-3000:]
        # every line is the dispatcher's own (Ray's C++ lines start "[20..", and none of them is the dump either)
        assert all(line.startswith(("20", "[20")) for line in said.splitlines() if line), said[-3000:]
    finally:  # the node's raylet and its agents, which carry its node id on their command lines
        for r in mine:
            kill(pids_with(r.node_id))
