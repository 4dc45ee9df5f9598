"""Lab jobs through the pages and the API, executed by a real worker running `python -m labs`."""

import html
import json
import re

import pytest

from app.core.models import Job


def _learner(client, email="ann@example.org"):
    client.register(email)
    return client


def test_env_check_job_end_to_end(client, worker, db):
    _learner(client)
    r = client.post("/labs/env-check/jobs", headers={"HX-Request": "true"})
    assert r.status_code == 201
    assert 'data-status="queued"' in r.text and 'name="live_job" value="' in r.text
    assert '<span id="jobs-live" hidden hx-swap-oob="outerHTML" hx-get="/jobs/live"' in r.text  # the page follows it
    assert worker.run_once()
    job = db.query(Job).one()
    db.refresh(job)
    assert job.status == "succeeded", job.error
    page = client.get(f"/jobs/{job.id}", headers={"HX-Request": "true"}).text
    assert 'data-status="succeeded"' in page and 'name="live_job"' not in page  # nothing left to follow
    assert "CPU emulation" in page and "FP8 recipes" in page
    result = client.get(f"/api/v1/jobs/{job.id}/result").json()
    assert result["lab"] == "env-check" and result["environment"]["backend"] == "cpu"
    assert result["environment"]["emulated"] is True
    raw = client.get(f"/jobs/{job.id}/artifacts/result.json")
    assert raw.headers["content-security-policy"].startswith("default-src 'none'")
    assert json.loads(raw.text)["schema_version"] == 1


def test_api_job_lifecycle_and_errors(client, worker):
    _learner(client)
    headers = {"X-CSRF-Token": client.api_token()}
    r = client.post("/api/v1/jobs", json={"lab": "env-check", "params": {"oops": 1}}, headers=headers)
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "oops"
    r = client.post("/api/v1/jobs", json={"lab": "no-such-lab"}, headers=headers)
    assert r.status_code == 422 and "unknown lab" in r.json()["detail"]
    r = client.post("/api/v1/jobs", content="{not json", headers={**headers, "content-type": "application/json"})
    assert r.status_code == 422
    r = client.post("/api/v1/jobs", json={"lab": "env-check"}, headers=headers)
    job_id = r.json()["id"]
    assert client.get(f"/api/v1/jobs/{job_id}/result").status_code == 409
    worker.run_once()
    status = client.get(f"/api/v1/jobs/{job_id}").json()
    assert status["status"] == "succeeded" and "CPU emulation" in status["label"]
    assert client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/jobs"]


def test_jobs_are_private(client, make_client, worker):
    _learner(client)
    client.post("/labs/env-check/jobs")
    other = make_client()
    other.register("bob@example.org", name="Bob")
    assert other.get("/jobs/1").status_code == 404
    assert other.get("/api/v1/jobs/1").status_code == 404
    assert other.get("/jobs/1/artifacts/result.json").status_code == 404
    assert other.get("/api/v1/jobs").json() == []
    assert other.get("/jobs/999999").status_code == 404


def test_unknown_lab_page_is_404(client):
    _learner(client)
    r = client.get("/labs/warp-drive")
    assert r.status_code == 404 and "no lab called" in r.text
    assert client.post("/labs/warp-drive/jobs").status_code == 404


def test_failed_lab_reports_a_reason(client, db, settings):
    """A lab that cannot start fails with a readable reason instead of crashing the worker.

    The worker's own fault (here its interpreter is missing) is infrastructure: the attempt is requeued, and
    after the last attempt the job fails saying so, nothing charged to the learner."""
    from dataclasses import replace

    from app.executors.embedded import Worker

    _learner(client)
    client.post("/labs/env-check/jobs")
    broken = Worker(replace(settings, python="/nonexistent/python"), worker_id="broken")
    assert broken.run_once()
    assert db.query(Job).one().status == "queued"
    assert broken.run_once()  # the second and last attempt
    broken.engine.dispose()
    job = db.query(Job).one()
    db.refresh(job)
    assert job.status == "failed" and "could not start the lab" in job.error and "infrastructure" in job.error
    assert job.gpu_seconds == 0
    page = client.get(f"/jobs/{job.id}").text
    assert "could not start the lab" in page


