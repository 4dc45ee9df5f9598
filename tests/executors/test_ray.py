"""The Ray executor end to end, nothing mocked: jobs submitted through the web app (PostgreSQL), claimed in fair
order by `python -m app dispatcher`, run as Ray tasks on a second node (its own data dir, four logical GPUs),
stored back through Ray's object store, shown on the learner's page. Placement, faults, cancel, time limit.

On the logical GPUs: this machine has no CUDA device, so a GPU-backend job is placed by Ray (the task records the
GPUs Ray granted in CUDA_VISIBLE_DEVICES, with timestamps) and then the lab itself refuses for lack of CUDA: the
learner sees that refusal as the result. Placement is judged from what Ray granted, which is what it would grant
on a real GPU host; the numbers of a GPU run are never faked.
"""

from __future__ import annotations

import html
import os
import re
import signal
import subprocess
import time

import pytest

from app.core.models import ClusterNode, Job
from tests.conftest import wait_for
from tests.executors.conftest import lab_alive, lab_processes
from tests.executors.raycluster import pids_with

pytestmark = [pytest.mark.ray, pytest.mark.postgres]


SLOW_ENOUGH = {"steps": 1000, "batch": 2, "seq": 8, "d_model": 16, "n_heads": 2, "ffn": 32, "n_layers": 1}


def _api(c, lab: str, **body):
    return c.post("/api/v1/jobs", json={"lab": lab, **body}, headers={"X-CSRF-Token": c.api_token()})


def _finished(db, job_ids, timeout=180, dispatchers=None):
    def check():
        db.expire_all()
        got = [db.get(Job, i) for i in job_ids]
        return got if all(j.finished for j in got) else None

    try:
        return wait_for(check, timeout=timeout, interval=0.3)
    except AssertionError:
        db.expire_all()
        states = [(i, db.get(Job, i).status, db.get(Job, i).message) for i in job_ids]
        raise AssertionError(f"jobs not finished: {states}\n{dispatchers.logs() if dispatchers else ''}") from None


def _lab_started(db, job_id, attempt=1, timeout=120):
    def check():
        db.expire_all()
        j = db.get(Job, job_id)
        return j if j.attempts == attempt and (j.placement or {}).get("lab_pid") else None

    return wait_for(check, timeout=timeout, interval=0.1)


def _nodes_online(db, gpus: int, timeout=60):
    def check():
        db.expire_all()
        rows = db.query(ClusterNode).filter(ClusterNode.alive.is_(True)).all()
        return sum(int(r.resources.get("GPU", 0)) for r in rows) == gpus

    wait_for(check, timeout=timeout, interval=0.3)


