"""Ray mode as the web tier sees it: only lab nodes bound a job, a run none can hold is refused at submit with the
arithmetic, a queued job with no lab node online has no ETA, and the web host's start-up log does not call it a lab
host. The cluster is the dispatcher's snapshot in `cluster_nodes` (app/services/cluster/nodes.py), written here as the
dispatcher writes it."""

from __future__ import annotations

import html
import logging
import re
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from app.cli import serve
from app.core.models import ClusterNode, Job
from app.services.cluster import nodes as cluster
from app.web.factory import create_app
from tests.conftest import Browserless

WEB_BUDGET = 8 * 2**30  # the web host's own COURSE_JOB_MEMORY_MB: large, so a check against it would accept
NODE_MB = 1024  # the lab node's label: tp-sweep's default run (about 2.4 GiB on cpu) does not fit


def _head(db):
    """A head started as docs/deploying.md says (`--num-cpus=0 --num-gpus=0`, no labels): it runs no lab."""
    db.add(ClusterNode(node_id="head", hostname="web-1", alive=True, resources={"memory": 6e9}, labels={}))


def _lab_node(db, mb=NODE_MB):
    labels = {"course/job_memory_mb": str(mb), "course/te": "no", "course/gpus": "0"}
    db.add(ClusterNode(node_id="cpu", hostname="cpu-1", alive=True, resources={"CPU": 4.0}, labels=labels))


@pytest.fixture
def ray_client(settings):
    with TestClient(create_app(replace(settings, executor="ray", job_memory_bytes=WEB_BUDGET))) as tc:
        c = Browserless(tc)
        c.register("ann@example.org")
        yield c


def _submit(c, **body):
    return c.post("/api/v1/jobs", json=body, headers={"X-CSRF-Token": c.api_token()})


def test_a_head_without_cpus_lends_no_budget_and_the_largest_lab_node_bounds_memory(db):
    _head(db)
    db.commit()
    empty = cluster.host_capacity(db, memory_bytes=WEB_BUDGET)
    assert empty.capacity.memory_bytes == WEB_BUDGET and "no lab node" in empty.memory_why  # nothing else to go by
    assert empty.capacity.gpu_why == "no lab node of the course's Ray cluster is online"
    _lab_node(db)
    db.add(
        ClusterNode(
            node_id="big",
            hostname="cpu-2",
            alive=True,
            resources={"CPU": 2.0},
            labels={"course/job_memory_mb": "3072"},
        )
    )
    db.commit()
    host = cluster.host_capacity(db, memory_bytes=WEB_BUDGET)
    assert host.capacity.memory_bytes == 3072 * 2**20  # not the head's borrowed 8 GiB
    assert host.memory_why == "the largest per-job budget of a lab node online: cpu-2, COURSE_JOB_MEMORY_MB=3072"
    assert host.capacity.cpu_slots == 4


def test_a_run_no_lab_node_can_hold_is_refused_at_submit_with_the_arithmetic(ray_client, db):
    _head(db)
    _lab_node(db)
    db.commit()
    r = _submit(ray_client, lab="tp-sweep", backend="cpu")
    assert r.status_code == 422, r.text
    [err] = [e for e in r.json()["errors"] if "budget" in e["message"]]
    assert err["field"] == "ffn"  # the parameter that drives memory, named first
    msg = err["message"]
    assert msg.startswith("ffn: this run needs about 2.4 GiB of memory (")
    assert "over the per-job budget of 1.0 GiB; make the run smaller" in msg
    assert msg.endswith("(the largest per-job budget of a lab node online: cpu-1, COURSE_JOB_MEMORY_MB=1024)")
    form = {"csrf_token": ray_client.csrf("/labs/tp-sweep"), "backend": "cpu"}
    page = ray_client.post("/labs/tp-sweep/jobs", data=form)
    assert page.status_code == 422 and "cpu-1, COURSE_JOB_MEMORY_MB=1024" in html.unescape(page.text)
    assert db.query(Job).count() == 0  # refused, nothing stored
    assert _submit(ray_client, lab="env-check", backend="cpu").status_code == 201  # a run that fits still goes


def test_a_queued_job_has_no_eta_while_no_lab_node_is_online(ray_client, db):
    _head(db)
    db.commit()
    r = _submit(ray_client, lab="env-check", backend="auto")
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["status"] == "queued" and job["queue_position"] == 0
    assert job["eta_start_s"] is None and job["eta_done_s"] is None
    assert job["eta_basis"].startswith("no lab node of the Ray cluster is online")
    card = " ".join(re.sub(r"<[^>]+>", " ", html.unescape(ray_client.get(f"/jobs/{job['id']}").text)).split())
    assert "no estimate yet (no lab node of the Ray cluster is online" in card  # the job card says why
    _lab_node(db)
    db.commit()
    again = ray_client.get(f"/api/v1/jobs/{job['id']}").json()
    assert again["eta_start_s"] == 0.0 and again["eta_done_s"] > 0  # a node that runs it is online: next up
    db.get(ClusterNode, "cpu").alive = False  # and leaves, with no job changing
    db.commit()
    gone = ray_client.get(f"/api/v1/jobs/{job['id']}").json()
    assert gone["eta_start_s"] is None and gone["eta_basis"].startswith("no lab node of the Ray cluster is online")
    gpu = _submit(ray_client, lab="env-check", backend="torch-cuda")
    assert gpu.status_code == 422  # no GPU node: refused at submit, so no GPU job waits without an ETA


