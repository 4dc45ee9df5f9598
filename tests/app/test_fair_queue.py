"""The fair queue (app/services/jobs/queue.py) on SQLite and PostgreSQL: fair share by each learner's decayed usage, FIFO
within a learner, the same order for the embedded worker's claim with one worker or several; position and ETA from
that order and from recent run times."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.core.models import Job, JobLoss, utcnow
from app.services.jobs import lifecycle as jobs
from app.services.jobs import limits, queue
from app.services.jobs.labhost import HostCapacity

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
    a, b, c = learners
    _history(db, c, [20.0, 20.0, 20.0])  # another learner's runs: A's own would put B first in the fair order
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


# -- fair share: one worker and several


def _api_submit(c, lab="env-check"):
    r = c.post("/api/v1/jobs", json={"lab": lab}, headers={"X-CSRF-Token": c.api_token()})
    assert r.status_code == 201, r.text
    return r.json()


def _drain(db, workers: int, *, rounds: int) -> list[int]:
    """Job ids in the order they start, `workers` at a time: each round every worker claims in fair order, then all
    finish (jobs.claim_next and jobs.finish: what each embedded worker runs)."""
    started = []
    for _ in range(rounds):
        claimed = [jobs.claim_next(db, worker_id=f"w{i}", lease_s=30) for i in range(workers)]
        for i, job in enumerate(claimed):
            if job is not None:
                started.append(job.id)
                assert jobs.finish(db, job_id=job.id, worker_id=f"w{i}", ok=True)
    return started


def test_one_worker_starts_bs_job_second_as_the_card_said(make_client, learners, worker, db):
    """With one worker, A submits six env-check jobs and B one right after. B's card says one job is
    ahead, and B's job is the second to start (real runs through the embedded worker)."""
    a, b, _ = learners
    ca, cb = make_client(), make_client()
    assert ca.login(a.email).status_code == 303 and cb.login(b.email).status_code == 303
    a_ids = [_api_submit(ca)["id"] for _ in range(6)]
    b1 = _api_submit(cb)
    assert b1["queue_position"] == 1
    assert worker.run_once()  # A's first job, run for real
    assert db.get(Job, a_ids[0]).status == "succeeded"
    r = cb.get(f"/api/v1/jobs/{b1['id']}").json()
    assert r["status"] == "queued" and r["queue_position"] == 0
    assert worker.run_once()
    db.expire_all()
    assert db.get(Job, b1["id"]).status == "succeeded"
    assert [db.get(Job, i).status for i in a_ids[1:]] == ["queued"] * 5


def test_one_worker_b_goes_second_and_a_keeps_its_own_order(db, learners):
    a, b, _ = learners
    a_jobs = _submit(db, a, 6)
    (b1,) = _submit(db, b)
    assert queue.position(db, job=b1) == 1
    assert _drain(db, 1, rounds=7) == [a_jobs[0].id, b1.id] + [j.id for j in a_jobs[1:]]


def test_several_workers_start_everyones_first_job_before_a_seconds(db, learners, make_user):
    a, b, c = learners
    a_jobs = _submit(db, a, 6)
    (b1,) = _submit(db, b)
    (c1,) = _submit(db, c)
    assert set(_drain(db, 3, rounds=1)) == {a_jobs[0].id, b1.id, c1.id}
    assert _drain(db, 3, rounds=1) == [j.id for j in a_jobs[1:4]]  # only A is left: FIFO
    (d1,) = _submit(db, make_user("d@example.org"))  # D arrives while A still has two queued
    assert _drain(db, 3, rounds=1)[0] == d1.id


def test_a_learner_with_a_job_running_goes_behind_one_who_has_waited(db, learners):
    """Two workers: A's first job has only just started (no seconds of usage yet), and still B, who submitted after
    A's second, starts before it."""
    a, b, _ = learners
    a1, a2 = _submit(db, a, 2)
    (b1,) = _submit(db, b)
    assert jobs.claim_next(db, worker_id="w1", lease_s=30).id == a1.id
    assert jobs.claim_next(db, worker_id="w2", lease_s=30).id == b1.id
    assert queue.fair_order(db) == [a2.id]


