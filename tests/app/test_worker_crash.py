"""A worker killed mid-job never leaves the job running: another worker picks it up after the lease."""

import os
import signal
import subprocess
import sys

from app.models import Job
from app.services import jobs
from tests.conftest import ROOT, wait_for


def _worker_proc(settings, worker_env):
    return subprocess.Popen(
        [sys.executable, "-m", "app", "worker"],
        cwd=ROOT,
        env=worker_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_killed_worker_job_is_retried_by_another(settings, db, make_user):
    learner = make_user("ann@example.org")
    # tp-sweep would be slower; the fp8-step lab at small size is long enough to kill mid-run when
    # present, and env-check (a torch import and a matmul, ~2 s) otherwise.
    job = jobs.create_job(db, owner=learner, lab="env-check", params={}, max_attempts=2)
    env = dict(
        os.environ,
        COURSE_ENV="test",
        COURSE_DATA_DIR=str(settings.data_dir),
        DATABASE_URL=settings.db_url,
        COURSE_LEASE_SECONDS="2",
    )
    first = _worker_proc(settings, env)
    try:

        def running():
            db.expire_all()
            return db.get(Job, job.id).status == "running"

        wait_for(running, timeout=30, interval=0.02)
        first.send_signal(signal.SIGKILL)  # no cleanup, no release: the lease must do the work
        first.wait()
    finally:
        first.kill()
    db.expire_all()
    assert db.get(Job, job.id).status == "running"  # stranded, until its lease runs out

    second = _worker_proc(settings, env)
    try:

        def finished():
            db.expire_all()
            j = db.get(Job, job.id)
            return j if j.finished else None

        done = wait_for(finished, timeout=60)
    finally:
        second.terminate()
        second.wait(timeout=10)
    assert done.status == "succeeded", done.error
    assert done.attempts == 2


def test_worker_shutdown_hands_the_job_back(settings, db, make_user):
    learner = make_user("ann@example.org")
    job = jobs.create_job(db, owner=learner, lab="env-check", params={})
    env = dict(os.environ, COURSE_ENV="test", COURSE_DATA_DIR=str(settings.data_dir), DATABASE_URL=settings.db_url)
    proc = _worker_proc(settings, env)

    def running():
        db.expire_all()
        return db.get(Job, job.id).status == "running"

    wait_for(running, timeout=30, interval=0.02)
    proc.terminate()
    proc.wait(timeout=20)
    db.expire_all()
    j = db.get(Job, job.id)
    assert j.status in ("queued", "succeeded")  # handed back, or it finished first
    if j.status == "queued":
        assert j.attempts == 0 and "shut down" in j.message
