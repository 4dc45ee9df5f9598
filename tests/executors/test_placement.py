"""Placement on one host: a cpu job sees no GPU and gets its threads set, read from
inside a real lab run; with several embedded workers each GPU job holds GPUs of its own, claimed concurrently
through the real database by worker threads, released when the job ends and when its holder dies.

This machine has no GPU: the host's GPU count is declared (the allocator's count, as the probe would give it), and
the GPU jobs' labs then refuse for lack of CUDA, which is what a learner would see; what the test judges is what
each lab process was given."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace

import pytest

from app.core.db import make_sessionmaker
from app.core.models import Job
from app.executors.embedded import Worker
from app.executors.gpus import GpuAllocator
from app.executors.labproc import lab_threads
from app.services.jobs import lifecycle as jobs
from app.services.jobs.labhost import HostCapacity
from labs.api import Capacity
from tests.conftest import ROOT

TWO_GPUS = HostCapacity(capacity=Capacity.local(gpus=2), backends=("torch-cuda", "cpu"), source="probe")


def _table(result: dict, title: str) -> dict[str, str]:
    table = next(t for t in result["results"]["tables"] if t["title"] == title)
    return {row[0]: row[1] for row in table["rows"]}


def test_a_cpu_job_on_a_gpu_host_sees_no_gpu_and_runs_its_share_of_threads(db, make_user, settings, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # what the worker of a 2-GPU host sees
    monkeypatch.setenv("OMP_NUM_THREADS", "7")  # and a stray setting the lab must not inherit
    workers = 2
    s = replace(settings, embedded_workers=workers)
    learner = make_user("ann@example.org")
    job = jobs.create_job(db, owner=learner, lab="env-check", params={}, backend="cpu", host=TWO_GPUS)
    w = Worker(s, worker_id="w-cpu")
    try:
        assert w.run_once()
    finally:
        w.engine.dispose()
    db.expire_all()
    done = db.get(Job, job.id)
    assert done.status == "succeeded", done.error
    share = max(1, (os.cpu_count() or 1) // workers)  # env-check declares 1 CPU slot; its worker's share is more
    inside = _table(done.result, "This job's process")  # written by the lab, from its own process
    assert inside == {
        "torch CPU threads": str(share),
        "OMP_NUM_THREADS": str(share),
        "CUDA_VISIBLE_DEVICES": "empty: no GPU visible",
    }
    assert done.result["environment"]["device"]["type"] == "cpu"
    assert done.placement["cuda_visible_devices"] == "" and done.placement["threads"] == share


def test_threads_follow_the_jobs_cpu_slots():
    assert lab_threads(backend="cpu", ranks=4, cpu_slots=4) == 1  # each rank its slot
    assert lab_threads(backend="cpu", ranks=2, cpu_slots=8) == 4
    assert lab_threads(backend="cpu", ranks=4, cpu_slots=2) == 1  # never below one
    assert lab_threads(backend="torch-cuda", ranks=4, cpu_slots=6) == 6  # the references run in the lab's process


def test_gpus_are_handed_out_whole_and_come_back(tmp_path):
    a = GpuAllocator(3, lock_dir=tmp_path)
    b = GpuAllocator(3, lock_dir=tmp_path)  # another worker process on the same host
    first = a.claim(2)
    assert first is not None and first.devices == ["0", "1"]
    assert b.free() == 1 and b.claim(2) is None and b.free() == 1  # a failed claim holds nothing
    second = b.claim(1)
    assert second is not None and second.devices == ["2"]
    assert a.claim(1) is None and a.claim(4) is None
    first.release()
    assert b.free() == 2 and a.claim(2).devices == ["0", "1"]


def test_device_ids_are_the_ones_the_worker_was_given(tmp_path):
    # a container handed GPUs 2 and 3: the lab's CUDA_VISIBLE_DEVICES must name those, not 0 and 1
    held = GpuAllocator(2, lock_dir=tmp_path, visible="2,3").claim(2)
    assert held is not None and held.devices == ["2", "3"]
    with pytest.raises(ValueError, match="count"):
        GpuAllocator(-1, lock_dir=tmp_path)


def test_a_dead_holders_gpus_are_free_again(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys,time; from pathlib import Path; from app.executors.gpus import GpuAllocator; "
            "c = GpuAllocator(2, lock_dir=Path(sys.argv[1])).claim(2); print(c.devices, flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "['0', '1']"
        mine = GpuAllocator(2, lock_dir=tmp_path)
        assert mine.free() == 0 and mine.claim(1) is None
        holder.send_signal(signal.SIGKILL)  # a worker killed with -9 while its job held both GPUs
        holder.wait(timeout=10)
        assert mine.free() == 2
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.both_backends
def test_concurrent_workers_never_share_a_gpu_and_a_waiting_gpu_job_lets_cpu_jobs_by(db, make_user, settings, tmp_path):
    learner = make_user("ann@example.org")
    gpu_jobs = [
        jobs.create_job(db, owner=learner, lab="env-check", params={}, backend="torch-cuda", host=TWO_GPUS).id
        for _ in range(3)
    ]
    cpu_job = jobs.create_job(db, owner=learner, lab="env-check", params={}, backend="cpu", host=TWO_GPUS).id
    s = replace(settings, embedded_workers=3)
    workers = [Worker(s, worker_id=f"w{i}", gpus=GpuAllocator(2, lock_dir=tmp_path)) for i in range(3)]
    start = threading.Barrier(len(workers))
    got: dict[str, tuple] = {}

    def claim(w: Worker) -> None:
        with make_sessionmaker(w.engine)() as session:
            start.wait()
            got[w.worker_id] = w.claim(session)

    threads = [threading.Thread(target=claim, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    try:
        claims = [c for c in got.values() if c is not None]
        assert len(claims) == 3, got
        on_gpu = {job.id: held.devices for job, held in claims if held is not None}
        assert len(on_gpu) == 2 and sorted(sum(on_gpu.values(), [])) == ["0", "1"]  # one each, none shared
        assert [job.id for job, held in claims if held is None] == [cpu_job]  # went past the GPU job that waits
        (waiting,) = set(gpu_jobs) - set(on_gpu)
        db.expire_all()
        assert db.get(Job, waiting).status == "queued" and db.get(Job, waiting).attempts == 0  # not charged
        assert workers[0].claim(db) is None  # both GPUs held: nothing else to start

        # One GPU job runs and ends (its lab refuses: no CUDA here): its GPU goes to the job that waited.
        runner = next(w for w in workers if got[w.worker_id] and got[w.worker_id][1] is not None)
        job, held = got[runner.worker_id]
        runner.execute(job, held)
        held.release()  # as run_once does when execute returns
        db.expire_all()
        ran = db.get(Job, job.id)
        assert ran.finished and ran.placement["cuda_visible_devices"] == held.devices[0]
        nxt = workers[0].claim(db)
        assert nxt is not None and nxt[0].id == waiting and nxt[1].devices == held.devices
    finally:
        for c in got.values():
            if c is not None and c[1] is not None:
                c[1].release()
        for w in workers:
            w.engine.dispose()


def test_the_lab_reads_the_gpus_it_was_given(db, make_user, settings, tmp_path):
    """The GPU job's own process: CUDA_VISIBLE_DEVICES names its grant (read back from the refusal's run)."""
    learner = make_user("ann@example.org")
    job = jobs.create_job(db, owner=learner, lab="env-check", params={}, backend="torch-cuda", host=TWO_GPUS)
    alloc = GpuAllocator(2, lock_dir=tmp_path)
    other = alloc.claim(1)  # another job holds GPU 0
    w = Worker(replace(settings, embedded_workers=2), worker_id="w-gpu", gpus=GpuAllocator(2, lock_dir=tmp_path))
    try:
        assert w.run_once()
        db.expire_all()
        done = db.get(Job, job.id)
        assert done.placement["cuda_visible_devices"] == "1"
        assert alloc.free() == 1  # run_once gave GPU 1 back when the job ended
    finally:
        other.release()
        w.engine.dispose()


def test_the_worker_takes_the_gpu_count_the_serving_parent_probed(settings, monkeypatch):
    from app.executors.embedded import host_gpus
    from app.services.jobs import labhost

    monkeypatch.setenv(labhost.CAPACITY_ENV, TWO_GPUS.to_json())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    alloc = host_gpus(replace(settings, embedded_workers=2))
    assert alloc is not None and alloc.devices == ["4", "5"]
    assert host_gpus(replace(settings, embedded_workers=1)) is None  # one job at a time: nothing to share
    monkeypatch.setenv(labhost.CAPACITY_ENV, HostCapacity.local_default().to_json())
    assert host_gpus(replace(settings, embedded_workers=2)) is None  # a CPU host