@pytest.mark.both_backends
def test_huge_ids_are_a_422_not_a_database_overflow(client):
    """Found by schemathesis against /api/v1/openapi.json: ids beyond 32 bits reached the database."""
    _learner(client)
    big = 82559345522661187601301504
    for path in (
        f"/api/v1/jobs/{big}",
        f"/api/v1/jobs/{big}/result",
        f"/api/v1/jobs/-{big}/artifacts/x",
        f"/jobs/{big}",
        f"/lessons/transformer-scaling/orient?v={big}",
    ):
        r = client.get(path)
        assert r.status_code == 422, (path, r.status_code)
    r = client.post("/lessons/transformer-scaling/questions/format-roles", {"answer": "x", "version": str(big)})
    assert r.status_code == 422


def test_the_labs_index_says_what_each_lab_answers_and_shows_only_the_learners_latest_run(client, make_client, db):
    """No worker: a queued job is the latest run as much as a finished one."""
    from labs import catalog

    _learner(client)
    other = make_client()
    other.register("bob@example.org", name="Bob")
    assert other.post("/labs/fp8-step/jobs", headers={"HX-Request": "true"}).status_code == 201
    page = client.get("/labs").text
    for spec in catalog.LABS.values():
        start = page.index(f'data-lab="{spec.name}"')
        card = page[start : page.index("</li>", start)]
        assert spec.question in card and "You have not run it yet." in card  # Bob's run is not Ann's
        assert f'python -m labs run <span class="keep">{spec.name}</span>' in card
    assert 'href="/lessons/transformer-scaling/lab">Lesson 06 · Transformer Scaling' in page
    client.post("/labs/env-check/jobs")
    client.post("/labs/env-check/jobs")
    newest = db.query(Job).filter(Job.lab == "env-check").order_by(Job.id.desc()).first()
    page = client.get("/labs").text
    start = page.index('data-lab="env-check"')
    card = page[start : page.index("</li>", start)]
    assert f'Your latest run: <a href="/jobs/{newest.id}">#{newest.id}</a>' in card
    assert 'class="status status-queued">queued<' in card
    start = page.index('data-lab="fp8-step"')
    assert "You have not run it yet." in page[start : page.index("</li>", start)]


def test_the_jobs_card_says_what_was_lost_on_the_way_and_that_it_is_not_counted(client, db):
    """The requeue message is gone once attempt 2 starts; the card keeps saying what happened to attempt 1."""
    import html
    import signal

    from app.core.models import User
    from app.executors.labproc import signal_outcome
    from app.services.jobs import lifecycle as jobs
    from app.services.jobs.labhost import HostCapacity

    _learner(client)
    ann = db.query(User).filter(User.email == "ann@example.org").one()
    job = jobs.create_job(db, owner=ann, lab="env-check", params={}, backend="cpu", host=HostCapacity.local_default())
    jobs.claim_next(db, worker_id="vm:7", lease_s=30)
    jobs.record_placement(db, job_id=job.id, worker_id="vm:7", node="gpu-host-2", placement={})
    jobs.lost(db, job_id=job.id, worker_id="vm:7", reason=signal_outcome(signal.SIGKILL).error)
    assert 'data-testid="lost-attempt"' not in client.get(f"/jobs/{job.id}").text  # queued: its message says it
    jobs.claim_next(db, worker_id="vm:8", lease_s=30)
    card = html.unescape(client.get(f"/jobs/{job.id}").text)
    said = "Attempt 1 was lost to the course's infrastructure: its process was stopped from outside the run (SIGKILL)"
    assert said in card and "The job went back to the queue; it is not counted against you." in card
    assert said in html.unescape(client.get("/labs/env-check").text)  # the latest run's card on the lab page too


def _section(page: str, start_marker: str, end_marker: str) -> str:
    start = page.index(start_marker)
    return page[start : page.index(end_marker, start)]


def _ann_and_host(db):
    from app.core.models import User
    from app.services.jobs.labhost import HostCapacity

    return db.query(User).filter(User.email == "ann@example.org").one(), HostCapacity.local_default()


