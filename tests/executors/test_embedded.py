"""The embedded executor's limits on a real lab process: lower CPU priority than the web server (nice), its own
memory cgroup where the host allows one, the per-job memory budget enforced on the process group, and cancel of
a running job."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from app.core.models import Job, JobLoss
from app.executors.embedded import Worker
from app.executors.labproc import LAB_NICE, JobCgroup
from app.services.jobs import lifecycle as jobs
from app.services.jobs.labhost import HostCapacity
from tests.conftest import ROOT, wait_for

LOCAL = HostCapacity.local_default()


def _nice(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])  # field 19 of proc(5): nice


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cgroups_here() -> bool:
    probe = JobCgroup("course-probe", 2**30)
    ok = probe.path is not None
    probe.remove()
    return ok


@pytest.fixture
def worker_proc(settings):
    env = dict(os.environ, COURSE_ENV="test", COURSE_DATA_DIR=str(settings.data_dir), DATABASE_URL=settings.db_url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "worker", "--skip-lab-check"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=20)
    finally:
        proc.kill()


def _running_lab(db, job_id: int) -> Job:
    def placed():
        db.expire_all()
        j = db.get(Job, job_id)
        return j if j.status == "running" and j.placement and j.placement.get("pid") else None

    return wait_for(placed, timeout=60, interval=0.05)


def test_a_running_lab_is_niced_in_its_cgroup_and_cancel_stops_its_group(db, make_user, worker_proc):
    learner = make_user("ann@example.org")
    job = jobs.create_job(db, owner=learner, lab="fp8-step", params={}, backend="cpu", host=LOCAL)  # ~a minute
    running = _running_lab(db, job.id)
    pid = running.placement["pid"]
    assert _nice(pid) == LAB_NICE  # below the web server's 0: a lab never starves page loads
    assert _nice(os.getpid()) == 0
    if _cgroups_here():
        cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        assert f"course-job-{job.id}-1" in cgroup, cgroup
        assert running.placement["cgroup"].endswith(f"course-job-{job.id}-1")
    jobs.cancel(db, job=running, by=learner)

    def cancelled():
        db.expire_all()
        return db.get(Job, job.id).status == "cancelled"

    wait_for(cancelled, timeout=30)
    wait_for(lambda: not _alive(pid), timeout=10)
    done = db.get(Job, job.id)
    assert done.message == "cancelled" and done.error is None
    if running.placement["cgroup"]:
        wait_for(lambda: not Path(running.placement["cgroup"]).exists(), timeout=10)  # removed with the run


def test_a_lab_over_its_memory_budget_ends_as_out_of_memory(db, make_user, settings):
    """The catalog's estimate is checked at submit; this enforces the budget when the estimate is wrong. Here the
    submit-time check used the host's default budget and the worker enforces a smaller one, as if the estimate were
    low: the run grows past it, is stopped with its process group, and the learner reads why (their parameters,
    so it is their result: no retry, not an infrastructure failure)."""
    learner = make_user("ann@example.org")
    params = {"d_model": 1024, "n_heads": 8, "ffn": 8192, "steps": 3}
    job = jobs.create_job(db, owner=learner, lab="fp8-step", params=params, backend="cpu", host=LOCAL)
    budget = 400 * 2**20  # torch alone holds ~280 MiB; this model's weights and optimizer state need far more
    w = Worker(replace(settings, job_memory_bytes=budget), worker_id="small-budget")
    try:
        assert w.run_once()
    finally:
        w.engine.dispose()
    db.expire_all()
    done = db.get(Job, job.id)
    assert done.status == "failed" and done.message == "out of memory"
    assert "ran out of its memory budget of 400 MiB" in done.error
    assert done.attempts == 1  # not requeued
    assert not _alive(done.placement["pid"])


@pytest.mark.both_backends
def test_the_reaper_timer_requeues_without_any_worker(settings, db, make_user):
    """A worker killed with -9 leaves its job running with a lease; the server's reaper timer alone requeues it."""
    from app.executors.supervise import Reaper

    learner = make_user("ann@example.org")
    job = jobs.create_job(db, owner=learner, lab="env-check", params={}, host=LOCAL)
    jobs.claim_next(db, worker_id="gone", lease_s=1)  # a worker that never heartbeats again
    reaper = Reaper(replace(settings, lease_s=2))
    reaper.start()
    try:

        def requeued():
            db.expire_all()
            return db.get(Job, job.id).status == "queued"

        wait_for(requeued, timeout=15)
    finally:
        reaper.stop()
    assert "stopped renewing its lease" in db.get(Job, job.id).message