def test_in_ray_mode_the_web_host_does_not_call_itself_a_lab_host(settings, caplog):
    with caplog.at_level(logging.INFO):
        host = serve.check_and_probe(replace(settings, executor="ray"))
    lines = [r.getMessage() for r in caplog.records]
    assert not any(line.startswith("lab host:") for line in lines), lines
    assert any(line.startswith("web host: runs no lab (executor ray)") for line in lines), lines
    assert host.source == "default"


# fp8-step on cpu at this size needs about 4.6 GiB (labs/fp8_step/params.py): under the web host's 8 GiB, over the
# 3 GiB of the node that joins later
BIG = {"batch": 384, "seq": 256, "steps": 2}


def _plain(page: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html.unescape(page)).split())


def test_a_run_no_node_online_can_hold_waits_without_an_eta_and_fails_naming_memory(ray_client, db, settings):
    _head(db)
    db.commit()
    r = _submit(ray_client, lab="fp8-step", params=BIG, backend="cpu")
    assert r.status_code == 201, r.text  # no lab node online: only the web host's budget to go by, and it says so
    job = r.json()
    assert job["message"].startswith(
        "waiting for a lab node: none is online, so this run was checked against the web host's per-job memory "
        "budget of 8.0 GiB (COURSE_JOB_MEMORY_MB there, or its default), not a lab node's"
    )
    _lab_node(db, mb=3072)  # the node that joins allows 3 GiB per job
    db.commit()
    now = ray_client.get(f"/api/v1/jobs/{job['id']}").json()
    assert now["eta_start_s"] is None and now["eta_done_s"] is None
    why = "it needs about 4.6 GiB of memory and the largest per-job budget of a lab node online is 3.0 GiB (cpu-1, " \
          "COURSE_JOB_MEMORY_MB=3072)"  # fmt: skip
    assert now["eta_basis"] == f"no lab node online can run it: {why}; it starts only when a node that can joins"
    assert f"no estimate yet (no lab node online can run it: {why}" in _plain(ray_client.get(f"/jobs/{job['id']}").text)

    # the dispatcher's pass over the queue (no Ray call on this path): the job waits, saying so, and after
    # COURSE_UNPLACEABLE_SECONDS it fails naming memory and the node, not the backend it was on
    from app.executors.ray import Dispatcher

    nodes = cluster.online_nodes(db)
    d = Dispatcher(replace(settings, executor="ray", job_memory_bytes=WEB_BUDGET, unplaceable_s=600))
    try:
        assert d.dispatch(nodes) == 0
        db.expire_all()
        waiting = db.get(Job, job["id"])
        assert waiting.status == "queued" and waiting.message == "waiting for a lab node that can run it"
        d.settings = replace(d.settings, unplaceable_s=0)
        assert d.dispatch(nodes) == 0
    finally:
        d.engine.dispose()
    db.expire_all()
    failed = db.get(Job, job["id"])
    assert failed.status == "failed" and failed.message == "failed: no node can run it"
    assert failed.error.startswith(f"No lab node of the course's cluster could run it for 0 min: {why}. Make the run "
                                   "smaller (the lab form says by how much")  # fmt: skip
    assert "backend cpu" not in failed.error and failed.gpu_seconds == 0


def test_a_node_whose_budget_grows_gives_a_waiting_job_its_eta(ray_client, db):
    """Which queued jobs can start depends on the online nodes' labels too: a node restarted with a larger per-job
    budget lets a job that waited for one be estimated, with no job changing."""
    _head(db)
    _lab_node(db, mb=3072)
    db.commit()
    r = _submit(ray_client, lab="fp8-step", params=BIG, backend="cpu")
    assert r.status_code == 422, r.text  # a lab node is online and bounds memory: refused at submit
    db.delete(db.get(ClusterNode, "cpu"))
    db.commit()
    r = _submit(ray_client, lab="fp8-step", params=BIG, backend="cpu")
    assert r.status_code == 201, r.text
    job = r.json()
    _lab_node(db, mb=3072)
    db.commit()
    assert ray_client.get(f"/api/v1/jobs/{job['id']}").json()["eta_start_s"] is None  # 3 GiB: it cannot start
    node = db.get(ClusterNode, "cpu")
    node.labels = {**node.labels, "course/job_memory_mb": "8192"}
    db.commit()
    now = ray_client.get(f"/api/v1/jobs/{job['id']}").json()
    assert now["eta_start_s"] == 0.0 and now["eta_done_s"] > 0, now


def test_the_cluster_page_says_the_head_runs_no_labs_rather_than_a_budget_it_assumes(settings, db):
    from app.services.accounts import users

    _head(db)
    _lab_node(db)
    db.add(ClusterNode(node_id="bare", hostname="cpu-9", alive=True, resources={"CPU": 2.0}, labels={}))
    # the cluster page is a site admin's (app/web/routes/cluster.py): an operator's, not a class instructor's
    users.create_user(db, email="ops@example.org", password="correct horse", display_name="Ops", roles=["admin"])
    db.commit()
    with TestClient(create_app(replace(settings, executor="ray", job_memory_bytes=WEB_BUDGET))) as tc:
        c = Browserless(tc)
        assert c.login("ops@example.org").status_code == 303
        page = _plain(c.get("/instructor/cluster").text)
    assert "web-1 head online 0 0 no none none runs no labs (no CPU slots)" in page  # nothing to assume for it
    assert page.count("placement assumes") == 1
    assert "cpu-9 bare online 2 0 no none none no label: placement assumes 8192 MiB" in page
