"""Supervision, with real processes: `kill -9` of only the worker, and of only the server.

- Only the worker: the server restarts it, the lab died with it, and the job's lease is reaped by the server's
  own timer, so the job runs again (attempt 2) instead of staying "running" with an expired lease.
- Only the server: its lab worker and web processes do not outlive it (they asked Linux for a signal when it
  goes); the worker hands its running job back to the queue without spending an attempt.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

from app.core import migrate
from app.core.models import Job, User
from app.services.accounts import users
from app.services.jobs import lifecycle as jobs
from app.services.jobs.labhost import HostCapacity
from tests.app.test_serve import _children
from tests.conftest import ROOT, free_port, wait_for


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def served(tmp_path):
    """`python -m app serve` on SQLite with one lab worker and a 3 s lease; yields (proc, db session, port)."""
    data = tmp_path / "data"
    data.mkdir()
    url = f"sqlite:///{data / 'course.db'}"
    migrate.upgrade(url)
    port = free_port()
    env = dict(os.environ, COURSE_ENV="test", COURSE_DATA_DIR=str(data), COURSE_SECRET_KEY="supervision-test")
    env.update(COURSE_WORKERS="1", COURSE_LEASE_SECONDS="3", COURSE_WEB_PROCESSES="2")
    env.pop("DATABASE_URL", None)
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    engine = create_engine(url)
    db = sessionmaker(engine)()

    def up() -> bool:
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=2).status == 200
        except OSError:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            return False

    try:
        wait_for(up, timeout=120, interval=0.3)
        yield proc, db
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            finally:
                proc.kill()
        log.close()
        db.close()
        engine.dispose()


def _long_job(db) -> Job:
    learner = users.create_user(db, email="ann@example.org", password="correct horse", display_name="Ann")
    # fp8-step's default run takes far longer than these tests wait for
    return jobs.create_job(
        db, owner=learner, lab="fp8-step", params={}, backend="cpu", host=HostCapacity.local_default()
    )


def _running(db, job_id: int, attempt: int) -> Job:
    def check():
        db.expire_all()
        j = db.get(Job, job_id)
        ok = j.status == "running" and j.attempts == attempt and j.placement and j.placement.get("pid")
        return j if ok else None

    return wait_for(check, timeout=90, interval=0.1)


def _workers(pid: int) -> list[int]:
    return [p for p, cmd in _children(pid) if "app worker" in cmd]


def test_kill_9_of_only_the_worker(served):
    proc, db = served
    job = _long_job(db)
    first_lab = _running(db, job.id, attempt=1).placement["pid"]
    (worker,) = _workers(proc.pid)
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: not _alive(first_lab), timeout=10)  # the lab died with its worker
    second = _running(db, job.id, attempt=2)  # reaped by the server's timer, run by the restarted worker
    assert second.placement["pid"] != first_lab
    (new_worker,) = _workers(proc.pid)
    assert new_worker != worker
    jobs.cancel(db, job=second, by=db.get(User, second.owner_id))  # so the server stops quickly


def test_kill_9_of_only_the_server(served):
    proc, db = served
    job = _long_job(db)
    running = _running(db, job.id, attempt=1)
    found = _children(proc.pid)
    assert len(_workers(proc.pid)) == 1 and len([c for c in found if "spawn_main" in c[1]]) == 2, found
    children = [p for p, _ in found]  # the lab worker, two web processes, multiprocessing's helper
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for pid in [*children, running.placement["pid"]]:
        wait_for(lambda pid=pid: not _alive(pid), timeout=30)

    def handed_back():
        db.expire_all()
        j = db.get(Job, job.id)
        return j if j.status == "queued" else None

    back = wait_for(handed_back, timeout=10)
    assert back.attempts == 0 and "worker shut down" in back.message
