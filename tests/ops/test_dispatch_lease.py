"""The database side of dispatcher election: one active dispatcher through a lease row taken with a compare-and-set
UPDATE (app/services/cluster/dispatch_lease.py), on SQLite and PostgreSQL, raced by two threads on connections of their
own; what a dispatcher that takes over does with the jobs the old one had running; and /instructor/cluster naming
the active dispatcher and the standbys."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from app.core import migrate
from app.core.config import Settings
from app.core.db import make_engine, make_sessionmaker
from app.core.models import DispatcherLease, Job, JobLoss, utcnow
from app.services.cluster import dispatch_lease

A, B = "dispatcher:host-a:101:aaaa1111", "dispatcher:host-b:202:bbbb2222"


@pytest.fixture
def settings(db_url, tmp_path) -> Settings:
    return Settings.from_env(
        {"COURSE_ENV": "test", "COURSE_DATA_DIR": str(tmp_path / "data")},
        database_url=db_url,
        executor="ray",
        embedded_workers=0,
        lease_s=5,
    )


@pytest.mark.both_backends
def test_two_dispatchers_racing_for_the_lease_never_both_win(settings, db):
    """Each round the lease has expired and both threads try at the same instant on their own connection: exactly
    one wins, the loser names the winner, and a winner that replaced the other says whom it took over from."""
    engines = [make_engine(settings.db_url) for _ in (A, B)]
    barrier = threading.Barrier(2)
    t0 = utcnow()
    rounds = 12
    got: dict[tuple[int, str], dispatch_lease.Lease] = {}

    def contend(me: str, engine) -> None:
        sessions = make_sessionmaker(engine)
        for r in range(rounds):
            barrier.wait(timeout=30)
            with sessions() as s:  # 10 s apart: the previous round's 5 s lease has run out
                got[r, me] = dispatch_lease.try_acquire(s, me=me, lease_s=5, now=t0 + timedelta(seconds=10 * r))

    threads = [threading.Thread(target=contend, args=(me, e)) for me, e in zip((A, B), engines, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for e in engines:
        e.dispose()
    previous = None
    for r in range(rounds):
        a, b = got[r, A], got[r, B]
        assert a.active != b.active, f"round {r}: {a} / {b}"
        winner = A if a.active else B
        assert a.holder == b.holder == winner
        assert (a if a.active else b).took_over_from == (previous if previous not in (None, winner) else None)
        previous = winner


@pytest.mark.both_backends
def test_a_live_lease_is_kept_renewed_and_handed_on_when_released_or_expired(settings, db):
    t0 = utcnow()
    first = dispatch_lease.try_acquire(db, me=A, lease_s=5, now=t0)
    assert first.active and first.acquired_at == t0 and first.took_over_from is None
    standby = dispatch_lease.try_acquire(db, me=B, lease_s=5, now=t0 + timedelta(seconds=4))
    assert not standby.active and standby.holder == A
    renewed = dispatch_lease.try_acquire(db, me=A, lease_s=5, now=t0 + timedelta(seconds=4.5))
    assert renewed.active and renewed.acquired_at == t0 and renewed.renewed_at == t0 + timedelta(seconds=4.5)
    assert not dispatch_lease.try_acquire(db, me=B, lease_s=5, now=t0 + timedelta(seconds=9)).active
    took = dispatch_lease.try_acquire(db, me=B, lease_s=5, now=t0 + timedelta(seconds=9.6))  # A's ran out at 9.5
    assert took.active and took.took_over_from == A and took.acquired_at == t0 + timedelta(seconds=9.6)
    assert dispatch_lease.release(db, me=B) and not dispatch_lease.release(db, me=A)
    back = dispatch_lease.try_acquire(db, me=A, lease_s=5, now=utcnow())  # released: no wait for the expiry
    assert back.active and back.took_over_from is None
    assert db.get(DispatcherLease, "ray", populate_existing=True).holder == A


@pytest.mark.both_backends
def test_taking_over_gives_the_old_dispatchers_running_jobs_back_uncharged(settings, db, make_user):
    from app.executors.ray import Dispatcher

    owner = make_user("ann@example.org")
    now = utcnow()
    common = dict(owner_id=owner.id, lab="env-check", params={}, backend="cpu", status="running", started_at=now)
    retry = Job(**common, attempts=1, max_attempts=2, worker_id=A, lease_expires_at=now + timedelta(seconds=60))
    last = Job(**common, attempts=2, max_attempts=2, worker_id=A, lease_expires_at=now + timedelta(seconds=60))
    worker = Job(**common, attempts=1, max_attempts=2, worker_id="worker:web-1", lease_expires_at=now)
    db.add_all([retry, last, worker])
    db.commit()
    assert dispatch_lease.try_acquire(db, me=A, lease_s=5, now=now - timedelta(seconds=30)).active  # A, long gone
    d = Dispatcher(settings, dispatcher_id=B)
    try:
        with d.sessions() as s:
            lease = dispatch_lease.try_acquire(s, me=B, lease_s=5)
        assert lease.active and lease.took_over_from == A
        d._take_over(lease)
    finally:
        d.engine.dispose()
    db.expire_all()
    assert retry.status == "queued" and retry.worker_id is None and retry.gpu_seconds == 0
    assert "not counted against you" in retry.message and B in retry.message
    assert last.status == "failed" and "nothing is counted against you" in last.error
    assert worker.status == "running"  # not a dispatcher's: its own lease decides
    losses = db.query(JobLoss).order_by(JobLoss.job_id).all()
    assert [(x.job_id, x.worker_id) for x in losses] == [(retry.id, A), (last.id, A)]
    assert all(f"its dispatcher {A} stopped and {B} took over" == x.reason for x in losses)


def test_the_cluster_page_names_the_active_dispatcher_and_the_standbys(settings, db, make_user, client):
    make_user("prof@example.org", roles=("instructor",))
    client.login("prof@example.org")
    page = client.get("/instructor/cluster").text
    assert "No dispatcher is active" in page
    t0 = utcnow()
    dispatch_lease.try_acquire(db, me=A, lease_s=5, now=t0 - timedelta(seconds=3))
    dispatch_lease.record(db, me=A, role="active")
    dispatch_lease.try_acquire(db, me=A, lease_s=5, now=t0)
    assert not dispatch_lease.try_acquire(db, me=B, lease_s=5).active
    dispatch_lease.record(db, me=B, role="standby", error="OperationalError: the database is restarting")
    page = client.get("/instructor/cluster").text
    table = page[page.index('data-testid="dispatchers"') : page.index('data-testid="nodes"')]
    rows = table.split("<tr>")[2:]
    assert A in rows[0] and "active" in rows[0] and f"{t0 - timedelta(seconds=3):%Y-%m-%d %H:%M:%S}" in rows[0]
    assert f"{t0:%Y-%m-%d %H:%M:%S}" in rows[0]  # its last heartbeat
    assert B in rows[1] and "standing by" in rows[1] and "the database is restarting" in rows[1]
    assert "No dispatcher is active" not in page
    migrate.upgrade(settings.db_url)  # idempotent: the row 0012 inserted is there once
    assert db.query(DispatcherLease).count() == 1


def test_the_dispatcher_sends_a_run_only_to_a_node_whose_budget_holds_it(settings, db, make_user):
    """The node would refuse a run over its own budget (ray_node.budget_refusal); the dispatcher does not send it
    there, so a run no node can hold waits and, after COURSE_UNPLACEABLE_SECONDS, fails as "no node can run it"."""
    from app.core.models import ClusterNode
    from app.executors.ray import Dispatcher
    from app.services.cluster.nodes import node_from_row

    owner = make_user("ann@example.org")
    job = Job(owner_id=owner.id, lab="tp-sweep", params={"degrees": [2]}, backend="cpu", requested_backend="cpu")
    db.add(job)
    db.commit()

    def node(mb: int):
        resources = {"CPU": 8, "GPU": 0, "memory": 64 * 2**30}
        return node_from_row(ClusterNode(node_id=f"n{mb}", hostname=f"h{mb}", resources=resources,
                                         labels={"course/job_memory_mb": str(mb)}))  # fmt: skip

    d = Dispatcher(settings, dispatcher_id=A)
    try:
        unfit = d._fit(job, [node(256)])  # a two-rank sweep needs about 1 GiB
        assert unfit.backend is None and unfit.resource == "memory" and "(h256, COURSE_JOB_MEMORY_MB=256)" in unfit.why
        assert d._fit(job, [node(256), node(4096)]).backend == "cpu"
    finally:
        d.engine.dispose()


def test_the_cluster_page_shows_each_nodes_per_job_memory(db, make_user, client):
    """A node whose label disagrees with the budget it enforces is found by reading this column."""
    from app.core.models import ClusterNode

    make_user("prof@example.org", roles=("instructor",))
    client.login("prof@example.org")
    res = {"CPU": 4.0}
    db.add(
        ClusterNode(
            node_id="c" * 56, hostname="cpu-1", alive=True, resources=res, labels={"course/job_memory_mb": "3072"}
        )
    )
    db.add(ClusterNode(node_id="d" * 56, hostname="cpu-2", alive=True, resources=res, labels={}))
    db.commit()
    page = client.get("/instructor/cluster").text
    nodes = page[page.index('data-testid="nodes"') :]
    row1, row2 = nodes.split('<td data-label="Host">cpu-1')[1], nodes.split('<td data-label="Host">cpu-2')[1]
    assert '<td data-label="Per-job memory">3072 MiB</td>' in row1.split("</tr>")[0]
    assert "no label: placement assumes" in row2.split("</tr>")[0]