def test_a_lab_page_keeps_the_last_result_in_full_when_newer_runs_were_cancelled(client, db, worker):
    """The audit's case: a success, then a run cancelled while running and one cancelled while queued. The newest
    card still comes first, the success stays in full under it (not a line among the earlier runs), and each
    cancelled card says how it was cancelled instead of 'Cancelled: cancelled.'."""
    import html

    from app.services.jobs import lifecycle as jobs

    _learner(client)
    assert client.post("/labs/env-check/jobs", headers={"HX-Request": "true"}).status_code == 201
    assert worker.run_once()
    good = db.query(Job).one()
    db.refresh(good)
    assert good.status == "succeeded", good.error
    page = client.get("/labs/env-check").text
    assert 'id="last-result"' not in page  # the newest run is the success: it is the latest run, shown once
    assert f'id="job-{good.id}"' in _section(page, 'id="job-list"', 'id="lab-history"')

    ann, host = _ann_and_host(db)
    stopped = jobs.create_job(db, owner=ann, lab="env-check", params={}, backend="cpu", host=host)
    jobs.claim_next(db, worker_id="vm:1", lease_s=30)
    jobs.heartbeat(db, job_id=stopped.id, worker_id="vm:1", lease_s=30, progress=jobs.Progress(0.4, "step 2 of 5"))
    assert client.post(f"/jobs/{stopped.id}/cancel", follow_redirects=False).status_code == 303
    assert jobs.finish(db, job_id=stopped.id, worker_id="vm:1", ok=False, message="cancelled", status="cancelled")
    queued = jobs.create_job(db, owner=ann, lab="env-check", params={}, backend="cpu", host=host)
    assert client.post(f"/jobs/{queued.id}/cancel", follow_redirects=False).status_code == 303

    page = html.unescape(client.get("/labs/env-check").text)
    latest = _section(page, 'id="job-list"', 'id="lab-history"')
    assert f'id="job-{queued.id}"' in latest and 'data-status="cancelled"' in latest
    assert "Cancelled by you before it started." in latest and "Cancelled: " not in latest
    last = _section(page, 'id="last-result"', "</section>")
    assert f"Your last finished result: run #{good.id}" in last
    assert f'id="job-{good.id}"' in last and 'data-status="succeeded"' in last
    assert "CPU emulation" in last  # the result itself, not a line
    earlier = _section(page, 'id="earlier-runs"', "</section>")
    assert f'data-job="{stopped.id}"' in earlier and f'data-job="{good.id}"' not in earlier
    stopped_card = html.unescape(client.get(f"/jobs/{stopped.id}").text)
    assert "Cancelled while running, after " in stopped_card and "(40% done)" in stopped_card
    assert "Cancelled: cancelled." not in stopped_card
    # the fragment htmx refreshes after a submission carries the last result too
    fragment = client.get("/labs/env-check/runs", headers={"HX-Request": "true"}).text
    assert fragment.lstrip().startswith('<div id="lab-history"') and f'id="job-{good.id}"' in fragment


def test_a_run_in_flight_shows_first_and_the_last_result_under_it(client, db, worker):
    """A queued run is the latest run (its card followed by the page's poll, with its place in the queue); the
    last success stays in full; when the poll sees its run finish, the card comes back finished and the lab page
    is told to refresh its history."""
    _learner(client)
    client.post("/labs/env-check/jobs")
    assert worker.run_once()
    good = db.query(Job).one()
    r = client.post("/labs/env-check/jobs", headers={"HX-Request": "true"})
    assert r.status_code == 201
    newer = db.query(Job).order_by(Job.id.desc()).first()
    page = client.get("/labs/env-check").text
    latest = _section(page, 'id="job-list"', 'id="lab-history"')
    assert f'id="job-{newer.id}"' in latest and 'data-testid="queue-position"' in latest
    assert f'id="job-{good.id}"' in _section(page, 'id="last-result"', "</section>")
    polled = client.get(f"/jobs/{newer.id}", headers={"HX-Request": "true"})
    assert "HX-Trigger" not in polled.headers  # still queued: nothing changed on the lab page
    live = client.get("/jobs/live", params={"live_job": newer.id}, headers={"HX-Request": "true"})
    assert "HX-Trigger" not in live.headers and 'hx-trigger="every' in live.text
    assert worker.run_once()
    live = client.get("/jobs/live", params={"live_job": newer.id}, headers={"HX-Request": "true"})
    card = _section(live.text, f'<article class="card job" id="job-{newer.id}"', "</article>")
    assert 'data-status="succeeded"' in card and 'hx-swap-oob="outerHTML"' in card
    assert live.headers["HX-Trigger"] == "lab-runs-changed"
    assert 'hx-trigger="every' not in _section(live.text, '<span id="jobs-live"', "</span>")  # nothing left
    polled = client.get(f"/jobs/{newer.id}", headers={"HX-Request": "true"})
    assert 'data-status="succeeded"' in polled.text and polled.headers["HX-Trigger"] == "lab-runs-changed"
    page = client.get("/labs/env-check").text
    assert 'id="last-result"' not in page
    assert f'data-job="{good.id}"' in _section(page, 'id="earlier-runs"', "</section>")


