"""A frozen dispatcher (SIGSTOP: a stall or a paused VM) on the session's real Ray cluster and PostgreSQL: the standby
takes over, and no job ever has two attempts running at once (app/executors/ray_fence.py). Two jobs of the frozen
dispatcher run on the node: one whose task stops its own lab when it sees the new lease, one whose Ray worker is
frozen too, so the new dispatcher's probe must stop it. The labs are watched as processes on the node, every 0.1 s,
from before the freeze until both second attempts run. `dispatcher-health` names the new holder, and not the
frozen one as active."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from app.core.models import DispatcherLease, Job, JobLoss, utcnow
from tests.conftest import wait_for
from tests.executors.conftest import lab_alive
from tests.executors.health import dispatcher_health
from tests.executors.raycluster import pids_with

pytestmark = [pytest.mark.ray, pytest.mark.postgres]

LONG = {"steps": 2000}  # far longer than the test runs: each attempt ends only when it is stopped
LEASE_S = 2


def _holder(db) -> str | None:
    db.expire_all()
    row = db.get(DispatcherLease, "ray")
    return row.holder if row and row.expires_at and row.expires_at > utcnow() else None


def _labs_running(job_ids: set[int]) -> dict[int, set[int]]:
    """{job id: the attempts whose `python -m labs run` is alive on the node now}."""
    out: dict[int, set[int]] = {j: set() for j in job_ids}
    for pid in pids_with("labs run", "-attempt-"):
        if not lab_alive(pid):
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        m = re.search(r"job-(\d+)-attempt-(\d+)", cmd)
        if m and int(m[1]) in out:
            out[int(m[1])].add(int(m[2]))
    return out


class Watcher(threading.Thread):
    """Polls the node's lab processes; keeps when each attempt was first and last seen, and any moment two attempts
    of one job were alive together."""

    def __init__(self, job_ids: set[int]):
        super().__init__(daemon=True)
        self.job_ids, self.stop = job_ids, threading.Event()
        self.first: dict[tuple[int, int], float] = {}
        self.last: dict[tuple[int, int], float] = {}
        self.overlaps: list[tuple[float, int, set[int]]] = []

    def run(self) -> None:
        while not self.stop.is_set():
            now = time.monotonic()
            for job_id, attempts in _labs_running(self.job_ids).items():
                for a in attempts:
                    self.first.setdefault((job_id, a), now)
                    self.last[(job_id, a)] = now
                if len(attempts) > 1:
                    self.overlaps.append((now, job_id, attempts))
            self.stop.wait(0.1)


def _api(c, **body):
    return c.post("/api/v1/jobs", json={"lab": "fp8-step", **body}, headers={"X-CSRF-Token": c.api_token()})


def _running(db, job_id: int, attempt: int) -> Job | None:
    db.expire_all()
    j = db.get(Job, job_id)
    return j if j.attempts == attempt and j.status == "running" and (j.placement or {}).get("lab_pid") else None


def test_a_frozen_dispatchers_jobs_never_run_twice_at_once(dispatchers, ray_client, ray_db, tmp_path):
    host = tmp_path / "host"  # both dispatchers on one host: one health check sees them both
    host.mkdir()
    env = {"COURSE_DISPATCHER_LEASE_SECONDS": str(LEASE_S), "TMPDIR": str(host)}
    a = dispatchers.start(**env)
    old = wait_for(lambda: (h := _holder(ray_db)) and f":{a.pid}:" in h and h, timeout=120, interval=0.2)
    b = dispatchers.start(**env)
    wait_for(lambda: f"is standing by: dispatcher {old} is active" in dispatchers.logs(None), timeout=120)
    c = ray_client
    c.register("ann@example.org")
    quick, stuck = (_api(c, params=LONG, backend="cpu").json()["id"] for _ in range(2))
    wait_for(lambda: _running(ray_db, quick, 1), timeout=120, interval=0.2)
    worker = wait_for(lambda: _running(ray_db, stuck, 1), timeout=120, interval=0.2).placement["worker_pid"]
    watcher = Watcher({quick, stuck})
    watcher.start()
    try:
        os.kill(worker, signal.SIGSTOP)  # this attempt's task can no longer stop its own lab
        a.send_signal(signal.SIGSTOP)
        frozen = time.monotonic()
        new = wait_for(lambda: (h := _holder(ray_db)) not in (None, old) and h, timeout=30, interval=0.1)
        took = time.monotonic() - frozen
        assert f":{b.pid}:" in new and took < LEASE_S + 3, (new, took)

        def health():
            out = dispatcher_health(host)
            return out if f"the lease is held by {new}" in out.stdout else None

        out = wait_for(health, timeout=30, interval=0.5)
        assert f"dispatcher pid {b.pid}: active since" in out.stdout, out.stdout
        assert f"(pid {a.pid}), longer than its {LEASE_S} s lease: it is no longer active" in out.stderr, out.stderr
        assert f"dispatcher pid {a.pid}: active" not in out.stdout and out.returncode == 1

        for job_id in (quick, stuck):
            wait_for(lambda j=job_id: _running(ray_db, j, 2), timeout=90, interval=0.2)
        wait_for(lambda: (quick, 2) in watcher.first and (stuck, 2) in watcher.first, timeout=30, interval=0.1)
    finally:
        watcher.stop.set()
        watcher.join()
        for pid in (a.pid, worker):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    assert not watcher.overlaps, f"two attempts alive at once: {watcher.overlaps[:3]}\n{dispatchers.logs()}"
    for job_id in (quick, stuck):
        assert watcher.last[(job_id, 1)] < watcher.first[(job_id, 2)]
    stopped = {j: watcher.last[(j, 1)] - frozen for j in (quick, stuck)}
    print(
        f"standby took over {took:.1f} s after the SIGSTOP (lease {LEASE_S} s); attempt 1 stopped "
        f"{stopped[quick]:.1f} s after it by itself and {stopped[stuck]:.1f} s after it by the probe"
    )
    logs = dispatchers.logs(None)
    assert f"job {stuck}: attempt 1" in logs and "may still run on node" in logs
    assert f"job {stuck}: attempt 1 is over (a probe on its node stopped what was left of it)" in logs
    # the frozen dispatcher, running again, stands by and leaves the new attempts alone
    wait_for(lambda: f"dispatcher {old} lost its lease to {new}" in dispatchers.logs(None), timeout=30)
    time.sleep(1.0)
    assert _labs_running({quick, stuck}) == {quick: {2}, stuck: {2}}
    losses = {loss.job_id: loss for loss in ray_db.query(JobLoss).filter(JobLoss.attempt == 1)}
    assert set(losses) == {quick, stuck} and all(loss.outcome == "queued" for loss in losses.values())
    for job_id in (quick, stuck):
        r = c.delete(f"/api/v1/jobs/{job_id}", headers={"X-CSRF-Token": c.api_token()})
        assert r.status_code == 200, r.text
    wait_for(lambda: not any(_labs_running({quick, stuck}).values()), timeout=60, interval=0.3)


def test_with_no_standby_a_frozen_dispatchers_lab_stops_by_itself_within_two_leases(dispatchers, ray_client, ray_db):
    """The task's own check: its dispatcher's lease beat stops changing, and within twice the lease (plus one read of
    it) the lab stops, given back as the course's loss; the dispatcher, running again, starts attempt 2 only then."""
    from app.executors.ray_fence import POLL_S, STALE_LEASES

    a = dispatchers.start(COURSE_DISPATCHER_LEASE_SECONDS=str(LEASE_S))
    wait_for(lambda: (h := _holder(ray_db)) and f":{a.pid}:" in h, timeout=120, interval=0.2)
    c = ray_client
    c.register("ann@example.org")
    job_id = _api(c, params=LONG, backend="cpu").json()["id"]
    wait_for(lambda: _running(ray_db, job_id, 1), timeout=120, interval=0.2)
    watcher = Watcher({job_id})
    watcher.start()
    try:
        a.send_signal(signal.SIGSTOP)
        frozen = time.monotonic()
        bound = STALE_LEASES * LEASE_S + POLL_S
        wait_for(lambda: not _labs_running({job_id})[job_id], timeout=bound + 30, interval=0.1)
        stopped = time.monotonic() - frozen
        a.send_signal(signal.SIGCONT)
        wait_for(lambda: (job_id, 2) in watcher.first, timeout=90, interval=0.1)
    finally:
        watcher.stop.set()
        watcher.join()
        a.send_signal(signal.SIGCONT)
    print(
        f"a frozen dispatcher's lab stopped by itself {stopped:.1f} s after the SIGSTOP (bound {bound:.0f} s + slack)"
    )
    assert stopped < bound + 3, stopped  # its last renewal came up to a cycle before the freeze; the rest is polling
    assert not watcher.overlaps and watcher.last[(job_id, 1)] < watcher.first[(job_id, 2)]
    loss = ray_db.query(JobLoss).filter(JobLoss.job_id == job_id, JobLoss.attempt == 1).one()
    assert loss.outcome == "queued", loss.reason
    r = c.delete(f"/api/v1/jobs/{job_id}", headers={"X-CSRF-Token": c.api_token()})
    assert r.status_code == 200, r.text
    wait_for(lambda: not _labs_running({job_id})[job_id], timeout=60, interval=0.3)