def test_fifo_within_a_learner_whatever_the_lab(db, learners):
    a, b, _ = learners
    mixed = [jobs.create_job(db, owner=a, lab=lab, params={}, host=LOCAL) for lab in ("fp8-step", "env-check")]
    mixed += _submit(db, a, 2)
    _submit(db, b, 3)
    started = _drain(db, 2, rounds=7)
    mine = [i for i in started if i in {j.id for j in mixed}]
    assert mine == [j.id for j in mixed]


# -- usage: what it counts, and its decay


def _ran(db, owner, seconds: float, ended_ago_s: float, *, gpus: int = 0, status: str = "succeeded") -> Job:
    end = utcnow() - timedelta(seconds=ended_ago_s)
    job = Job(
        owner_id=owner.id,
        lab="env-check",
        params={},
        backend="cpu",
        ranks=1,
        gpus=gpus,
        status=status,
        started_at=end - timedelta(seconds=seconds),
        finished_at=end,
    )
    db.add(job)
    db.commit()
    return job


def test_usage_halves_each_half_life_and_ends_after_the_window(db, learners):
    a, b, c = learners
    h = queue.HALF_LIFE_S
    _ran(db, a, 100, 0)
    _ran(db, b, 100, h)
    _ran(db, b, 100, 2 * h)  # b: 50 + 25
    _ran(db, c, 1000, (queue.WINDOW_HALF_LIVES + 0.5) * h)  # outside the window: not read
    for u in (a, b, c):
        _submit(db, u)  # usage is read for learners with a queued job
    got = queue.usage(db)
    assert got[a.id] == pytest.approx(100, rel=0.01)
    assert got[b.id] == pytest.approx(75, rel=0.01)
    assert got.get(c.id, 0.0) == 0.0


def test_old_usage_weighs_less(db, learners):
    """A used three times B's seconds, three hours ago; B used them ten minutes ago. B submitted first, A starts
    first. With A's usage as recent as B's, B would."""
    a, b, _ = learners
    _ran(db, a, 600, 3 * 3600)
    _ran(db, b, 200, 600)
    (b1,) = _submit(db, b)
    (a1,) = _submit(db, a)
    assert queue.fair_order(db) == [a1.id, b1.id]
    assert queue.fair_order(db, now=utcnow() - timedelta(hours=3)) == [b1.id, a1.id]  # when A's run had just ended


def test_running_jobs_count_their_elapsed_time_and_gpus_weigh_more(db, learners):
    a, b, c = learners
    (ra,) = _submit(db, a, 1)
    jobs.claim_next(db, worker_id="w", lease_s=30)
    db.refresh(ra)
    ra.started_at = utcnow() - timedelta(seconds=300)
    db.commit()
    _ran(db, b, 100, 0, gpus=1)
    _ran(db, c, 100, 0, status="cancelled")  # a run the learner stopped is still theirs
    for u in (a, b, c):
        _submit(db, u)
    got = queue.usage(db)
    assert got[a.id] == pytest.approx(300, rel=0.01)
    assert got[b.id] == pytest.approx(100 * (1 + queue.GPU_WEIGHT), rel=0.01)
    assert got[c.id] == pytest.approx(100, rel=0.01)


def test_a_run_lost_to_infrastructure_is_never_charged(db, learners):
    a, b, _ = learners
    (lost,) = _submit(db, a)
    for _ in range(lost.max_attempts):  # every attempt lost: the job fails, not charged
        claimed = jobs.claim_next(db, worker_id="w", lease_s=30)
        claimed.started_at = utcnow() - timedelta(seconds=500)
        db.commit()
        jobs.lost(db, job_id=claimed.id, worker_id="w", reason="node died")
    db.refresh(lost)
    assert lost.status == "failed" and db.query(JobLoss).filter_by(job_id=lost.id, outcome="failed").count() == 1
    (a2,) = _submit(db, a)
    (b1,) = _submit(db, b)
    assert queue.usage(db).get(a.id, 0.0) == 0.0
    assert queue.fair_order(db) == [a2.id, b1.id]  # a tie at zero: by submit time
