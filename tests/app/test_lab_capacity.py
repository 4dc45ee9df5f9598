"""Submissions are checked against what this host's workers can give one job, with the catalog's rules,
so a form or the API never accepts a run the lab would refuse; `auto` resolves to the best backend here."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.core.models import Job
from app.services.jobs.labhost import HostCapacity
from app.web.factory import create_app
from labs.catalog import Capacity
from tests.conftest import Browserless

pytestmark = pytest.mark.both_backends  # admission counts running jobs in SQL

# A small host: four CPU rank slots, no GPU, 1 GiB per job. Written out so the test does not depend on
# how many cores the machine running it has.
SMALL = HostCapacity(
    capacity=Capacity(cpu_slots=4, gpus=0, memory_bytes=2**30, cpu_why="4 CPU rank slots on this test host"),
    backends=("cpu",),
    source="test",
)
# What `python -m labs probe` reports on a two-GPU node without Transformer Engine (labs/env.py shape).
TWO_GPUS_NO_TE = {
    "device": {"type": "cuda", "count": 2, "name": "NVIDIA H200"},
    "transformer_engine": {"available": False, "reason": "not installed"},
}


@pytest.fixture
def small_client(settings):
    with TestClient(create_app(settings, host=SMALL)) as c:
        browser = Browserless(c)
        browser.register("ann@example.org")
        yield browser


def _form(client, lab: str, **values: str) -> dict:
    return {"csrf_token": client.csrf(f"/labs/{lab}"), **values}


def test_too_many_ranks_is_refused_next_to_the_degrees_field(small_client, db):
    r = small_client.post(
        "/labs/tp-sweep/jobs", data=_form(small_client, "tp-sweep", degrees="1,2,8"), headers={"HX-Request": "true"}
    )
    assert r.status_code == 422 and r.headers["HX-Retarget"] == "#lab-form-wrap"
    assert 'id="e-degrees"' in r.text and "8 ranks need 8 CPU slots" in r.text and "use degrees &lt;= 4" in r.text
    assert db.query(Job).count() == 0


def test_a_gpu_backend_on_a_cpu_host_is_refused_next_to_the_backend_field(small_client, db):
    r = small_client.post("/labs/fp8-step/jobs", data=_form(small_client, "fp8-step", backend="te"))
    assert r.status_code == 422
    assert 'id="e-backend"' in r.text and "needs a GPU and none is available" in r.text
    assert db.query(Job).count() == 0


def test_a_run_over_the_memory_budget_is_refused_next_to_its_field(small_client, db):
    r = small_client.post(
        "/labs/tp-sweep/jobs", data=_form(small_client, "tp-sweep", degrees="1,2,4", ffn="32768", hidden="8192")
    )
    assert r.status_code == 422 and 'id="e-ffn"' in r.text and "over the per-job budget of 1.0 GiB" in r.text
    assert db.query(Job).count() == 0


def test_the_api_refuses_the_same_runs_naming_the_field(small_client, db):
    headers = {"X-CSRF-Token": small_client.api_token()}
    r = small_client.post("/api/v1/jobs", json={"lab": "tp-sweep", "params": {"degrees": [1, 8]}}, headers=headers)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "degrees"
    r = small_client.post("/api/v1/jobs", json={"lab": "env-check", "backend": "torch-cuda"}, headers=headers)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "backend"
    assert db.query(Job).count() == 0


def test_auto_resolves_to_what_runs_and_the_job_records_it(small_client, db):
    r = small_client.post(
        "/labs/env-check/jobs", data=_form(small_client, "env-check", backend="auto"), follow_redirects=False
    )
    assert r.status_code == 303
    job = db.query(Job).one()
    assert (job.backend, job.queue) == ("cpu", "cpu")
    labs = {lab["name"]: lab for lab in small_client.get("/api/v1/labs").json()}
    assert labs["tp-sweep"]["auto_backend"] == "cpu" and labs["tp-sweep"]["backends"] == ["te", "torch-cuda", "cpu"]


def test_a_gpu_host_resolves_auto_per_lab_and_refuses_te_without_transformer_engine():
    from labs import catalog

    host = HostCapacity.from_probe(TWO_GPUS_NO_TE)
    assert host.backends == ("torch-cuda", "cpu") and host.capacity.gpus == 2
    fp8, tp, ov = catalog.get("fp8-step"), catalog.get("tp-sweep"), catalog.get("overlap-trace")
    # overlap-trace has no te path: asked for te it runs plain PyTorch on the GPU
    assert host.resolve(fp8, "auto") == "torch-cuda" and host.resolve(ov, "te") == "torch-cuda"
    problems = host.problems(fp8, fp8.params(), "te")
    assert [p.field for p in problems] == ["backend"] and "Transformer Engine" in problems[0].message
    too_wide = tp.params.model_validate({"degrees": [1, 4]})
    assert [p.field for p in host.problems(tp, too_wide, "torch-cuda")] == ["degrees"]


def test_the_capacity_survives_the_trip_to_the_web_processes():
    host = HostCapacity.from_probe(TWO_GPUS_NO_TE)
    assert HostCapacity.from_json(host.to_json()) == host
