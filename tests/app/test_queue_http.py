"""Limits, cancel, "no GPU online" and the ETA through HTTP (pages and the JSON API), on SQLite and PostgreSQL."""

from __future__ import annotations

import html
from dataclasses import replace
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from app.core.models import ClusterNode, Job, utcnow
from app.services.jobs import limits as limit_service
from app.web.factory import create_app
from tests.conftest import Browserless

pytestmark = pytest.mark.both_backends  # the queue's limits are SQL aggregates over jobs


@pytest.fixture
def prof(make_client, make_user):
    make_user("prof@example.org", roles=("instructor",))
    c = make_client()
    assert c.login("prof@example.org").status_code == 303
    return c


def _api_submit(c, lab="env-check", **body):
    return c.post("/api/v1/jobs", json={"lab": lab, **body}, headers={"X-CSRF-Token": c.api_token()})


def _set_limits(prof, email="", **values):
    data = {"email": email, "max_in_flight": "", "max_per_hour": "", "max_gpu_seconds_per_day": ""}
    data.update({k: str(v) for k, v in values.items()})
    return prof.post("/instructor/cluster/limits", data=data, follow_redirects=False)


def test_jobs_in_flight_limit_names_itself_and_creates_nothing(client, prof, db):
    assert _set_limits(prof, max_in_flight=2).status_code == 303
    client.register("ann@example.org")
    assert _api_submit(client).status_code == 201
    assert _api_submit(client).status_code == 201
    r = _api_submit(client)
    assert r.status_code == 429
    assert r.json()["limit"] == "jobs in flight" and "limit of jobs in flight (2)" in r.json()["detail"]
    assert db.query(Job).count() == 2
    # the form says the same next to the button, and stores nothing either
    page = client.post("/labs/env-check/jobs", data={"csrf_token": client.csrf("/labs/env-check")})
    assert page.status_code == 422 and "limit of jobs in flight (2)" in page.text
    assert db.query(Job).count() == 2
    # cancelling one frees a place
    first = db.query(Job).order_by(Job.id).first()
    assert client.delete(f"/api/v1/jobs/{first.id}", headers={"X-CSRF-Token": client.api_token()}).status_code == 200
    assert _api_submit(client).status_code == 201


def test_jobs_per_hour_limit_says_when_it_frees(client, prof, db):
    assert _set_limits(prof, max_per_hour=1).status_code == 303
    client.register("ann@example.org")
    assert _api_submit(client).status_code == 201
    r = _api_submit(client)
    assert r.status_code == 429 and r.json()["limit"] == "jobs per hour"
    assert 3500 <= int(r.headers["retry-after"]) <= 3601
    assert "It frees at" in r.json()["detail"]


def test_gpu_seconds_per_day_counts_only_charged_runs(client, prof, db, make_user):
    assert _set_limits(prof, max_gpu_seconds_per_day=100).status_code == 303
    client.register("ann@example.org")
    ann = db.query(Job).count() or None  # no jobs yet
    assert ann is None
    owner_id = client.get("/api/v1/me").json()["id"]
    now = utcnow()
    # an infrastructure failure charges nothing; a finished 2-GPU run of 60 s charges 120 GPU-seconds
    db.add(Job(owner_id=owner_id, lab="tp-sweep", status="failed", gpu_seconds=0.0, finished_at=now, gpus=2))
    db.commit()
    assert _api_submit(client).status_code == 201
    db.add(Job(owner_id=owner_id, lab="tp-sweep", status="succeeded", gpu_seconds=120.0, finished_at=now, gpus=2))
    db.commit()
    r = _api_submit(client)
    assert r.status_code == 429 and r.json()["limit"] == "GPU-seconds per day"
    assert "used 120 GPU-seconds" in r.json()["detail"]
    frees = r.json()["frees_at"]
    assert frees.startswith((now + timedelta(days=1)).strftime("%Y-%m-%d"))


def test_a_learners_own_limit_overrides_the_default_and_bad_input_names_the_field(client, prof, db):
    client.register("ann@example.org")
    assert _set_limits(prof, max_in_flight=1).status_code == 303
    assert _set_limits(prof, email="ann@example.org", max_in_flight=3).status_code == 303
    for _ in range(3):
        assert _api_submit(client).status_code == 201
    assert _api_submit(client).status_code == 429
    bad = _set_limits(prof, max_in_flight="lots")
    assert bad.status_code == 422 and "jobs in flight: got 'lots', expected a whole number" in html.unescape(bad.text)
    nobody = _set_limits(prof, email="nobody@example.org", max_in_flight=2)
    assert nobody.status_code == 422 and "no user 'nobody@example.org'" in html.unescape(nobody.text)
    page = prof.get("/instructor/cluster").text
    assert "ann@example.org" in page and "3 / 3" in page  # usage against her own limit


