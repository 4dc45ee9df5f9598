"""A worker killed mid-job never leaves the job running: another worker picks it up after the lease."""

import os
import signal
import subprocess
import sys

import pytest

from app.core.models import Job
from app.services.jobs import lifecycle as jobs
from app.services.jobs.labhost import HostCapacity
from tests.conftest import ROOT, wait_for

pytestmark = pytest.mark.both_backends  # a dead worker's lease expires and its job is requeued in SQL

LOCAL = HostCapacity.local_default()  # what create_app uses without a probe: CPU only


def _worker_proc(settings, worker_env):
    return subprocess.Popen(
        # the lab check has its own test (tests/app/test_serve.py); skipping it here keeps these tests quick
        [sys.executable, "-m", "app", "worker", "--skip-lab-check"],
        cwd=ROOT,
        env=worker_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_killed_worker_job_is_retried_by_another(settings, db, make_user):
    learner = make_user("ann@example.org")
    # tp-sweep would be slower; the fp8-step lab at small size is long enough to kill mid-run when
    # present, and env-check (a torch import and a matmul, ~2 s) otherwise.
    job = jobs.create_job(db, owner=learner, lab="env-check", params={}, max_attempts=2, host=LOCAL)
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
    """SIGTERM while a lab is mid-run: the job goes back to the queue without spending an attempt.

    The run is made long on purpose (fp8-step's default 200 steps take far longer than the half second
    the worker needs to notice the signal), and the signal is sent only once the lab has reported that
    it started, so the job cannot have finished first.
    """
    learner = make_user("ann@example.org")
    job = jobs.create_job(db, owner=learner, lab="fp8-step", params={}, backend="cpu", host=LOCAL)
    env = dict(os.environ, COURSE_ENV="test", COURSE_DATA_DIR=str(settings.data_dir), DATABASE_URL=settings.db_url)
    proc = _worker_proc(settings, env)
    try:

        def lab_started():
            db.expire_all()
            j = db.get(Job, job.id)
            return j.status == "running" and j.message != "starting"  # the lab reported its start or progress

        wait_for(lab_started, timeout=60, interval=0.05)
        proc.terminate()
        proc.wait(timeout=20)
    finally:
        proc.kill()
    db.expire_all()
    j = db.get(Job, job.id)
    assert (j.status, j.attempts, j.worker_id) == ("queued", 0, None)
    assert "worker shut down" in j.message
