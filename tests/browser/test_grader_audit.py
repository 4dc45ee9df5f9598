"""The grader's journey walked as a newcomer, at 1280 px and 390 px and by keyboard alone, and the learner reading
the grade: the friction found there and fixed, each checked in real Chromium against a real server.

Screenshots: test-artifacts/screenshots/audit-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.seed import Seeder
from tests.browser.test_report_grading_tasks import SIZES, _grader, _submitted

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

GRADER = "gale@example.org"


@pytest.fixture(scope="module")
def seeder(live_server):
    s = Seeder(live_server.data)
    _grader(s, GRADER)
    yield s
    s.close()


@pytest.fixture
def grader_page(browser, live_server):
    """A logged-in grader's page at the size the test asks for (`grader_page(size)`)."""
    contexts = []

    def make(size: str):
        ctx = browser.new_context(viewport=dict(zip(("width", "height"), SIZES[size])))
        contexts.append(ctx)
        pg = ctx.new_page()
        pg.set_default_timeout(15_000)
        login(pg, live_server.url, GRADER)
        return pg

    yield make
    for ctx in contexts:
        ctx.close()


def test_queue_on_a_phone_shows_every_column_without_swiping(live_server, seeder, grader_page):
    """At 390 px the queue's nine columns scrolled sideways in their box: status, grader and grade (what a grader
    picks a report by) were off screen. Each report is now one block whose cells name their column."""
    report_id = _submitted(seeder, "quinn@example.org", "Quinn")
    g = grader_page("phone")
    g.goto(f"{live_server.url}/grader")
    wrap = g.locator(".table-wrap").filter(has=g.get_by_test_id("queue"))
    widths = wrap.evaluate("w => [w.scrollWidth, w.clientWidth]")
    assert widths[0] <= widths[1], widths  # nothing to swipe for
    row = g.locator(f"tr[data-report='{report_id}']")
    for label in ("Learner", "Status", "Grader", "Grade"):
        cell = row.locator(f"td[data-label='{label}']")
        box = cell.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, (label, box)
    expect(row.locator("td[data-label='Status']")).to_contain_text("submitted")
    # the report's link starts the row: its focus ring (5px out) is not cut off by the scroll box
    link = row.get_by_role("link", name=f"Report {report_id}")
    link.focus()
    link_box, wrap_box = link.bounding_box(), wrap.bounding_box()
    assert link_box and wrap_box and link_box["x"] - wrap_box["x"] >= 5, (link_box, wrap_box)
    screenshot(g, "audit-queue-phone", full_page=False)
