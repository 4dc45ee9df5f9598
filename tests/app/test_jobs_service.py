"""Claiming, heartbeats and lease expiry against real databases (no worker process here)."""

from datetime import timedelta

import pytest

from app.core.models import utcnow
from app.services.jobs import lifecycle as jobs
from app.services.jobs.labhost import HostCapacity

pytestmark = pytest.mark.both_backends  # claiming, leasing and requeueing jobs lock rows

LOCAL = HostCapacity.local_default()  # what create_app uses without a probe: CPU only


@pytest.fixture
def learner(make_user):
    return make_user("ann@example.org")


def test_create_validates_params(db, learner):
    job = jobs.create_job(db, owner=learner, lab="env-check", params={}, host=LOCAL)
    assert job.status == "queued" and job.params == {}
    with pytest.raises(jobs.JobInputError) as exc:
        jobs.create_job(db, owner=learner, lab="env-check", params={"bogus": 1}, host=LOCAL)
    assert exc.value.errors == [{"field": "bogus", "message": "unknown parameter 'bogus'"}]
    with pytest.raises(jobs.JobInputError, match="unknown lab 'nope'"):
        jobs.create_job(db, owner=learner, lab="nope", params={}, host=LOCAL)
    with pytest.raises(jobs.JobInputError, match="backend: got 'tpu'"):
        jobs.create_job(db, owner=learner, lab="env-check", params={}, backend="tpu", host=LOCAL)


def test_a_job_is_claimed_once(db, learner):
    job = jobs.create_job(db, owner=learner, lab="env-check", params={}, host=LOCAL)
    first = jobs.claim_next(db, worker_id="w1", lease_s=30)
    second = jobs.claim_next(db, worker_id="w2", lease_s=30)
    assert first.id == job.id and first.worker_id == "w1" and first.attempts == 1
    assert second is None


def test_an_attempt_lost_to_infrastructure_is_given_back_uncounted_then_fails_with_the_reason(db, learner):
    job = jobs.create_job(db, owner=learner, lab="env-check", params={}, host=LOCAL)
    assert jobs.claim_next(db, worker_id="w1", lease_s=30).attempts == 1
    assert jobs.lost(db, job_id=job.id, worker_id="w1", reason="the node was lost") == "queued"
    db.refresh(job)
    assert job.status == "queued" and job.worker_id is None and job.attempts == 1
    assert job.message == "requeued: the node was lost (attempt 1 of 2; not counted against you)"
    assert jobs.lost(db, job_id=job.id, worker_id="w1", reason="again") is None  # no longer that worker's
    assert jobs.claim_next(db, worker_id="w2", lease_s=30).attempts == 2
    assert jobs.lost(db, job_id=job.id, worker_id="w2", reason="the node was lost") == "failed"
    db.refresh(job)
    assert job.status == "failed" and "nothing is counted against you" in job.error


def test_each_lost_attempt_is_recorded_with_where_it_ran_and_what_followed(db, learner):
    """The cluster page's history: jobs.lost and the lease reaper each write one row per attempt they take back,
    a refused `lost` (not that worker's job any more) writes none, and the counts say where work was lost."""
    from app.core.models import JobLoss

    job = jobs.create_job(db, owner=learner, lab="env-check", params={}, max_attempts=3, host=LOCAL)
    jobs.claim_next(db, worker_id="w1", lease_s=30)
    jobs.record_placement(db, job_id=job.id, worker_id="w1", node="gpu-a", placement={})
    assert jobs.lost(db, job_id=job.id, worker_id="w1", reason="the node or its Ray worker was lost") == "queued"
    assert jobs.lost(db, job_id=job.id, worker_id="w1", reason="again") is None
    jobs.claim_next(db, worker_id="w2", lease_s=1)
    assert jobs.reap_expired(db, now=utcnow() + timedelta(seconds=120)) == [job.id]
    jobs.claim_next(db, worker_id="w3", lease_s=30)
    jobs.record_placement(db, job_id=job.id, worker_id="w3", node="gpu-a", placement={})
    assert jobs.lost(db, job_id=job.id, worker_id="w3", reason="the node or its Ray worker was lost") == "failed"
    rows = db.query(JobLoss).order_by(JobLoss.id).all()
    got = [(r.job_id, r.attempt, r.worker_id, r.node, r.outcome) for r in rows]
    # the second claim cleared the node: the reaper's row names the worker that stopped renewing
    assert got == [
        (job.id, 1, "w1", "gpu-a", "queued"),
        (job.id, 2, "w2", None, "queued"),
        (job.id, 3, "w3", "gpu-a", "failed"),
    ]
    assert "w2 stopped renewing its lease" in rows[1].reason
    newest, where = jobs.recent_losses(db, since=utcnow() - timedelta(days=1), limit=2)
    assert [r.attempt for r in newest] == [3, 2] and where == [("gpu-a", 2), ("w2", 1)]
    assert jobs.recent_losses(db, since=utcnow() + timedelta(seconds=200)) == ([], [])  # the reaper ran "at" +120 s


def test_heartbeat_renews_and_detects_lost_lease(db, learner):
    jobs.create_job(db, owner=learner, lab="env-check", params={}, host=LOCAL)
    job = jobs.claim_next(db, worker_id="w1", lease_s=30)
    assert jobs.heartbeat(db, job_id=job.id, worker_id="w1", lease_s=30, progress=jobs.Progress(0.5, "half"))
    db.refresh(job)
    assert job.progress == 0.5 and job.message == "half"
    assert not jobs.heartbeat(db, job_id=job.id, worker_id="intruder", lease_s=30, progress=None)


def test_expired_lease_requeues_then_fails(db, learner):
    jobs.create_job(db, owner=learner, lab="env-check", params={}, max_attempts=2, host=LOCAL)
    later = lambda: utcnow() + timedelta(seconds=120)  # noqa: E731
    job = jobs.claim_next(db, worker_id="w1", lease_s=1)
    assert jobs.reap_expired(db, now=later()) == [job.id]
    db.refresh(job)
    assert job.status == "queued" and "w1 stopped renewing" in job.message
    job = jobs.claim_next(db, worker_id="w2", lease_s=1)
    assert job.attempts == 2
    assert jobs.reap_expired(db, now=later()) == [job.id]
    db.refresh(job)
    assert job.status == "failed" and "No attempts are left" in job.error
    # The old worker's late result is refused: the job is no longer its own.
    assert not jobs.finish(db, job_id=job.id, worker_id="w2", ok=True, result={})


def test_live_lease_is_not_reaped(db, learner):
    jobs.create_job(db, owner=learner, lab="env-check", params={}, host=LOCAL)
    jobs.claim_next(db, worker_id="w1", lease_s=60)
    assert jobs.reap_expired(db) == []
