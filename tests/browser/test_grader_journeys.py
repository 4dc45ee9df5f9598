"""The grader's journeys the first audit (test_grader_audit.py) left unwalked, at 1280 px and 390 px: claiming from
the rubric's foot, a learner resubmitting, the instructor's grader assignments and grading without JavaScript. The
friction found there and fixed, each checked in real Chromium against a real server.

Screenshots: test-artifacts/screenshots/journeys-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.seed import Seeder
from tests.browser.test_report_grading_tasks import SIZES, _grader, _submitted

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

GRADER = "journeys-grader@example.org"


@pytest.fixture(scope="module")
def seeder(live_server):
    s = Seeder(live_server.data)
    _grader(s, GRADER)
    yield s
    s.close()


@pytest.fixture
def open_page(browser, live_server):
    """`open_page(size, email, js=True)`: a page logged in as `email` at that size, JavaScript on or off."""
    contexts = []

    def make(size: str, email: str, *, js: bool = True):
        ctx = browser.new_context(viewport=dict(zip(("width", "height"), SIZES[size])), java_script_enabled=js)
        contexts.append(ctx)
        pg = ctx.new_page()
        pg.set_default_timeout(15_000)
        login(pg, live_server.url, email)
        return pg

    yield make
    for ctx in contexts:
        ctx.close()


@pytest.mark.parametrize("size", SIZES)
def test_claiming_from_the_rubric_foot_says_so_at_the_rubric(live_server, seeder, open_page, size):
    """The claim at the rubric's foot answered with a page opened at the rubric and its "Claimed" banner at the top,
    out of view (20,000 px above on a phone, 200 px on a laptop): the grader saw nothing confirm it. The confirmation
    is now shown under the rubric's heading, where the page opens, and is still a status for screen readers."""
    report_id = _submitted(seeder, f"journeys-claim-{size}@example.org", "Cleo")
    g = open_page(size, GRADER)
    g.goto(f"{live_server.url}/grader/reports/{report_id}")
    g.get_by_test_id("to-rubric").click()
    g.locator(".grade-foot").get_by_role("button", name="Claim to grade").click()
    status = g.get_by_role("status").filter(has_text="Claimed: this report is yours to grade.")
    expect(status).to_have_count(1)
    expect(status).to_be_in_viewport()
    expect(g.locator("#rubric-h")).to_be_in_viewport()
    expect(g.locator(".grade-foot").get_by_role("button", name="Save grade")).to_be_in_viewport()
    screenshot(g, f"journeys-claimed-at-rubric-{size}", full_page=False)
    # the claim at the top of the page still answers at the top, where that grader is
    other = _submitted(seeder, f"journeys-claim-top-{size}@example.org", "Tom")
    g.goto(f"{live_server.url}/grader/reports/{other}")
    g.get_by_role("button", name="Claim this report").click()
    status = g.get_by_role("status").filter(has_text="Claimed: this report is yours to grade.")
    expect(status).to_be_in_viewport()
