"""The fair queue (app/services/queue.py) on SQLite and PostgreSQL: round-robin across learners, FIFO within a
learner, the same order for the embedded worker's claim; position and ETA from recent run times."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.core.models import Job, utcnow
from app.services import jobs, limits, queue
from app.services.labhost import HostCapacity

pytestmark = pytest.mark.both_backends  # the queue's order and limits are SQL aggregates over jobs

LOCAL = HostCapacity.local_default()


@pytest.fixture
def learners(db, make_user):
    prof = make_user("prof@example.org", roles=("instructor",))
    # this class lets a learner queue many jobs: the fair order, not a limit, is what is under test here
    limits.set_limits(db, by=prof, user_id=None, values=dict.fromkeys(limits.FIELDS))
    return make_user("a@example.org"), make_user("b@example.org"), make_user("c@example.org")


def _submit(db, owner, n=1, lab="env-check"):
    return [jobs.create_job(db, owner=owner, lab=lab, params={}, host=LOCAL) for _ in range(n)]


def test_a_learners_tenth_job_waits_behind_everyones_first(db, learners):
    a, b, c = learners
    a_jobs = _submit(db, a, 10)
    (b1,) = _submit(db, b)
    (c1,) = _submit(db, c)
    order = queue.fair_order(db, limit=20)
    assert order[:3] == [a_jobs[0].id, b1.id, c1.id]  # one turn each
    assert order[3:] == [j.id for j in a_jobs[1:]]  # then A's, in the order A submitted them


def test_the_embedded_worker_claims_in_fair_order(db, learners):
    """Learner A submits 20 jobs, then B one: B's starts before A's third (here: second, since A's running first
    job counts as A's first turn)."""
    a, b, _ = learners
    a_jobs = _submit(db, a, 20)
    (b1,) = _submit(db, b)
    started = []
    for _ in range(4):
        job = jobs.claim_next(db, worker_id="w", lease_s=30)
        started.append(job.id)
    assert started.index(b1.id) < started.index(a_jobs[2].id)
    assert started == [a_jobs[0].id, b1.id, a_jobs[1].id, a_jobs[2].id]


def test_a_requeued_job_keeps_its_learners_turn(db, learners):
    a, b, _ = learners
    a1, a2 = _submit(db, a, 2)
    (b1,) = _submit(db, b)
    claimed = jobs.claim_next(db, worker_id="w", lease_s=1)
    assert claimed.id == a1.id
    jobs.reap_expired(db, now=utcnow() + timedelta(seconds=60))  # its worker vanished
    assert queue.fair_order(db)[:2] == [a1.id, b1.id]


def test_position_counts_the_jobs_that_start_first(db, learners):
    a, b, _ = learners
    a_jobs = _submit(db, a, 3)
    (b1,) = _submit(db, b)
    assert queue.position(db, job=a_jobs[0]) == 0
    assert queue.position(db, job=b1) == 1
    assert queue.position(db, job=a_jobs[2]) == 3
    running = jobs.claim_next(db, worker_id="w", lease_s=30)
    assert queue.position(db, job=running) is None
    db.refresh(b1)
    assert queue.position(db, job=b1) == 0  # A's running job is A's turn; B is next


def _history(db, owner, seconds: list[float], lab="env-check"):
    now = utcnow()
    for i, s in enumerate(seconds):
        db.add(
            Job(
                owner_id=owner.id,
                lab=lab,
                params={},
                backend="cpu",
                ranks=1,
                status="succeeded",
                started_at=now - timedelta(hours=1, seconds=s - i),
                finished_at=now - timedelta(hours=1, seconds=-i),
            )
        )
    db.commit()


def test_eta_comes_from_recent_runs_of_that_lab_and_size(db, learners):
    a, b, _ = learners
    _history(db, a, [10.0, 20.0, 30.0])  # median 20 s
    first, second = _submit(db, b, 2)
    est = queue.estimate(db, job=first, slots=1)
    assert est.position == 0 and est.start_in_s == 0 and est.done_in_s == pytest.approx(20.0, abs=0.5)
    assert "last 3 runs of env-check of a similar size on cpu" in est.basis
    est2 = queue.estimate(db, job=second, slots=1)
    assert est2.position == 1 and est2.start_in_s == pytest.approx(20.0, abs=0.5)
    assert est2.done_in_s == pytest.approx(40.0, abs=0.5)
    two_slots = queue.estimate(db, job=second, slots=2)
    assert two_slots.start_in_s == pytest.approx(0.0, abs=0.5)  # a second slot is free: it starts beside the first


def test_a_running_job_ahead_counts_what_is_left_of_it(db, learners):
    a, b, _ = learners
    _history(db, a, [20.0, 20.0, 20.0])
    (running,) = _submit(db, a)
    (queued,) = _submit(db, b)
    jobs.claim_next(db, worker_id="w", lease_s=30)
    db.refresh(running)
    running.started_at = utcnow() - timedelta(seconds=15)
    db.commit()
    est = queue.estimate(db, job=queued, slots=1)
    assert est.start_in_s == pytest.approx(5.0, abs=1.0) and est.done_in_s == pytest.approx(25.0, abs=1.0)


def test_runs_of_another_size_scale_the_cost_model(db, learners):
    """Learned per lab and size: a run twice the cost model's size is estimated at twice what the small ones took,
    scaled by how far those were from their own model estimates."""
    a, b, _ = learners
    small = {"steps": 20, "outlier_step": None}
    model_small = queue.model_seconds("fp8-step", small, "cpu")
    for i in range(3):
        db.add(
            Job(
                owner_id=a.id,
                lab="fp8-step",
                params=small,
                backend="cpu",
                status="succeeded",
                started_at=utcnow() - timedelta(hours=1, seconds=2 * model_small - i),
                finished_at=utcnow() - timedelta(hours=1, seconds=-i),
            )
        )
    db.commit()
    big = {"steps": 1000}
    est = queue.run_estimate(db, lab="fp8-step", params=big, backend="cpu")
    assert est is not None and "of other sizes" in est.basis
    assert est.seconds == pytest.approx(2 * queue.model_seconds("fp8-step", big, "cpu"), rel=0.05)


def test_no_history_says_the_cost_model_answers(db, learners):
    (job,) = _submit(db, learners[0])
    est = queue.estimate(db, job=job, slots=1)
    assert est.position == 0 and est.known and "no run of it has finished here yet" in est.basis
    assert est.done_in_s == pytest.approx(queue.model_seconds("env-check", {}, "cpu"))


def test_replace_queued_cancels_the_old_queued_run_only(db, learners):
    a = learners[0]
    old_running, old_queued = _submit(db, a, 2)
    jobs.claim_next(db, worker_id="w", lease_s=30)
    new = jobs.create_job(db, owner=a, lab="env-check", params={}, host=LOCAL, replace_queued=True)
    db.refresh(old_running)
    db.refresh(old_queued)
    assert old_running.status == "running"
    assert old_queued.status == "cancelled" and "replaced" in old_queued.message
    assert new.status == "queued"