@pytest.mark.parametrize(
    ("code", "lost", "words"),
    [
        ("os.kill(os.getpid(), signal.SIGKILL)", True, "stopped from outside the run (SIGKILL)"),
        ("os.kill(os.getpid(), signal.SIGTERM)", True, "stopped from outside the run (SIGTERM)"),
        ("os.kill(os.getpid(), signal.SIGSEGV)", False, "crashed (SIGSEGV, signal 11)"),
        ("os.abort()", False, "crashed (SIGABRT, signal 6)"),
    ],
)
def test_a_lab_ended_by_a_signal_is_told_as_a_stop_from_outside_or_a_crash(tmp_path, code, lost, words):
    """A real process ended by each signal, none of them the course's own kill."""
    from app.executors.labproc import LabRun

    run = LabRun([sys.executable, "-c", f"import os, signal; {code}"], cwd=tmp_path)
    run.proc.wait(timeout=30)
    run.join_readers()
    outcome = run.outcome(tmp_path)
    assert not outcome.ok and outcome.lost is lost and words in outcome.error
    assert outcome.message == ("lost" if lost else "failed")


@pytest.mark.both_backends
def test_a_lab_killed_from_outside_is_requeued_uncharged_and_then_succeeds(db, make_user, settings):
    """The host's OOM killer or an operator's `kill -9` hits the lab process, not the worker: the attempt is the
    infrastructure's, so the job goes back to the queue with its reason and nothing is charged; the next attempt
    runs to the end."""
    import signal
    import threading

    learner = make_user("ann@example.org")
    job = jobs.create_job(db, owner=learner, lab="fp8-step", params={}, backend="cpu", host=LOCAL)  # ~a minute
    w = Worker(settings, worker_id="outside-kill")
    try:
        first = threading.Thread(target=w.run_once)
        first.start()
        pid = _running_lab(db, job.id).placement["pid"]
        os.kill(pid, signal.SIGKILL)
        first.join(timeout=60)
        assert not first.is_alive()
        db.expire_all()
        requeued = db.get(Job, job.id)
        assert requeued.status == "queued" and requeued.attempts == 1 and requeued.gpu_seconds == 0
        assert "stopped from outside the run (SIGKILL)" in requeued.message
        assert "not counted against you" in requeued.message
        (loss,) = db.query(JobLoss).filter(JobLoss.job_id == job.id).all()  # the cluster page's row
        assert (loss.attempt, loss.worker_id, loss.outcome) == (1, "outside-kill", "queued") and loss.node
        assert "SIGKILL" in loss.reason
        db.execute(Job.__table__.update().where(Job.id == job.id).values(params={"steps": 4}))  # a short rerun
        db.commit()
        assert w.run_once()
    finally:
        w.engine.dispose()
    db.expire_all()
    done = db.get(Job, job.id)
    assert done.status == "succeeded" and done.attempts == 2, done.error


def _rank_pids(lab_pid: int) -> list[int]:
    """The lab's rank processes: its children that multiprocessing spawned (not its resource tracker)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if ppid == lab_pid and b"spawn_main" in cmdline:
            pids.append(int(stat.parent.name))
    return pids


def test_a_rank_killed_from_outside_makes_the_whole_attempt_lost_not_failed(tmp_path):
    """`python -m labs run tp-sweep` for real; one of its two ranks gets `kill -9` from outside mid-run: the lab
    exits with labs/exits.py STOPPED and the outcome is the course's loss, naming the rank and the signal."""
    import signal

    from app.executors.labproc import LabRun, lab_command

    params = {"degrees": [2], "tokens": 2048, "hidden": 1024, "ffn": 4096, "steps": 50, "warmup": 0}
    cmd = lab_command(sys.executable, lab="tp-sweep", params=params, out=tmp_path, backend="cpu")
    run = LabRun(cmd, cwd=ROOT)
    try:
        ranks = wait_for(lambda: len(_rank_pids(run.proc.pid)) == 2 and _rank_pids(run.proc.pid), timeout=60)
        time.sleep(1)  # past the rendezvous, into the timed steps
        os.kill(ranks[-1], signal.SIGKILL)
        run.proc.wait(timeout=60)
    finally:
        if run.proc.poll() is None:
            run.kill()
    run.join_readers()
    outcome = run.outcome(tmp_path)
    assert run.proc.returncode == 3 and outcome.lost, (run.proc.returncode, list(run.stderr_tail)[-5:])
    assert "'s process was stopped from outside the run (SIGKILL), most likely because" in outcome.error


# ---------------------------------------------------------------- a stopped lab leaves no network state behind


def _may_build_namespaces() -> bool:
    from labs.collectives import topo

    t = topo.build(2, 100, 0)
    try:
        return t.ok
    finally:
        topo.teardown(t)


