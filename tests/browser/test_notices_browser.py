"""A finished job and a new grade are announced on whatever page the learner is on."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.pages import (
    LEARNER,
    LESSON,
    context_at,
)
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


def test_a_finished_job_is_announced_on_another_page(browser, live_server):
    """The page the learner reads on follows the run they started only for its notice, through its one job-status
    poll: the answer that sees the run finished brings the notice, and nothing else asks for notices meanwhile."""
    ctx = context_at(browser, 390, 844)
    page = ctx.new_page()
    Seeder(live_server.data).user("waiter@example.org")
    login(page, live_server.url, "waiter@example.org")
    page.goto(f"{live_server.url}/labs/env-check")
    page.get_by_role("button", name="Run env-check").click()
    card = page.locator("#job-list article.job")
    expect(card).to_have_count(1)
    job_id = card.get_attribute("id").removeprefix("job-")
    asked: list = []
    page.on("response", lambda r: asked.append(r) if urlparse(r.url).path in ("/jobs/live", "/notices") else None)
    page.goto(f"{live_server.url}/lessons/{LESSON}/orient")  # the learner reads on while it runs
    expect(page.locator("#jobs-live")).to_have_attribute("hx-trigger", re.compile(r"every \d+s"))
    notice = page.locator("#notices .notice")
    # a few seconds of env-check on the server's one worker, then at most one of the poll's intervals
    expect(notice).to_contain_text(f"Your env-check run (job {job_id}) finished.", timeout=60_000)
    told = [r for r in asked if r.status == 200 and f"(job {job_id}) finished" in r.text()]
    assert [urlparse(r.url).path for r in told] == ["/jobs/live"], [(r.url, r.status) for r in asked]
    assert all(urlparse(r.url).path == "/jobs/live" for r in asked), [r.url for r in asked]
    screenshot(page, "polish-notice-job-phone390")
    notice.get_by_role("link", name="See the result").click()
    expect(page.get_by_test_id("result-answer")).to_be_visible()
    expect(page.locator("#notices .notice")).to_have_count(0)  # seen: not announced again
    ctx.close()


def test_a_new_grade_is_announced_and_links_to_it(browser, live_server, seeded):
    ctx = context_at(browser, 1280, 900)
    page = ctx.new_page()
    login(page, live_server.url, LEARNER)  # a fresh session asks once whether a grade arrived
    notice = page.locator("#notices .notice-grade")
    expect(notice).to_contain_text("was graded: 16 / 20")
    screenshot(page, "polish-notice-grade-laptop")
    notice.get_by_role("link").click()
    expect(page).to_have_url(re.compile(f"/lessons/{LESSON}/report\\?v=1#version-1$"))
    expect(page.locator("#version-1").get_by_test_id("grade")).to_contain_text("16 / 20")
    feedback = page.locator("#version-1 .grade-feedback")
    assert feedback.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"  # the grader's line breaks
    ctx.close()
