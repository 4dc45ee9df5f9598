"""GET /metrics for Prometheus, behind a token; request latency by route template, jobs by
state and lab, queue wait and run time histograms, infrastructure losses, node slots and liveness, from the real
database; several web processes added up; JSON log lines as an option."""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.request
from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.core.models import ClusterNode, Job, JobLoss, utcnow
from app.services.cluster import dispatch_lease
from app.web.factory import create_app
from tests.app.live import Live, course_server
from tests.conftest import ROOT

TOKEN = "metrics-test-token-0123456789"


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of an exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict, name: str, **labels) -> float:
    return found[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def metrics_client(settings) -> Iterator[TestClient]:
    app = create_app(dataclasses.replace(settings, metrics_token=TOKEN))
    with TestClient(app) as c:
        yield c


def scrape(c: TestClient) -> dict:
    r = c.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(r.text)


def test_metrics_are_off_unless_a_token_is_set(client):
    r = client.get("/metrics")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/plain")
    assert "COURSE_METRICS_TOKEN" in r.text


@pytest.mark.parametrize("header", [None, "Bearer wrong-token", f"Basic {TOKEN}", TOKEN])
def test_a_scrape_without_the_token_is_refused_and_says_which_header(metrics_client, header):
    r = metrics_client.get("/metrics", headers={"Authorization": header} if header else {})
    assert r.status_code == 401
    assert r.headers["content-type"].startswith("text/plain")
    assert "Authorization: Bearer <COURSE_METRICS_TOKEN>" in r.text
    assert "course_jobs" not in r.text


def test_request_latency_is_labelled_by_route_template_not_by_path(metrics_client):
    for job_id in (101, 102, 103):
        metrics_client.get(f"/jobs/{job_id}", follow_redirects=False)  # not logged in: a redirect to /login
    metrics_client.get("/login")
    found = scrape(metrics_client)
    jobs = value(
        found, "course_http_request_duration_seconds_count", route="/jobs/{job_id}", method="GET", status_class="3xx"
    )
    assert jobs == 3
    assert (
        value(found, "course_http_request_duration_seconds_count", route="/login", method="GET", status_class="2xx")
        >= 1
    )
    assert not any("/jobs/101" in str(k) for k in found)


def test_jobs_by_state_and_the_wait_and_run_histograms_come_from_the_database(metrics_client, db, make_user):
    owner = make_user("metrics@example.org")
    now = utcnow()

    def job(status: str, lab: str, wait_s: float | None, run_s: float | None, **kw) -> Job:
        created = now - timedelta(seconds=1000)
        started = created + timedelta(seconds=wait_s) if wait_s is not None else None
        finished = started + timedelta(seconds=run_s) if started is not None and run_s is not None else None
        j = Job(
            owner_id=owner.id,
            lab=lab,
            status=status,
            created_at=created,
            started_at=started,
            finished_at=finished,
            **kw,
        )
        db.add(j)
        return j

    job("succeeded", "fp8-step", 3, 100)
    job("succeeded", "fp8-step", 40, 20)
    job("failed", "fp8-step", 0.5, 2)
    job("queued", "tp-sweep", None, None)
    job("cancelled", "tp-sweep", 10, 5)  # cancelled: waited, but its run time is not a lab's
    stale = job("running", "overlap-trace", 2, None, node="gpu-a", ranks=2, gpus=2)
    stale.lease_expires_at = now - timedelta(seconds=30)
    stale.heartbeat_at = now - timedelta(seconds=45)
    db.flush()
    db.add(JobLoss(job_id=stale.id, attempt=1, reason="the node died", outcome="queued"))
    db.add(
        ClusterNode(
            node_id="ab" * 28,
            hostname="gpu-a",
            alive=True,
            resources={"CPU": 16, "GPU": 8},
            seen_at=now - timedelta(seconds=7),
        )
    )
    db.commit()

    found = scrape(metrics_client)
    assert value(found, "course_jobs", status="succeeded", lab="fp8-step") == 2
    assert value(found, "course_jobs", status="failed", lab="fp8-step") == 1
    assert value(found, "course_jobs", status="queued", lab="tp-sweep") == 1
    assert value(found, "course_jobs", status="running", lab="fp8-step") == 0  # every state is listed, 0 included
    # waits of fp8-step: 3 s, 40 s, 0.5 s
    assert value(found, "course_job_queue_wait_seconds_bucket", lab="fp8-step", le="1.0") == 1
    assert value(found, "course_job_queue_wait_seconds_bucket", lab="fp8-step", le="5.0") == 2
    assert value(found, "course_job_queue_wait_seconds_bucket", lab="fp8-step", le="60.0") == 3
    assert value(found, "course_job_queue_wait_seconds_sum", lab="fp8-step") == pytest.approx(43.5)
    # runs: 100 s and 20 s and 2 s; the cancelled tp-sweep is no lab's run time
    assert value(found, "course_job_run_seconds_bucket", lab="fp8-step", le="30.0") == 2
    assert value(found, "course_job_run_seconds_count", lab="fp8-step") == 3
    assert value(found, "course_job_run_seconds_count", lab="tp-sweep") == 0  # every lab, 0 included
    assert value(found, "course_infrastructure_losses_total", outcome="queued") == 1
    assert value(found, "course_infrastructure_losses_total", outcome="failed") == 0
    assert value(found, "course_node_slots", node="gpu-a", node_id="abababab", kind="gpu") == 8
    assert value(found, "course_node_slots_used", node="gpu-a", kind="gpu") == 2
    assert value(found, "course_node_alive", node="gpu-a", node_id="abababab") == 1
    assert value(found, "course_running_jobs_past_lease") == 1
    assert value(found, "course_worker_heartbeat_age_seconds") >= 45
    assert 7 <= value(found, "course_dispatcher_snapshot_age_seconds") < 60
    assert ("course_dispatcher_lease_age_seconds", ()) not in found  # no dispatcher holds the lease yet


def test_two_nodes_of_one_host_are_two_series(metrics_client, db):
    """A restarted node joins with a new id on the same host: its old row and the new one must not share labels,
    or Prometheus keeps one of the two samples and a live node can read as dead."""
    for node_id, alive in (("0a" * 28, False), ("0b" * 28, True)):
        db.add(ClusterNode(node_id=node_id, hostname="cpu-1", alive=alive, resources={"CPU": 4}, seen_at=utcnow()))
    db.commit()
    found = scrape(metrics_client)
    assert value(found, "course_node_alive", node="cpu-1", node_id="0a0a0a0a") == 0
    assert value(found, "course_node_alive", node="cpu-1", node_id="0b0b0b0b") == 1
    assert value(found, "course_node_slots", node="cpu-1", node_id="0b0b0b0b", kind="cpu") == 4
    # the gone node's slots are not listed: a panel of slots adds up what is alive
    assert not [k for k in found if k[0] == "course_node_slots" and ("node_id", "0a0a0a0a") in k[1]]


def test_the_active_dispatchers_lease_age_is_exposed(metrics_client, db):
    dispatch_lease.try_acquire(db, me="dispatcher:web-a:41:abcd1234", lease_s=5, now=utcnow() - timedelta(seconds=3))
    found = scrape(metrics_client)
    assert 3 <= value(found, "course_dispatcher_lease_age_seconds") < 60


def _dashboard_series() -> set[str]:
    """Every sample name a panel of docs/grafana-dashboard.json queries."""
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text(encoding="utf-8"))
    return {m for p in dashboard["panels"] for t in p["targets"] for m in re.findall(r"course_[a-z_]+", t["expr"])}


