"""The fair queue in the browser (a real server with its embedded worker, real Chromium): the job card's place and
ETA, cancel of a queued and a running job, "no GPU online" with the CPU offer, and a learner's limit set on the
instructor's cluster page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, register, screenshot

pytestmark = pytest.mark.browser


def _submit(page) -> None:
    fold = page.locator("#params-fold")  # once a run exists the form is folded under its result
    if fold.count() and fold.get_attribute("open") is None:
        fold.locator("summary").click()
    page.get_by_role("button", name=re.compile(r"^Run ")).click()


def test_card_shows_place_and_eta_and_cancel_stops_queued_and_running_jobs(page, live_server):
    base = live_server.url
    register(page, base, "queue-eta@example.org")
    page.goto(base + "/labs/env-check")
    _submit(page)
    first = page.locator("article.job").first
    expect(first).to_have_attribute("data-status", "succeeded", timeout=90_000)  # history for the estimate
    page.goto(base + "/labs/fp8-step")
    page.get_by_label("Backend").select_option("cpu")
    _submit(page)
    long_run = page.locator("article.job").first
    expect(long_run).to_have_attribute("data-status", "running", timeout=60_000)
    page.goto(base + "/labs/env-check")
    _submit(page)
    queued = page.locator("article.job").first
    expect(queued).to_have_attribute("data-status", "queued")
    expect(queued.get_by_test_id("queue-position")).to_contain_text("Next in the queue")
    expect(queued.get_by_test_id("eta")).to_contain_text("starts in")
    screenshot(page, "queue-card-eta")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "queue-card-eta-phone")
    page.set_viewport_size({"width": 1280, "height": 900})
    queued.get_by_role("button", name=re.compile(r"^Cancel job")).click()
    expect(page.locator("article.job").first).to_have_attribute("data-status", "cancelled")
    page.goto(base + "/jobs")
    page.get_by_role("link", name=re.compile(r"^#")).nth(1).click()  # the fp8-step run (newest first: cancelled, fp8)
    card = page.locator("article.job")
    expect(card).to_have_attribute("data-status", "running")
    card.get_by_role("button", name=re.compile(r"^Cancel job")).click()
    expect(page.locator("article.job")).to_have_attribute("data-status", "cancelled", timeout=30_000)


def test_no_gpu_online_offers_the_cpu_backend(page, live_server):
    base = live_server.url
    register(page, base, "no-gpu@example.org")
    page.goto(base + "/labs/tp-sweep")
    page.get_by_label("Backend").select_option("torch-cuda")
    _submit(page)
    offer = page.get_by_test_id("gpu-offline")
    expect(offer).to_contain_text("No GPU is online")
    expect(offer).to_contain_text("upload the zipped folder as a bundle")
    screenshot(page, "no-gpu-offer")
    offer.get_by_role("button", name="Run it on CPU instead").click()
    card = page.locator("article.job").first
    expect(card).to_be_visible()
    card.get_by_role("button", name=re.compile(r"^Cancel job")).click()
    expect(page.locator("article.job").first).to_have_attribute("data-status", "cancelled", timeout=30_000)


def test_an_instructor_sets_a_learners_limit_and_the_learner_is_told(browser, page, live_server):
    base = live_server.url
    live_server.cli(
        "users", "create", "--email", "limits-prof@example.org", "--password", "correct horse", "--role", "admin"
    )
    register(page, base, "limited@example.org")
    prof_ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    prof = prof_ctx.new_page()
    try:
        login(prof, base, "limits-prof@example.org")
        prof.goto(base + "/instructor/cluster")
        prof.get_by_label(re.compile("Learner's email")).fill("limited@example.org")
        prof.get_by_label(re.compile("^Jobs in flight")).fill("1")
        prof.get_by_role("button", name="Save limits").click()
        expect(prof.locator("body")).to_contain_text("Learners with their own limits: limited@example.org (1 in flight")
        screenshot(prof, "instructor-cluster")
        page.goto(base + "/labs/fp8-step")
        page.get_by_label("Backend").select_option("cpu")
        _submit(page)
        expect(page.locator("article.job").first).to_be_visible()
        page.get_by_label(re.compile("Replace my queued run")).uncheck()
        _submit(page)
        expect(page.locator("[data-field=limit]")).to_contain_text("limit of jobs in flight (1)")
        screenshot(page, "limit-reached")
        page.locator("article.job").first.get_by_role("button", name=re.compile(r"^Cancel job")).click()
        expect(page.locator("article.job").first).to_have_attribute("data-status", "cancelled", timeout=30_000)
        prof.get_by_label(re.compile("Learner's email")).fill("limited@example.org")
        prof.get_by_role("button", name="Remove this learner's own limits").click()
        expect(prof.locator("body")).not_to_contain_text("Learners with their own limits")
    finally:
        prof_ctx.close()