def test_removing_own_limits_needs_a_learner_and_every_save_says_what_it_did(client, prof, db):
    """ "Remove this learner's own limits" with the email left blank once fell through and saved the form's
    numbers as the course default, silently. It is now refused and changes nothing; each save says what it did."""
    client.register("ann@example.org")
    saved = _set_limits(prof, max_in_flight=4)
    assert saved.headers["location"] == "/instructor/cluster?saved=default"
    assert "Saved the course default limits." in prof.get(saved.headers["location"]).text
    before = limit_service.course_default(db)
    blank = _set_limits(prof, max_in_flight=1, clear="1")
    assert blank.status_code == 422
    assert "email: name the learner whose own limits to remove" in html.unescape(blank.text)
    db.expire_all()
    assert limit_service.course_default(db) == before and before.max_in_flight == 4  # not the form's 1
    own = _set_limits(prof, email="ann@example.org", max_in_flight=2)
    assert own.headers["location"] == "/instructor/cluster?saved=learner"
    cleared = _set_limits(prof, email="ann@example.org", clear="1")
    assert cleared.headers["location"] == "/instructor/cluster?saved=cleared"
    assert "the course default applies to them again" in prof.get(cleared.headers["location"]).text
    again = _set_limits(prof, email="ann@example.org", clear="1")
    assert again.headers["location"] == "/instructor/cluster?saved=unchanged"
    assert "<script>" not in prof.get("/instructor/cluster?saved=<script>").text  # an unknown kind says nothing


def test_cancel_a_queued_job_by_api_and_button_with_ownership_and_csrf(client, make_client, make_user, db):
    client.register("ann@example.org")
    job_id = _api_submit(client).json()["id"]
    other = make_client()
    other.register("bob@example.org")
    assert other.delete(f"/api/v1/jobs/{job_id}", headers={"X-CSRF-Token": other.api_token()}).status_code == 404
    make_user("grace@example.org", roles=("grader",))
    grader = make_client()
    grader.login("grace@example.org")
    # a grader sees a job only through a submitted report that cites it (tests/app/test_grader_access.py): this one
    # is cited by none, so to the grader it does not exist
    assert grader.delete(f"/api/v1/jobs/{job_id}", headers={"X-CSRF-Token": grader.api_token()}).status_code == 404
    assert client.delete(f"/api/v1/jobs/{job_id}").status_code == 403  # no CSRF token
    r = client.delete(f"/api/v1/jobs/{job_id}", headers={"X-CSRF-Token": client.api_token()})
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    again = client.delete(f"/api/v1/jobs/{job_id}", headers={"X-CSRF-Token": client.api_token()})
    assert again.status_code == 200 and again.json()["status"] == "cancelled"  # cancelling twice is harmless
    # the button on the card (htmx) cancels and re-renders the card
    second = _api_submit(client).json()["id"]
    card = client.get(f"/jobs/{second}", headers={"HX-Request": "true"}).text
    assert f'action="/jobs/{second}/cancel"' in card
    r = client.post(f"/jobs/{second}/cancel", headers={"HX-Request": "true"})
    assert r.status_code == 200 and 'data-status="cancelled"' in r.text and "hx-get" not in r.text


def test_cancel_a_finished_job_is_a_conflict(client, db, worker):
    client.register("ann@example.org")
    job_id = _api_submit(client).json()["id"]
    assert worker.run_once()
    r = client.delete(f"/api/v1/jobs/{job_id}", headers={"X-CSRF-Token": client.api_token()})
    assert r.status_code == 409 and "already succeeded" in r.json()["detail"]


def test_the_card_shows_position_and_an_eta_from_recent_runs(client, make_client, db, worker):
    client.register("ann@example.org")
    first = _api_submit(client).json()["id"]
    assert worker.run_once()  # one real run of env-check: the history the ETA is made from
    done = db.get(Job, first)
    seconds = (done.finished_at - done.started_at).total_seconds()
    bob = make_client()
    bob.register("bob@example.org")
    b1 = _api_submit(bob).json()
    b2 = _api_submit(bob).json()
    assert (b1["queue_position"], b2["queue_position"]) == (0, 1)
    assert b2["eta_start_s"] == pytest.approx(seconds, rel=0.05) and b2["eta_done_s"] == pytest.approx(
        2 * seconds, rel=0.05
    )
    assert "last 1 run of env-check of a similar size on cpu" in b2["eta_basis"]
    card = bob.get(f"/jobs/{b2['id']}", headers={"HX-Request": "true"}).text
    assert "1 job ahead of it in the queue" in card and "starts in" in card and 'hx-trigger="every 2s' in card


