"""In real Chromium against a live server: a lab page keeps the last result in full under a newer cancelled run,
and the /jobs list shows a running job's Cancel button, refreshes itself until nothing is in flight, then stops.

The jobs are planted in the database (tests/browser/seed.py): a "running" one held by a worker that does not exist
(its lease far off, so the live server's own worker neither claims nor reaps it), finished here as its worker
would finish it. Screenshots: test-artifacts/screenshots/jobs-*.png."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests.app import labruns
from tests.browser.conftest import login, screenshot
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser


def _overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def _plant(s: Seeder, owner_id: int, **values) -> int:
    from app.core.models import Job, utcnow

    now = utcnow()
    with s.sessions() as db:
        job = Job(
            owner_id=owner_id,
            lab="env-check",
            params=labruns.TINY["env-check"],
            backend="cpu",
            queue="cpu",
            attempts=1,
            created_at=now - timedelta(seconds=30),
            started_at=now - timedelta(seconds=25),
            **values,
        )
        db.add(job)
        db.commit()
        return job.id


def _update(s: Seeder, job_id: int, **values) -> None:
    from app.core.models import Job

    with s.sessions() as db:
        job = db.get(Job, job_id)
        assert job is not None
        for k, v in values.items():
            setattr(job, k, v)
        db.commit()


@pytest.mark.parametrize("width,height,name", [(1280, 900, "laptop"), (390, 844, "phone390")])
def test_a_cancelled_newer_run_keeps_the_last_result_in_full(browser, live_server, width, height, name):
    from app.core.models import utcnow

    s = Seeder(live_server.data)
    email = f"last-result-{name}@example.org"
    uid = s.user(email, name="Lara")
    good = s.job(uid, "env-check")
    now = utcnow()
    stopped = _plant(
        s,
        uid,
        status="cancelled",
        message="cancelled",
        progress=0.4,
        cancel_requested_at=now - timedelta(seconds=13),
        finished_at=now - timedelta(seconds=12),
    )
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    login(page, live_server.url, email)
    page.goto(f"{live_server.url}/labs/env-check")
    latest = page.locator("#job-list article.job")
    expect(latest).to_have_count(1)
    expect(latest).to_have_attribute("id", f"job-{stopped}")
    expect(latest.get_by_test_id("cancelled-how")).to_contain_text("Cancelled while running, after 12 s (40% done)")
    last = page.locator("#last-result")
    expect(last.get_by_role("heading", level=2).first).to_have_text(f"Your last finished result: run #{good}")
    expect(last.locator("article.job")).to_have_attribute("data-status", "succeeded")
    expect(last.get_by_test_id("result-answer")).to_be_visible()
    expect(page.locator(f'#earlier-runs tr[data-job="{good}"]')).to_have_count(0)
    assert _overflow(page) <= 1
    screenshot(page, f"jobs-lab-last-result-{name}")
    ctx.close()


@pytest.mark.parametrize("width,height,name", [(1280, 900, "laptop"), (390, 844, "phone390")])
def test_the_jobs_list_cancels_a_running_job_and_refreshes_itself_until_it_stops(
    browser, live_server, width, height, name
):
    from app.core.models import utcnow

    s = Seeder(live_server.data)
    email = f"jobs-list-{name}@example.org"
    uid = s.user(email, name="Lee")
    s.job(uid, "env-check")
    running = _plant(
        s,
        uid,
        status="running",
        message="step 1 of 3",
        progress=0.3,
        worker_id="elsewhere",
        lease_expires_at=utcnow() + timedelta(minutes=10),
    )
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    login(page, live_server.url, email)
    page.goto(f"{live_server.url}/jobs")
    row = page.locator(f'#jobs tr[data-job="{running}"]')
    expect(row).to_have_attribute("data-status", "running")
    expect(row).to_contain_text("so far")
    assert _overflow(page) <= 1
    screenshot(page, f"jobs-list-running-{name}")
    row.get_by_role("button", name=f"Cancel #{running}").click()
    expect(row.get_by_role("button", name="Stopping…")).to_be_disabled()
    page.wait_for_url(f"{live_server.url}/jobs")  # htmx swapped the list in place; no navigation to the job
    # its worker stops it: the list sees it on its own, without a reload, then stops asking
    _update(s, running, status="cancelled", message="cancelled", finished_at=utcnow())
    expect(row).to_have_attribute("data-status", "cancelled", timeout=10_000)
    expect(page.locator("#jobs-live")).not_to_have_attribute("hx-trigger", re.compile("every"))  # the poll stops
    expect(row.get_by_role("button")).to_have_count(0)
    screenshot(page, f"jobs-list-cancelled-{name}")
    ctx.close()


@pytest.mark.parametrize("width,height,name", [(1280, 800, "laptop"), (390, 844, "phone390")])
@pytest.mark.parametrize("before", ["first-run", "again"])
def test_a_submitted_run_comes_into_view_where_the_form_was(browser, live_server, width, height, name, before):
    """Before a first run the form comes first and "Latest run" below it; after one, the result comes first and the
    form folds under it. Either way the learner is at the Run button when they press it, and the new run's card is
    what the screen shows next, not something below or above the fold."""
    s = Seeder(live_server.data)
    email = f"submit-{before}-{name}@example.org"
    uid = s.user(email, name="Sam")
    if before == "again":
        s.job(uid, "env-check")
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    login(page, live_server.url, email)
    page.goto(f"{live_server.url}/labs/env-check")
    if before == "again":
        page.locator("#params-fold > summary").click()
    page.locator("#lab-run").scroll_into_view_if_needed()
    page.locator("#lab-run").click()
    card = page.locator("#job-list article.job")
    expect(card).to_have_count(1)
    expect(card).to_have_attribute("data-status", re.compile("queued|running|succeeded"))
    in_view = "e => { const t = e.getBoundingClientRect().top; return t >= 0 && t < innerHeight / 2; }"
    for _ in range(20):  # htmx scrolls right after the swap; give it a few frames
        if card.evaluate(in_view):
            break
        page.wait_for_timeout(50)
    top = card.evaluate("e => e.getBoundingClientRect().top")
    assert 0 <= top < height / 2, f"the new run's card starts at {top:.0f}px of a {height}px screen"
    screenshot(page, f"jobs-submitted-{before}-{name}", full_page=False)
    ctx.close()