def test_a_fresh_server_exports_every_metric_the_dashboard_queries_at_zero(settings, db):
    """A new Ray-mode deployment: nothing submitted, nothing refused, no dispatcher yet. Each panel has a series to
    show (0, or +Inf for a dispatcher that never ran) once the server has answered its first request (the
    latency histogram's series are per route); the node panels once the dispatcher has written its first snapshot,
    as `Dispatcher._write_snapshot` does from `ray.nodes()`. A node that leaves keeps only `course_node_alive` 0."""
    from app.executors.ray import Dispatcher
    from app.executors.ray_resources import alive_nodes

    with TestClient(create_app(dataclasses.replace(settings, metrics_token=TOKEN))) as c:
        found = scrape(c)  # embedded mode: no dispatcher, so none of its figures
        assert ("course_dispatcher_snapshot_age_seconds", ()) not in found
        assert value(found, "course_jobs", status="running", lab="env-check") == 0
    ray_settings = dataclasses.replace(settings, metrics_token=TOKEN, executor="ray")
    with TestClient(create_app(ray_settings)) as c:
        assert c.get("/login").status_code == 200  # what a health check asks first
        found = scrape(c)
        names = {name for name, _ in found}
        wanted = _dashboard_series()
        node_series = {m for m in wanted if m.startswith("course_node_")}
        assert wanted - node_series <= names, sorted(wanted - node_series - names)
        assert value(found, "course_admission_refused_total", lane="pages", reason="queue full") == 0
        assert value(found, "course_admission_refused_total", lane="passwords", reason="waited too long") == 0
        assert value(found, "course_jobs", status="queued", lab="fp8-step") == 0
        assert value(found, "course_job_queue_wait_seconds_count", lab="tp-sweep") == 0
        assert value(found, "course_infrastructure_losses_total", outcome="failed") == 0
        assert value(found, "course_dispatcher_snapshot_age_seconds") == float("inf")
        assert value(found, "course_dispatcher_lease_age_seconds") == float("inf")

        listed = [
            {"NodeID": "ab" * 28, "Alive": True, "NodeManagerHostname": "cpu-1", "Labels": {},
             "Resources": {"CPU": 4.0, "memory": 6e9, "node:127.0.0.1": 1.0}},
            {"NodeID": "cd" * 28, "Alive": True, "NodeManagerHostname": "web-1", "Labels": {},
             "Resources": {"memory": 2e9}},
        ]  # fmt: skip
        d = Dispatcher(ray_settings)
        try:
            d.nodes = alive_nodes(listed, {}, 0.0)[0]
            d._write_snapshot()
            found = scrape(c)
            assert wanted <= {name for name, _ in found}, sorted(wanted - {name for name, _ in found})
            assert value(found, "course_node_slots_used", node="cpu-1", kind="cpu") == 0
            assert value(found, "course_node_slots", node="cpu-1", node_id="abababab", kind="cpu") == 4
            assert 0 <= value(found, "course_dispatcher_snapshot_age_seconds") < 60
            d.nodes = alive_nodes(listed[1:], {}, 0.0)[0]  # cpu-1 left the cluster
            d._write_snapshot()
        finally:
            d.engine.dispose()
        found = scrape(c)
        assert value(found, "course_node_alive", node="cpu-1", node_id="abababab") == 0
        assert not [k for k in found if k[0] in ("course_node_slots", "course_node_slots_used") and
                    ("node", "cpu-1") in k[1]]  # fmt: skip


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("metrics")
    env = {
        "COURSE_WEB_PROCESSES": "2",
        "COURSE_METRICS_TOKEN": TOKEN,
        "COURSE_LOG_FORMAT": "json",
        "COURSE_LOG_LEVEL": "INFO",
    }
    with course_server(tmp, f"sqlite:///{tmp / 'course.db'}", **env) as server:
        yield server


def test_several_web_processes_are_added_up_and_log_json_lines(two_processes):
    live = two_processes
    for _ in range(20):  # a new connection each: either process may answer
        with urllib.request.urlopen(live.base + "/api/v1/docs", timeout=30) as r:
            assert r.status == 200
    for _ in range(4):  # whichever process answers the scrape, it reads both processes' counts
        req = urllib.request.Request(live.base + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            found = samples(r.read().decode())
        count = value(
            found, "course_http_request_duration_seconds_count", route="/api/v1/docs", method="GET", status_class="2xx"
        )
        assert count == 20
        assert value(found, "course_admission_waiting", lane="pages") == 0
        assert value(found, "course_admission_refused_total", lane="pages", reason="queue full") == 0
    files = list((live.log.parent / "data" / "run" / "metrics").glob("histogram_*.db"))
    assert files, "the web processes did not write their metrics to the shared folder"
    lines = [line for line in live.log.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert records and len(records) == len(lines), lines[:5]  # every line is one JSON object
    assert {"time", "level", "logger", "pid", "message"} <= set(records[0])
