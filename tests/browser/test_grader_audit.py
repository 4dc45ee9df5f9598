"""The grader's journey walked as a newcomer, at 1280 px and 390 px and by keyboard alone, and the learner reading
the grade: the friction found there and fixed, each checked in real Chromium against a real server.

Screenshots: test-artifacts/screenshots/audit-*.png."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SIZES, screenshot
from tests.browser.seed import Seeder
from tests.browser.test_lesson_quality import serious_violations
from tests.browser.test_report_grading_tasks import _grader, _submitted

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

GRADER = "gale@example.org"


@pytest.fixture(scope="module")
def seeder(live_server):
    s = Seeder(live_server.data)
    _grader(s, GRADER)
    yield s
    s.close()


@pytest.fixture
def grader_page(open_page):
    """A logged-in grader's page at the size the test asks for (`grader_page(size)`)."""
    return lambda size: open_page(size, GRADER)


def test_queue_on_a_phone_shows_every_column_without_swiping(live_server, seeder, grader_page):
    """At 390 px the queue's nine columns scrolled sideways in their box: status, grader and grade (what a grader
    picks a report by) were off screen. Each report is now one block whose cells name their column."""
    report_id = _submitted(seeder, "quinn@example.org", "Quinn")
    g = grader_page("phone")
    g.goto(f"{live_server.url}/classes/default/grader")
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
    assert serious_violations(g) == []


def test_queue_on_a_laptop_keeps_a_report_link_on_one_line(live_server, seeder, grader_page):
    """At 1280 px the narrow first column broke "Report 1" into two lines."""
    report_id = _submitted(seeder, "audit-laptop@example.org", "Ada Laptop")
    g = grader_page("laptop")
    g.goto(f"{live_server.url}/classes/default/grader")
    link = g.locator(f"tr[data-report='{report_id}']").get_by_role("link", name=f"Report {report_id}")
    lines = link.evaluate("a => a.getClientRects().length")
    assert lines == 1, lines


def _claimed(seeder: Seeder, email: str, name: str) -> int:
    """A submitted report held by GRADER, ungraded; its id."""
    from app.core.models import LabReport, User
    from app.services.grading import grades as grading

    report_id = _submitted(seeder, email, name)
    with seeder.sessions() as db:
        report, grader = db.get(LabReport, report_id), db.query(User).filter_by(email=GRADER).one()
        assert report is not None
        grading.claim(db, report=report, grader=grader)
    return report_id


def _focused_line(pg) -> str:
    return pg.evaluate("() => document.activeElement.closest('.rubric-item')?.dataset.item ?? ''")


@pytest.mark.parametrize("size", SIZES)
def test_keyboard_reaches_the_rubric_and_is_stopped_at_the_first_unscored_line(live_server, seeder, grader_page, size):
    """By keyboard the rubric was ~90 Tab stops down (every evidence item's links and tables), and the j the
    shortcuts offer skipped line 1 when pressed from outside the rubric. Saving with lines unscored went to the
    server and came back at the top of the page (on a phone 20,000 px above the rubric): the browser now refuses
    it where the grader is, on the first line without a level, with nothing typed lost."""
    report_id = _claimed(seeder, f"kit-{size}@example.org", "Kit")
    g = grader_page(size)
    g.goto(f"{live_server.url}/classes/default/grader/reports/{report_id}")
    g.keyboard.press("j")  # from the top of the page: line 1, not line 2
    assert _focused_line(g) == "environment"
    g.goto(f"{live_server.url}/classes/default/grader/reports/{report_id}")
    g.get_by_test_id("to-rubric").focus()
    g.keyboard.press("Enter")
    expect(g.locator("#rubric-h")).to_be_in_viewport()
    for _ in range(2):  # the shortcuts' summary, then line 1
        g.keyboard.press("Tab")
    assert _focused_line(g) == "environment"
    g.keyboard.press("3")
    g.keyboard.press("j")
    g.keyboard.press("2")
    g.keyboard.press("f")
    g.keyboard.type("Half way: timeline next.")
    sent: list[str] = []
    g.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    g.keyboard.press("Control+Enter")
    g.wait_for_function("() => document.activeElement?.closest('.rubric-item')?.dataset.item === 'tp-mapping'")
    assert (
        g.url == f"{live_server.url}/classes/default/grader/reports/{report_id}#rubric-h" and sent == []
    )  # nothing was sent
    assert _focused_line(g) == "tp-mapping"  # the first line left without a level
    message = g.evaluate("document.activeElement.validationMessage")
    assert message == "Pick a level for line 3, “TP rank mapping and parity”, before saving.", message
    expect(g.locator("#grade-total")).to_have_text("4")
    expect(g.locator("#feedback")).to_have_value("Half way: timeline next.")
    screenshot(g, f"audit-unscored-refused-{size}", full_page=False)