def _listening_pids(enter: list[str]) -> dict[int, list[str]]:
    """pid -> the TCP addresses it listens on, in the network namespace `enter` runs in ([]: the host's)."""
    out = subprocess.run([*enter, "ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    pids: dict[int, list[str]] = {}
    for line in out.splitlines():
        for pid in re.findall(r"pid=(\d+)", line):
            pids.setdefault(int(pid), []).append(line.split()[3].replace("[::ffff:", "").replace("]", ""))
    return pids


def test_the_cluster_listens_on_a_loopback_no_one_else_can_reach(ray_cluster):
    ours = set(pids_with(str(ray_cluster.base)))  # the GCS, raylets, agents and workers carry the temp dir
    assert ours
    inside = _listening_pids(ray_cluster.enter)
    assert f"127.0.0.1:{ray_cluster.port}" in sum(inside.values(), [])  # the GCS, on the namespace's loopback
    on_host = {pid: addrs for pid, addrs in _listening_pids([]).items() if pid in ours}
    assert on_host == {}, f"Ray processes listening on the host's network: {on_host}"


def test_a_job_runs_on_the_node_and_its_artifacts_reach_the_learners_page(
    ray_cluster, dispatchers, ray_client, ray_db, ray_settings
):
    dispatchers.start()
    _nodes_online(ray_db, gpus=4)
    c = ray_client
    c.register("ann@example.org")
    form = {"csrf_token": c.csrf("/labs/env-check"), "backend": "cpu"}
    r = c.post("/labs/env-check/jobs", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    job_id = int(r.headers["location"].rsplit("/", 1)[1])
    (job,) = _finished(ray_db, [job_id], dispatchers=dispatchers)
    assert job.status == "succeeded", job.error
    assert job.result["environment"]["backend"] == "cpu"  # the result says which backend ran
    # The node declares four GPUs and Ray leaves a task granted none seeing them; the lab's own process does not,
    # and its threads are the task's one CPU (env-check's table, written from inside the lab).
    (inside,) = [t["rows"] for t in job.result["results"]["tables"] if t["title"] == "This job's process"]
    assert dict(inside) == {
        "torch CPU threads": "1",
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "empty: no GPU visible",
    }
    assert job.placement["threads"] == 1 and job.placement["lab_cuda_visible_devices"] == ""
    assert job.placement["node_id"] != "" and job.node
    page = c.get(f"/jobs/{job_id}").text
    assert 'data-testid="honesty-label"' in page and f"/jobs/{job_id}/artifacts/result.json" in page
    assert c.get(f"/jobs/{job_id}/artifacts/result.json").json()["lab"] == "env-check"
    # the output came back through Ray: stored under the web app's data dir, gone from the node's own
    assert (ray_settings.data_dir / job.bundle_dir / "result.json").is_file()
    assert ray_cluster.node_data != ray_settings.data_dir
    assert not list((ray_cluster.node_data / "course-node").glob(f"job-{job_id}-*"))
    # the instructor sees the node, its declared GPUs and what its probe said
    cluster_rows = ray_db.query(ClusterNode).filter(ClusterNode.alive.is_(True)).all()
    node = next(r for r in cluster_rows if r.resources.get("GPU"))
    assert node.labels["course/te"] == "no" and node.labels["course/gpus"] == "0"


def test_four_logical_gpus_are_never_held_by_more_than_four_ranks_at_once(dispatchers, ray_client, ray_db):
    dispatchers.start()
    _nodes_online(ray_db, gpus=4)
    c = ray_client
    c.register("ann@example.org")
    ids = []
    for degrees in ([4], [2], [2]):
        r = _api(c, "tp-sweep", params={"degrees": degrees}, backend="torch-cuda")
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    jobs = _finished(ray_db, ids, dispatchers=dispatchers)
    spans = []
    for j in jobs:
        granted = j.placement["cuda_visible_devices"].split(",")
        assert len(granted) == j.gpus == max(j.params["degrees"])
        spans.append((j.placement["at"], j.placement["ended"], set(granted)))
        # the lab itself then refuses: no CUDA device behind the logical GPUs, said to the learner
        assert j.status == "failed" and j.message == "refused" and "torch-cuda" in j.error
        assert j.gpu_seconds > 0  # it held its GPUs for that time: charged, as any run the lab ended
    for t, *_ in spans:  # at every moment a task started, the GPUs then held
        held = [g for a, b, g in spans if a <= t < b]
        assert sum(len(g) for g in held) <= 4, spans
        assert len(set().union(*held)) == sum(len(g) for g in held), spans  # no device granted twice


def test_b_starts_before_as_third_when_a_submitted_twenty_first(dispatchers, ray_client, make_client_for, ray_db):
    a = ray_client
    a.register("a@example.org")
    prof = make_client_for("prof@example.org", roles=("instructor",))
    r = prof.post(
        "/instructor/cluster/limits",
        data={"email": "a@example.org", "max_in_flight": "", "max_per_hour": "", "max_gpu_seconds_per_day": ""},
        follow_redirects=False,
    )
    assert r.status_code == 303
    a_ids = [_api(a, "env-check", backend="cpu").json()["id"] for _ in range(20)]
    b = make_client_for("b@example.org")
    b_id = _api(b, "env-check", backend="cpu").json()["id"]
    dispatchers.start()
    b_job = wait_for(lambda: (ray_db.expire_all(), ray_db.get(Job, b_id))[1].started_at, timeout=120)
    a3 = ray_db.get(Job, a_ids[2])
    assert a3.started_at is None or b_job < a3.started_at
    for i in [*a_ids, b_id]:  # no need to run them all
        prof.delete(f"/api/v1/jobs/{i}", headers={"X-CSRF-Token": prof.api_token()})
    _finished(ray_db, [*a_ids, b_id], dispatchers=dispatchers)


def test_a_killed_dispatcher_is_infrastructure_the_job_succeeds_on_retry(dispatchers, ray_client, ray_db):
    first = dispatchers.start()
    _nodes_online(ray_db, gpus=4)
    c = ray_client
    c.register("ann@example.org")
    job_id = _api(c, "env-check", backend="cpu").json()["id"]
    running = _lab_started(ray_db, job_id)
    lab_pid = running.placement["lab_pid"]
    first.send_signal(signal.SIGKILL)
    first.wait()
    wait_for(lambda: not lab_alive(lab_pid), timeout=60)  # Ray ended the dead driver's task and its lab
    dispatchers.start()  # the next dispatcher reaps the expired lease and runs it again
    (job,) = _finished(ray_db, [job_id], dispatchers=dispatchers)
    assert job.status == "succeeded" and job.attempts == 2, (job.status, job.error, job.message)
    assert not lab_processes(job_id)


def test_a_killed_node_is_infrastructure_no_gpu_is_offered_cpu_and_the_job_succeeds_on_retry(
    ray_cluster, dispatchers, ray_client, ray_db
):
    dispatchers.start()
    _nodes_online(ray_db, gpus=4)
    c = ray_client
    c.register("ann@example.org")
    # long enough (~10 s) that the node dies mid-run: env-check's 2 s could finish before the kill lands
    job_id = _api(c, "fp8-step", params=SLOW_ENOUGH, backend="cpu").json()["id"]
    lab_pid = _lab_started(ray_db, job_id).placement["lab_pid"]
    ray_cluster.kill_node()
    try:
        wait_for(lambda: not lab_alive(lab_pid), timeout=60)  # the lab died with the node's worker

        # The task's stream says the node died, and the dispatcher gives the job back as an infrastructure loss
        # (jobs.lost: never charged; tests/app/test_jobs_service.py checks what it writes). It believes the stream
        # over ray.nodes(), which may list the dead node for seconds more (once, under the whole suite, the job
        # was sent there again 76 ms after it was given back): the job stays in the fair queue while no node is
        # left (tests/executors/test_dispatch_nodes.py has the rule).
        given_back = f"job {job_id} queued: the node or its Ray worker was lost"
        try:
            wait_for(lambda: given_back in dispatchers.logs(tail=None), timeout=90)  # margin: a busy 2-core machine
        except AssertionError:
            ray_db.expire_all()
            j = ray_db.get(Job, job_id)
            raise AssertionError(
                f"job {job_id} was not given back: {j.status!r} {j.message!r}\n{dispatchers.logs()}"
            ) from None
        logs = dispatchers.logs(tail=None)
        assert "a task on it failed with NodeDiedError; no work goes there while Ray still lists it" in logs, logs
        # with the only GPU node gone, a GPU run is refused at submit and the CPU backend is offered
        _nodes_online(ray_db, gpus=0, timeout=60)
        r = _api(c, "tp-sweep", params={"degrees": [1, 2]}, backend="torch-cuda")
        assert r.status_code == 422 and r.json()["offer"]["backend"] == "cpu"
        page = c.post(
            "/labs/tp-sweep/jobs",
            data={
                "csrf_token": c.csrf("/labs/tp-sweep"),
                "degrees": ["1", "2"],
                "degrees__present": "1",
                "backend": "torch-cuda",
            },
        )
        assert "No GPU is online" in html.unescape(page.text)
        ray_db.expire_all()
        assert ray_db.get(Job, job_id).status == "queued"  # waiting for a node in the fair queue, not inside Ray
        assert f"job {job_id} attempt 2 submitted" not in dispatchers.logs(tail=None)
    finally:
        ray_cluster.start_node()  # the host comes back
    (job,) = _finished(ray_db, [job_id], dispatchers=dispatchers)
    assert job.status == "succeeded" and job.attempts == 2, (job.error, job.message)
    assert not lab_processes(job_id)


def test_a_lab_killed_from_outside_on_the_node_is_requeued_uncharged_and_succeeds(dispatchers, ray_client, ray_db):
    """The node's OOM killer or an operator's `kill -9` hits the lab process, not Ray: the task still reports its
    end, and the dispatcher gives the attempt back as the infrastructure's (labproc.Outcome.lost)."""
    dispatchers.start()
    _nodes_online(ray_db, gpus=4)
    c = ray_client
    c.register("ann@example.org")
    job_id = _api(c, "fp8-step", params=SLOW_ENOUGH, backend="cpu").json()["id"]
    lab_pid = _lab_started(ray_db, job_id).placement["lab_pid"]
    os.kill(lab_pid, signal.SIGKILL)
    given_back = f"job {job_id} queued: its process was stopped from outside the run (SIGKILL)"
    wait_for(lambda: given_back in dispatchers.logs(tail=None), timeout=90)
    (job,) = _finished(ray_db, [job_id], dispatchers=dispatchers)
    assert job.status == "succeeded" and job.attempts == 2 and job.error is None, (job.error, job.message)
    assert job.gpu_seconds == 0  # a CPU run, and the lost attempt was never charged either way


def test_cancel_and_time_limit_stop_the_lab_on_the_node(dispatchers, ray_client, ray_db):
    dispatchers.start(COURSE_JOB_TIME_LIMIT="12")
    _nodes_online(ray_db, gpus=4)
    c = ray_client
    c.register("ann@example.org")
    long_run = {"steps": 2000}  # far longer than either test waits
    cancel_id = _api(c, "fp8-step", params=long_run, backend="cpu").json()["id"]
    stuck_id = _api(c, "fp8-step", params=long_run, backend="cpu").json()["id"]
    cancel_pid = _lab_started(ray_db, cancel_id).placement["lab_pid"]
    r = c.delete(f"/api/v1/jobs/{cancel_id}", headers={"X-CSRF-Token": c.api_token()})
    assert r.status_code == 200 and r.json()["status"] in ("running", "cancelled")
    cancelled, stuck = _finished(ray_db, [cancel_id, stuck_id], timeout=240, dispatchers=dispatchers)
    assert cancelled.status == "cancelled"
    assert stuck.status == "failed" and stuck.message == "timed out" and "time limit of 12 s" in stuck.error
    time.sleep(0.5)
    assert not lab_alive(cancel_pid) and not lab_processes(cancel_id) and not lab_processes(stuck_id)
