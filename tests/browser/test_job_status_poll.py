"""The page's one job-status poll in real Chromium (templates/jobs/_live.html): htmx sends the ETag it was given as
If-None-Match, a 304 leaves the page alone, and a change comes back into the card without a reload."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser


def _plant_waiting(s: Seeder, owner_id: int) -> int:
    """A queued run for a queue no worker of this server takes (a lab host elsewhere): it stays queued."""
    from app.core.models import Job, utcnow

    with s.sessions() as db:
        job = Job(
            owner_id=owner_id,
            lab="env-check",
            params={},
            backend="cpu",
            queue="elsewhere",
            status="queued",
            message="waiting for a worker",
            created_at=utcnow() - timedelta(seconds=5),
        )
        db.add(job)
        db.commit()
        return job.id


def test_an_unchanged_card_is_a_304_and_a_change_comes_into_the_card(browser, live_server):
    s = Seeder(live_server.data)
    email = "poll-304@example.org"
    job_id = _plant_waiting(s, s.user(email, name="Pat"))
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    login(page, live_server.url, email)
    answers: list = []
    page.on("response", lambda r: answers.append(r) if "/jobs/live" in r.url else None)
    page.goto(f"{live_server.url}/jobs/{job_id}")
    card = page.locator(f"#job-{job_id}")
    expect(card).to_have_attribute("data-status", "queued")
    expect(card.get_by_test_id("queue-position")).to_contain_text("Next in the queue")
    page.wait_for_timeout(5_000)  # two polls or so
    assert answers and all(a.status == 304 for a in answers), [a.status for a in answers]
    assert all(re.fullmatch(r'"[0-9a-f]+"', a.request.headers.get("if-none-match", "")) for a in answers)
    assert all(f"live_job={job_id}" in a.url for a in answers)
    screenshot(page, "job-card-queued-followed")
    with s.sessions() as db:
        from app.core.models import Job, utcnow

        job = db.get(Job, job_id)
        job.status, job.message, job.finished_at = "cancelled", "cancelled by an instructor before it started", utcnow()
        db.commit()
    expect(card).to_have_attribute("data-status", "cancelled", timeout=10_000)
    expect(card).to_contain_text("Cancelled by an instructor before it started")
    expect(page.locator("#jobs-live")).not_to_have_attribute("hx-trigger", re.compile("every"))  # nothing left
    assert any(a.status == 200 for a in answers)
    ctx.close()
    s.close()