def test_a_save_the_server_refuses_for_unscored_lines_lands_on_the_first_of_them(live_server, seeder, grader_page):
    """A client that does not check `required` (here: the attribute taken off, as a script or an old browser would
    send) gets the server's refusal. It came back at the top of the page with the lines named only in a sentence,
    and a digit then picked a level of line 1 (the deferred script never saw the focus land): each unscored line now
    says so, the first has the focus, and digits pick levels of that line."""
    report_id = _claimed(seeder, "lev@example.org", "Lev")
    g = grader_page("laptop")
    g.goto(f"{live_server.url}/classes/default/grader/reports/{report_id}")
    g.locator("#item-environment label.level").nth(2).click()
    g.locator("#feedback").fill("Started.")
    g.evaluate("document.querySelectorAll('#grade-form input[required]').forEach(r => { r.required = false; })")
    g.get_by_role("button", name="Save grade").click()
    expect(g.get_by_test_id("grading-error")).to_contain_text("missing: BF16 vs FP8 numerics")
    assert _focused_line(g) == "numerics"
    expect(g.locator("#item-numerics")).to_contain_text("No level picked: pick one to save the grade.")
    expect(g.locator("fieldset.unscored")).to_have_count(5)
    expect(g.locator("#feedback")).to_have_value("Started.")
    screenshot(g, "audit-unscored-server", full_page=False)
    assert serious_violations(g) == []
    g.keyboard.press("3")
    expect(g.locator("#item-numerics input[value=explained]")).to_be_checked()
    expect(g.locator("#item-environment input[value=complete]")).to_be_checked()  # line 1 untouched
    expect(g.locator("#item-numerics")).not_to_have_class(re.compile(r"\bunscored\b"))
    expect(g.locator("#unscored-numerics")).to_be_hidden()
    expect(g.locator("#grade-total")).to_have_text("6")


def test_an_unclaimed_report_is_claimed_from_the_rubric(live_server, seeder, grader_page):
    """Under an unclaimed report's rubric the foot said "Claim the report (above) to grade it": on a phone the claim
    button was thousands of pixels up, and the page that answered the claim opened at the top again. The foot now
    has the button, and the claimed page opens at the rubric."""
    report_id = _submitted(seeder, "mo@example.org", "Mo")
    g = grader_page("phone")
    g.goto(f"{live_server.url}/classes/default/grader/reports/{report_id}")
    g.get_by_test_id("to-rubric").click()
    claim = g.locator(".grade-foot").get_by_role("button", name="Claim to grade")
    expect(claim).to_be_in_viewport()
    sent: list[str] = []
    g.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    g.keyboard.press("Control+Enter")  # saves a claimed grade; here there is nothing to save, and nothing is sent
    expect(g.get_by_test_id("grading-error")).to_have_count(0)
    assert g.url.endswith(f"/classes/default/grader/reports/{report_id}#rubric-h"), g.url
    claim.click()
    expect(g.locator(".banner[role=status]")).to_contain_text("Claimed")
    assert sent == [f"{live_server.url}/classes/default/grader/reports/{report_id}/claim"], (
        sent
    )  # a save would have come first
    expect(g.locator("#rubric-h")).to_be_in_viewport()
    assert g.url == f"{live_server.url}/classes/default/grader/reports/{report_id}?v=1#rubric-h", g.url
    expect(g.locator("#item-environment input[type=radio]").first).to_be_enabled()
    expect(g.locator(".grade-foot").get_by_role("button", name="Save grade")).to_be_in_viewport()
    screenshot(g, "audit-claimed-from-rubric-phone", full_page=False)