needs_netns = pytest.mark.skipif(
    not _may_build_namespaces(), reason="this worker may not create network namespaces (root and iproute2)"
)
# Two emulated nodes on a 10 Mbit/s link: ~200 s by its cost model, so it is mid-way whenever it is cancelled.
SLOW_COLLECTIVES = {
    "ranks": 4,
    "nodes": 2,
    "collectives": ["all-reduce"],
    "min_bytes": 256,
    "max_bytes": 1048576,
    "factor": 4,
    "iters": 20,
    "warmup": 1,
    "link_mbit": 10,
}


def _network_of(pid: int) -> dict[str, list[str]]:
    """What the host shows of lab process `pid`'s network: its namespaces (`ip netns list`), its veths in the
    host's namespace (`ip -o link`), and qdiscs on them (`tc qdisc show`)."""
    import re

    veth = re.compile(rf"\bc{pid:x}[0-9a-f]{{2}}n\d+[ab]\b")

    def out(*cmd: str) -> str:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout

    return {
        "namespaces": [n.split()[0] for n in out("ip", "netns", "list").splitlines() if n.startswith(f"lcol-{pid}-")],
        "links": veth.findall(out("ip", "-o", "link")),
        "qdiscs": veth.findall(out("tc", "qdisc", "show")),
    }


NOTHING: dict[str, list[str]] = {"namespaces": [], "links": [], "qdiscs": []}


@needs_netns
def test_cancelling_a_multi_node_collectives_run_leaves_none_of_its_network_state(db, make_user, worker_proc):
    """A cancel used to SIGKILL the lab's group: its namespaces, bridge, veths and qdiscs stayed until some later
    multi-node run swept them. Now the lab gets SIGTERM and a grace to tear them down, and the executor deletes
    by the lab's pid whatever is left."""
    from labs.collectives import topo

    learner = make_user("ann@example.org")
    job = jobs.create_job(db, owner=learner, lab="collectives", params=SLOW_COLLECTIVES, backend="cpu", host=LOCAL)
    pid = _running_lab(db, job.id).placement["pid"]

    def built() -> bool:  # the switch and two nodes, every veth moved into them: the run is mid-way
        net = _network_of(pid)
        return len(net["namespaces"]) == 3 and not net["links"]

    wait_for(built, timeout=60, interval=0.05)
    jobs.cancel(db, job=db.get(Job, job.id), by=learner)

    def cancelled():
        db.expire_all()
        return db.get(Job, job.id).status == "cancelled"

    wait_for(cancelled, timeout=60)
    wait_for(lambda: not _alive(pid), timeout=10)
    wait_for(lambda: _network_of(pid) == NOTHING, timeout=10)
    assert topo.leftovers(pid) == []


@needs_netns
def test_a_lab_that_ignores_sigterm_is_killed_and_the_executor_deletes_what_it_left(tmp_path):
    """SIGKILL cannot be caught, so what the lab set up stays: LabRun deletes it by the lab's pid."""
    from app.executors.labproc import LabRun
    from labs.collectives import topo

    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "from labs.collectives import topo\n"
        "with topo.emulated_nodes(2, 100, 0):\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(120)\n"
    )
    run = LabRun([sys.executable, "-c", code], cwd=ROOT)
    wait_for(lambda: len(topo.leftovers(run.proc.pid)) == 3, timeout=30, interval=0.05)
    started = time.monotonic()
    run.kill(grace_s=0.5)
    assert time.monotonic() - started < 10 and run.proc.returncode == -9  # the grace, then SIGKILL
    assert _network_of(run.proc.pid) == NOTHING and topo.leftovers(run.proc.pid) == []
    run.join_readers()


@needs_netns
def test_release_deletes_only_the_named_pids_namespaces_and_veths():
    """A namespace and a veth pair of a dead lab pid, and a namespace of another: only the first pid's go."""
    from labs.collectives import topo

    dead, other = 3_999_990, 3_999_991  # above any pid this machine hands out before pid_max wraps
    made = [f"lcol-{dead}-0-sw", f"lcol-{other}-0-sw"]
    for ns in made:
        subprocess.run(["ip", "netns", "add", ns], check=True, timeout=20)
    a, b = f"c{dead:x}00n0a", f"c{dead:x}00n0b"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True, timeout=20)
    try:
        assert topo.leftovers(dead) == sorted([a, b, made[0]])
        assert sorted(topo.release(dead)) == sorted([a, b, made[0]])
        assert topo.leftovers(dead) == [] and _network_of(dead) == NOTHING
        assert topo.leftovers(other) == [made[1]]
    finally:
        subprocess.run(["ip", "link", "del", a], capture_output=True, timeout=20)
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
