"""The page's one job-status poll (GET /jobs/live, app/web/views/live_jobs.py): one request per page, however many
cards it shows; an unchanged answer is a 304 after one indexed read; a change brings the cards back out of band;
its interval follows the place and the ETA; another learner's job is never shown."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import event, text

from app.core.models import Job
from app.services.jobs import lifecycle as jobs
from app.services.jobs import queue
from app.services.jobs.labhost import HostCapacity
from app.web.views.live_jobs import POLL_MAX_S, POLL_MIN_S, Follow, Item

HX = {"HX-Request": "true"}
POLLER = re.compile(r'<span id="jobs-live"[^>]*>')


def _submit(client, lab: str = "env-check") -> int:
    r = client.post(f"/labs/{lab}/jobs", data={}, headers=HX)
    assert r.status_code == 201, r.text
    return int(re.search(r'id="job-(\d+)"', r.text).group(1))


def _poller(html: str) -> tuple[int | None, str]:
    """(every how many seconds, If-None-Match) of the page's poll as drawn."""
    tag = POLLER.search(html).group(0)
    every = re.search(r'hx-trigger="every (\d+)s"', tag)
    headers = re.search(r"hx-headers='([^']*)'", tag)
    return (int(every.group(1)) if every else None), (json.loads(headers.group(1))["If-None-Match"] if headers else "")


def _poll(client, etag: str = "", **params):
    return client.get("/jobs/live", params=params, headers={**HX, **({"If-None-Match": etag} if etag else {})})


@pytest.fixture
def ann(client):
    client.register("ann@example.org")
    return client


def test_a_job_page_polls_once_and_an_unchanged_status_is_a_304(ann):
    job_id = _submit(ann)
    page = ann.get(f"/jobs/{job_id}").text
    assert f'<input type="hidden" name="live_job" value="{job_id}">' in page
    assert "every 2s" not in page.split('id="jobs-live"')[0]  # the card no longer polls itself
    every, etag = _poller(page)
    assert every == POLL_MIN_S and etag  # next in line: the shortest interval
    r = _poll(ann, etag, live_job=job_id)
    assert r.status_code == 304 and r.text == "" and r.headers["ETag"] == etag
    assert r.headers["Cache-Control"] == "no-store"


@pytest.mark.both_backends
def test_an_unchanged_status_costs_the_login_and_one_indexed_read(ann, app, db):
    """Pinned: the 304 is the class's most frequent answer while runs wait. The login (one read) and the followed
    jobs by primary key (one read); the queue's snapshot was checked within the second, so nothing else."""
    job_id = _submit(ann)
    etag = _poll(ann, live_job=job_id).headers["ETag"]
    statements: list[str] = []

    def record(conn, cursor, statement, *args):
        statements.append(" ".join(statement.split()))

    event.listen(app.state.engine, "before_cursor_execute", record)
    try:
        assert _poll(ann, etag, live_job=job_id).status_code == 304
    finally:
        event.remove(app.state.engine, "before_cursor_execute", record)
    assert len(statements) == 2, statements
    assert "user_sessions" in statements[0]
    assert statements[1].upper().startswith("SELECT JOBS.ID") and "WHERE jobs.id IN" in statements[1]
    if db.get_bind().dialect.name == "sqlite":  # the read goes by the primary key, not a scan
        plan = db.execute(text(f"EXPLAIN QUERY PLAN SELECT status FROM jobs WHERE id IN ({job_id})")).all()
        assert any("USING INTEGER PRIMARY KEY" in str(row) for row in plan), plan


def test_a_change_brings_the_card_back_with_its_new_place(ann, make_client, db):
    bob = make_client()
    bob.register("bob@example.org")
    first = _submit(bob)
    mine = _submit(ann)
    every, etag = _poller(ann.get(f"/jobs/{mine}").text)
    assert "1 job ahead of it" in ann.get(f"/jobs/{mine}", headers=HX).text
    assert _poll(ann, etag, live_job=mine).status_code == 304
    assert bob.post(f"/jobs/{first}/cancel", headers=HX).status_code == 200  # the job ahead goes
    r = _poll(ann, etag, live_job=mine)
    assert r.status_code == 200 and r.headers["ETag"] != etag
    card = r.text[r.text.index(f'<article class="card job" id="job-{mine}"') :]
    assert 'hx-swap-oob="outerHTML"' in card.split(">")[0] and "Next in the queue" in card
    assert _poller(r.text)[1] == r.headers["ETag"]  # the poll comes back re-timed, with the new ETag
    assert _poll(ann, r.headers["ETag"], live_job=mine).status_code == 304


def test_the_interval_follows_the_place_and_the_eta(ann, make_user, app, db):
    """The next in line is asked about every POLL_MIN_S; a job with a long wait about a tenth of it, at most
    POLL_MAX_S apart."""
    host = HostCapacity.local_default()
    for k in range(12):
        owner = make_user(f"l{k}@example.org")
        jobs.create_job(db, owner=owner, lab="fp8-step", params={}, backend="cpu", host=host)
    mine = _submit(ann)  # nobody has run anything: first come, first served, so twelve runs ahead of it
    est = queue.estimates(db, app.state.settings, [db.get(Job, mine)])[mine]
    assert est.position == 12 and est.start_in_s
    every, _ = _poller(ann.get(f"/jobs/{mine}").text)
    assert every == min(POLL_MAX_S, max(POLL_MIN_S, round(est.start_in_s / 10)))
    assert every > POLL_MIN_S
    first = db.query(Job).order_by(Job.id).first()
    assert Follow.of([Item("card", first, queue.estimates(db, app.state.settings, [first])[first.id])]).interval_s == (
        POLL_MIN_S
    )


def test_another_learners_job_is_never_shown(ann, make_client, db):
    bob = make_client()
    bob.register("bob@example.org")
    theirs = _submit(bob)
    r = _poll(ann, live_job=theirs)
    assert r.status_code == 200 and f'id="job-{theirs}"' not in r.text
    assert "hx-trigger" not in POLLER.search(r.text).group(0)  # nothing of Ann's to follow


def test_an_instructor_follows_a_learners_job_page(ann, make_user, make_client, db):
    job_id = _submit(ann)
    make_user("ida@example.org", roles=("learner", "instructor"))
    ida = make_client()
    ida.login("ida@example.org")
    every, etag = _poller(ida.get(f"/jobs/{job_id}").text)
    assert every and etag
    assert _poll(ida, etag, live_job=job_id).status_code == 304


def test_the_poll_needs_a_login_and_names_a_bad_id(client, ann):
    assert _poll(ann, live_job="x").status_code == 422
    assert "live_job" in _poll(ann, live_job="x").text
    ann.post("/logout")
    assert _poll(ann).status_code == 401


def test_a_page_without_a_job_in_flight_does_not_poll(ann):
    page = ann.get("/lessons/transformer-scaling/orient").text
    assert "hx-trigger" not in POLLER.search(page).group(0)