def test_the_jobs_list_shows_queue_places_cancels_and_polls_only_while_a_job_is_in_flight(client, db):
    """No worker: the jobs stay queued until cancelled from the list."""
    import html

    _learner(client)
    client.post("/labs/env-check/jobs")
    client.post("/labs/env-check/jobs")
    first, second = (j.id for j in db.query(Job).order_by(Job.id))
    page = html.unescape(client.get("/jobs").text)
    box = _section(page, '<div id="jobs"', ">")
    assert 'hx-get="/jobs"' in box and 'hx-trigger="jobs-changed from:body"' in box and 'hx-select="#jobs"' in box
    rows = {j: _section(page, f'<tr data-job="{j}"', "</tr>") for j in (first, second)}
    assert all(f'name="live_row" value="{j}"' in row for j, row in rows.items())  # followed by the page's poll
    live = client.get("/jobs/live", params={"live_row": [first, second]}, headers={"HX-Request": "true"})
    assert live.headers["HX-Trigger"] == "jobs-changed"  # a first poll: the list asks for itself
    again = client.get(
        "/jobs/live",
        params={"live_row": [first, second]},
        headers={"HX-Request": "true", "If-None-Match": live.headers["ETag"]},
    )
    assert again.status_code == 304
    assert 'data-testid="queue-position">next<' in rows[first]
    assert 'data-testid="queue-position">1 ahead<' in rows[second]
    assert 'data-testid="eta">starts in under a minute<' in rows[first]  # the lab's cost model: no run needed
    for j, row in rows.items():
        assert f'action="/jobs/{j}/cancel"' in row and 'name="csrf_token" value="' in row
        assert 'name="next" value="/jobs"' in row and f">Cancel #{j}</button>" in row
    # the poll asks for the list alone
    fragment = client.get("/jobs", headers={"HX-Request": "true"}).text
    assert fragment.lstrip().startswith('<div id="jobs"') and "<html" not in fragment
    # without the form's token the cancel is refused
    r = client.client.post(f"/jobs/{second}/cancel", data={"next": "/jobs"}, follow_redirects=False)
    assert r.status_code == 403 and db.get(Job, second).status == "queued"
    # the list's button cancels and comes back to the list, with or without htmx
    r = client.post(f"/jobs/{second}/cancel", {"next": "/jobs"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/jobs"
    db.expire_all()
    assert db.get(Job, second).status == "cancelled"
    r = client.post(f"/jobs/{first}/cancel", {"next": "/jobs"}, headers={"HX-Request": "true"})
    assert r.status_code == 200 and r.text.lstrip().startswith('<div id="jobs"')
    db.expire_all()
    assert db.get(Job, first).status == "cancelled"
    # nothing in flight: no polling, no buttons
    page = client.get("/jobs").text
    assert _section(page, '<div id="jobs"', ">") == '<div id="jobs"' and "/cancel" not in page
    assert 'name="live_row"' not in page and 'hx-get="/jobs/live"' not in page
    assert "Cancelled by you" not in page  # the list is one line per job; the card says how
    # next= only ever leads back to the list
    client.post("/labs/env-check/jobs")
    third = db.query(Job).order_by(Job.id.desc()).first().id
    r = client.post(f"/jobs/{third}/cancel", {"next": "https://evil.example/"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/jobs/{third}"


def test_the_jobs_list_shows_a_running_jobs_time_so_far(client, db):
    from app.services.jobs import lifecycle as jobs

    _learner(client)
    ann, host = _ann_and_host(db)
    job = jobs.create_job(db, owner=ann, lab="env-check", params={}, backend="cpu", host=host)
    jobs.claim_next(db, worker_id="vm:1", lease_s=30)
    page = client.get("/jobs").text
    row = _section(page, f'<tr data-job="{job.id}"', "</tr>")
    assert 'data-status="running"' in row and " so far" in row and f">Cancel #{job.id}</button>" in row
    assert f'name="live_row" value="{job.id}"' in row and 'hx-get="/jobs/live"' in page
    assert client.post(f"/jobs/{job.id}/cancel", {"next": "/jobs"}, follow_redirects=False).status_code == 303
    row = _section(client.get("/jobs").text, f'<tr data-job="{job.id}"', "</tr>")
    assert "Stopping…" in row and "disabled" in row  # asked; the worker stops it within a heartbeat


def test_the_lessons_lab_part_keeps_the_last_good_check_under_a_cancelled_one(client, db, worker):
    """The lesson's lab part shows the newest env-check and, when that one was cancelled, the last one that
    finished under it (as /labs/<lab> does), not only "cancelled"."""
    import html

    from app.services.jobs import lifecycle as jobs

    _learner(client)
    assert client.post("/labs/env-check/jobs", headers={"HX-Request": "true"}).status_code == 201
    assert worker.run_once()
    good = db.query(Job).one()
    ann, host = _ann_and_host(db)
    queued = jobs.create_job(db, owner=ann, lab="env-check", params={}, backend="cpu", host=host)
    assert client.post(f"/jobs/{queued.id}/cancel", follow_redirects=False).status_code == 303

    page = html.unescape(client.get("/lessons/transformer-scaling/lab").text)
    checks = _section(page, 'id="env-check-result"', "</section>")
    assert f'id="job-{queued.id}"' in checks and 'data-status="cancelled"' in checks
    assert f"Your last finished check: run #{good.id}" in checks
    assert f'id="job-{good.id}"' in checks and 'data-status="succeeded"' in checks
    assert checks.index(f'id="job-{queued.id}"') < checks.index(f'id="job-{good.id}"')


def test_a_run_its_cost_model_prices_past_the_time_limit_is_refused_at_submit(client, db):
    """A collectives run its own cost model prices at ~950 s was queued against a 600 s limit, to hold a worker
    until the limit killed it. Now the API and the form refuse it naming the arithmetic and what to change: the
    error's field is the parameter of the first suggestion, the one that changes least (labs/timebudget.py)."""
    client.register("ann@example.org")
    over = {"max_bytes": 94_284_223, "warmup": 2}
    r = client.post(
        "/api/v1/jobs",
        json={"lab": "collectives", "params": over, "backend": "cpu"},
        headers={"X-CSRF-Token": client.api_token()},
    )
    assert r.status_code == 422, r.text
    (error,) = r.json()["errors"]
    assert error["field"] == "max_bytes"
    assert "this run is estimated at about 16 min on the cpu backend (the lab's cost model)" in error["message"]
    assert "past the course's time limit of 10 min 00 s for one job" in error["message"]
    assert re.search(r"\(9\d\d s > 600 s\)", error["message"]), error["message"]
    fixes = re.findall(r"(?:lower|raise) (\w+) to \d+ or (?:less|more)", error["message"])
    assert fixes[:2] == ["max_bytes", "link_mbit"], error["message"]
    form = {"max_bytes": str(over["max_bytes"]), "warmup": "2", "backend": "cpu"}
    page = client.post("/labs/collectives/jobs", data=form, headers={"HX-Request": "true"})
    assert page.status_code == 422 and "past the course's time limit" in html.unescape(page.text)
    assert db.query(Job).count() == 0
    ok = client.post(
        "/api/v1/jobs", json={"lab": "collectives", "backend": "cpu"}, headers={"X-CSRF-Token": client.api_token()}
    )
    assert ok.status_code == 201, ok.text  # the default run fits