def test_no_gpu_online_is_said_at_submit_with_the_cpu_and_bundle_offers(settings, db):
    """Ray mode with no GPU node in the dispatcher's snapshot: a GPU backend is refused at submit, naming why, and
    the learner is offered the CPU backend (labeled) or a bundle from their own GPU; the offer's button works."""
    ray_settings = replace(settings, executor="ray")
    db.add(ClusterNode(node_id="cpu-node", hostname="cpu-1", alive=True, resources={"CPU": 4.0}, labels={}))
    db.commit()
    with TestClient(create_app(ray_settings)) as tc:
        c = Browserless(tc)
        c.register("ann@example.org")
        r = _api_submit(c, lab="tp-sweep", params={"degrees": [1, 2]}, backend="torch-cuda")
        assert r.status_code == 422
        assert any(
            "needs a GPU and none is available (no GPU node is online)" in e["message"] for e in r.json()["errors"]
        )
        assert r.json()["offer"]["backend"] == "cpu" and r.json()["offer"]["bundle_upload"] == "/api/v1/bundles"
        form = {"csrf_token": c.csrf("/labs/tp-sweep"), "degrees": ["1", "2"], "degrees__present": "1"}
        page = c.post("/labs/tp-sweep/jobs", data={**form, "backend": "torch-cuda"})
        assert (
            page.status_code == 422
            and 'data-testid="gpu-offline"' in page.text
            and "Run it on CPU instead" in page.text
        )
        assert db.query(Job).count() == 0
        ok = c.post(
            "/labs/tp-sweep/jobs", data={**form, "backend": "torch-cuda", "fallback": "cpu"}, follow_redirects=False
        )
        assert ok.status_code == 303
        job = db.query(Job).one()
        assert (job.backend, job.requested_backend) == ("cpu", "cpu")


def test_in_ray_mode_the_form_checks_memory_against_the_nodes_budgets_not_the_web_hosts(db):
    """Each Ray node enforces its own COURSE_JOB_MEMORY_MB and says so in its `ray start` label: the submit check
    takes the largest budget online, so a 32 GiB GPU node's runs are not refused at the web host's 512 MiB."""
    from app.services.cluster import nodes as cluster

    web = 512 * 2**20
    assert cluster.host_capacity(db, memory_bytes=web).capacity.memory_bytes == web  # no node: the host's own
    db.add(
        ClusterNode(
            node_id="gpu",
            hostname="g",
            alive=True,
            resources={"CPU": 8.0, "GPU": 8.0},
            labels={"course/job_memory_mb": "32768"},
        )
    )
    db.add(ClusterNode(node_id="cpu", hostname="c", alive=True, resources={"CPU": 4.0}, labels={}))
    db.commit()
    assert cluster.host_capacity(db, memory_bytes=web).capacity.memory_bytes == 32768 * 2**20


def test_the_cluster_page_lists_attempts_lost_to_infrastructure(client, prof, db):
    from app.services.jobs import lifecycle as jobs

    page = prof.get("/instructor/cluster").text
    assert 'data-testid="losses-none"' in page and 'data-testid="losses"' not in page
    client.register("ann@example.org")
    job_id = _api_submit(client).json()["id"]
    jobs.claim_next(db, worker_id="vm:1", lease_s=30)
    jobs.record_placement(db, job_id=job_id, worker_id="vm:1", node="gpu-host-2", placement={})
    reason = "its process was stopped from outside the run (SIGKILL), most likely because the machine ran short"
    assert jobs.lost(db, job_id=job_id, worker_id="vm:1", reason=reason) == "queued"
    page = html.unescape(prof.get("/instructor/cluster").text)
    start = page.index('data-testid="losses"')
    table = page[start : page.index("</table>", start)]
    assert "Attempts lost to infrastructure in the last 24 hours: 1 (1 on gpu-host-2)" in table
    assert f'href="/jobs/{job_id}">#{job_id}<' in table and "ann@example.org" in table and reason in table
    assert ">requeued<" in table and "1 of 2" in table
    assert client.get("/instructor/cluster").status_code == 403  # a learner never sees it
