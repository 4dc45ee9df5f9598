"""The grader's journeys the first audit (test_grader_audit.py) left unwalked, at 1280 px and 390 px: claiming from
the rubric's foot, a learner resubmitting, the instructor's grader assignments and grading without JavaScript. The
friction found there and fixed, each checked in real Chromium against a real server.

Screenshots: test-artifacts/screenshots/journeys-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SIZES, screenshot
from tests.browser.seed import Seeder
from tests.browser.test_report_grading_tasks import _grader, _submitted

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

GRADER = "journeys-grader@example.org"


@pytest.fixture(scope="module")
def seeder(live_server):
    s = Seeder(live_server.data)
    _grader(s, GRADER)
    yield s
    s.close()


@pytest.mark.parametrize("size", SIZES)
def test_claiming_from_the_rubric_foot_says_so_at_the_rubric(live_server, seeder, open_page, size):
    """The claim at the rubric's foot answered with a page opened at the rubric and its "Claimed" banner at the top,
    out of view (20,000 px above on a phone, 200 px on a laptop): the grader saw nothing confirm it. The confirmation
    is now shown under the rubric's heading, where the page opens, and is still a status for screen readers."""
    report_id = _submitted(seeder, f"journeys-claim-{size}@example.org", "Cleo")
    g = open_page(size, GRADER)
    g.goto(f"{live_server.url}/classes/default/grader/reports/{report_id}")
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
    g.goto(f"{live_server.url}/classes/default/grader/reports/{other}")
    g.get_by_role("button", name="Claim this report").click()
    status = g.get_by_role("status").filter(has_text="Claimed: this report is yours to grade.")
    expect(status).to_be_in_viewport()


LINES = ("environment", "numerics", "tp-mapping", "timeline", "reasoning", "stretch")


@pytest.mark.parametrize("size", SIZES)
def test_grading_without_javascript(live_server, seeder, open_page, size):
    """Claim, score every line, save and read the result with JavaScript off. A save the server refused kept the
    picks and the feedback but said "Total: 0 / 20" with five lines scored: nothing recounts it without JavaScript,
    so the page now comes with the total of the picks it kept."""
    report_id = _submitted(seeder, f"journeys-nojs-{size}@example.org", "Noor")
    g = open_page(size, GRADER, js=False)
    g.goto(f"{live_server.url}/classes/default/grader/reports/{report_id}")
    g.get_by_test_id("to-rubric").click()
    g.locator(".grade-foot").get_by_role("button", name="Claim to grade").click()
    expect(g.get_by_role("status").filter(has_text="Claimed")).to_be_in_viewport()
    for line in LINES[:-1]:
        g.locator(f"#item-{line} input[type=radio]").last.check()  # the top level of each: 2+4+3+4+4 = 17
    g.locator("#feedback").fill("Typed without JavaScript.")
    posted = g.url
    saves: list[str] = []
    g.on("request", lambda r: saves.append(r.url) if r.method == "POST" else None)
    g.get_by_role("button", name="Save grade").click()  # the last line has no level: the browser keeps the form
    # the browser's own check answers by focusing the first control it refused
    g.wait_for_function("() => document.activeElement?.matches('#grade-form input:invalid')")
    assert g.url == posted and saves == []
    # a client that does not check `required` is refused by the server, with everything kept
    g.evaluate("document.querySelectorAll('#grade-form input[required]').forEach(r => { r.required = false; })")
    g.get_by_role("button", name="Save grade").click()
    expect(g.get_by_test_id("grading-error")).to_contain_text("missing: Stretch sweep (over-sharding)")
    assert len(saves) == 1  # this save, and not the one the browser stopped
    expect(g.locator("#feedback")).to_have_value("Typed without JavaScript.")
    expect(g.locator("#item-timeline input[type=radio]").last).to_be_checked()
    expect(g.locator("#grade-total")).to_have_text("17")
    screenshot(g, f"journeys-nojs-refused-{size}", full_page=False)
    g.locator("#item-stretch input[type=radio]").last.check()
    g.get_by_role("button", name="Save grade").click()
    expect(g.get_by_role("status").filter(has_text="Grade saved")).to_be_in_viewport()
    expect(g.locator("#grade-total")).to_have_text("20")
    expect(g.locator("#feedback")).to_have_value("Typed without JavaScript.")
    screenshot(g, f"journeys-nojs-saved-{size}", full_page=False)


@pytest.mark.parametrize("size", SIZES)
def test_assigning_graders_answers_at_the_form(live_server, seeder, open_page, size):
    """The instructor's assign form sits under the queue; its answer was a banner at the top of the page (out of view
    on a phone once a few reports are queued), naming the fields `email:` and `lesson_id:`, with the typed email
    gone. The page now opens at the form with the answer there; a refused email is kept and marked; and assigning no
    longer filters the queue by that lesson."""
    prof = f"journeys-prof-{size}@example.org"
    seeder.user(prof, roles=("instructor",), name="Prof")
    ta = f"journeys-ta-{size}@example.org"
    seeder.user(ta, roles=("grader",), name="TA")
    _submitted(seeder, f"journeys-assign-{size}@example.org", "Ari")  # a queue above the form
    p = open_page(size, prof)
    p.goto(f"{live_server.url}/classes/default/grader")
    typo = f"journeys-tA-{size}@exmaple.org"
    p.get_by_label("Grader's email").fill(typo)
    p.get_by_role("button", name="Assign", exact=True).click()
    note = p.get_by_role("alert").filter(has_text="Grader's email: no grader with the email")
    expect(note).to_be_in_viewport()
    email = p.get_by_label("Grader's email")
    expect(email).to_have_value(typo)
    expect(email).to_have_attribute("aria-invalid", "true")
    p.keyboard.press("Tab")  # the page opened at the form's heading: the next Tab is the field to mend
    expect(email).to_be_focused()
    screenshot(p, f"journeys-assign-refused-{size}", full_page=False)
    email.fill(ta)
    p.get_by_role("button", name="Assign", exact=True).click()
    done = p.get_by_role("status").filter(has_text=f"{ta} now grades transformer-scaling.")
    expect(done).to_be_in_viewport()
    expect(p.locator("#assign-h").locator("..")).to_contain_text(f"TA ({ta}) grades transformer-scaling")
    expect(p.get_by_label("Lesson", exact=True).first).to_have_value("")  # the queue's filter: all you grade
    expect(p.get_by_label("Grader's email")).to_have_value("")
    screenshot(p, f"journeys-assign-done-{size}", full_page=False)


def _resubmit(seeder: Seeder, report_id: int, answer: str) -> None:
    """The learner changes an answer and hands the report in again (a new version)."""
    from app.core.models import LabReport, User
    from app.services.grading import reports
    from app.services.learning import lessons as lesson_service

    with seeder.sessions() as db:
        report = db.get(LabReport, report_id)
        assert report is not None
        owner, current = db.get(User, report.owner_id), lesson_service.current(db, lesson_id=report.lesson_id)
        assert owner is not None and current is not None
        draft = dict(report.draft or {})
        report.draft = {**draft, "answers": {**draft.get("answers", {}), "sharding": answer}}
        db.commit()
        reports.submit(
            db, settings=seeder.settings, report=report, lesson=current.lesson, lesson_version=current.version
        )


@pytest.mark.parametrize("size", SIZES)
def test_a_resubmission_while_grading_keeps_the_graders_work(live_server, seeder, open_page, size):
    """The learner resubmitted while the grader scored version 1: Save was refused, the work "kept below" on version
    1's page, and following "open the new version" lost it. The refusal now opens version 2 with the picks and text
    carried over, unsaved, to check against what changed; the grade saved is version 2's, and version 1's rubric reads
    as an older version, not a form to save."""
    report_id = _submitted(seeder, f"journeys-resub-{size}@example.org", "Rui")
    g = open_page(size, GRADER)
    g.goto(f"{live_server.url}/classes/default/grader/reports/{report_id}")
    g.get_by_role("button", name="Claim this report").click()
    for line in LINES:
        g.locator(f"#item-{line} input[type=radio]").last.check()
    g.locator("#feedback").fill("Scored on version 1.")
    _resubmit(seeder, report_id, "Sharding at TP=2, rewritten.")
    g.get_by_role("button", name="Save grade").click()
    expect(g.get_by_test_id("grading-error")).to_contain_text("submitted version 2 after you opened version 1")
    expect(g.get_by_test_id("grading-error")).to_be_in_viewport()
    assert g.url == f"{live_server.url}/classes/default/grader/reports/{report_id}?v=2", (
        g.url
    )  # version 2's page, not version 1's
    expect(g.get_by_test_id("resubmitted")).to_contain_text("not saved yet")
    expect(g.get_by_test_id("changes")).to_contain_text("answer 3")
    expect(g.locator("#feedback")).to_have_value("Scored on version 1.")
    expect(g.locator("#item-stretch input[type=radio]").last).to_be_checked()
    expect(g.locator("#grade-total")).to_have_text("20")
    screenshot(g, f"journeys-resubmitted-carried-{size}", full_page=False)
    g.get_by_role("button", name="Save grade").click()
    expect(g.get_by_role("status").filter(has_text="Grade saved")).to_be_visible()
    # version 1: no grade it was not given, and nothing to save there
    g.goto(f"{live_server.url}/classes/default/grader/reports/{report_id}?v=1")
    g.get_by_test_id("to-rubric").click()
    expect(g.get_by_test_id("older-version")).to_contain_text("Version 1 was not graded")
    expect(g.get_by_role("button", name="Save grade")).to_have_count(0)
    expect(g.locator("#item-environment input[type=radio]").first).to_be_disabled()
    screenshot(g, f"journeys-older-version-{size}", full_page=False)
    g.get_by_role("link", name="Grade version 2").click()
    expect(g.locator("#grade-total")).to_have_text("20")
    expect(g.locator("#feedback")).to_have_value("Scored on version 1.")


def test_a_save_refused_for_a_conflict_links_to_the_saved_grade_without_javascript(
    browser, live_server, seeder, open_page
):
    """Two saves from the same revision (two tabs): the second was refused with "Reload to see the saved grade".
    Without JavaScript the refused page's address is the post's, so a reload sent the same save again and was refused
    again. The refusal now links to the saved grade."""
    report_id = _submitted(seeder, "journeys-conflict@example.org", "Cy")
    first = open_page("phone", GRADER, js=False)
    first.goto(f"{live_server.url}/classes/default/grader/reports/{report_id}")
    first.get_by_role("button", name="Claim this report").click()
    second = first.context.new_page()
    second.goto(f"{live_server.url}/classes/default/grader/reports/{report_id}")
    for pg, text in ((first, "Saved in the first tab."), (second, "Typed in the second tab.")):
        # the tab in use is in front, as the grader's would be: a background tab gets no animation frames, and
        # Playwright waits for two of them before each click (13 s for the first tab's six radios)
        pg.bring_to_front()
        for line in LINES:
            pg.locator(f"#item-{line} input[type=radio]").last.check()
        pg.locator("#feedback").fill(text)
    first.bring_to_front()
    first.get_by_role("button", name="Save grade").click()
    expect(first.get_by_role("status").filter(has_text="Grade saved")).to_be_visible()
    second.bring_to_front()
    second.get_by_role("button", name="Save grade").click()
    expect(second.get_by_test_id("grading-error")).to_contain_text("Not saved: this grade was saved meanwhile")
    expect(second.get_by_test_id("grading-error")).not_to_contain_text("Reload")
    assert second.url.endswith(f"/classes/default/grader/reports/{report_id}/grade"), (
        second.url
    )  # a reload would post again
    expect(second.locator("#feedback")).to_have_value("Typed in the second tab.")
    screenshot(second, "journeys-conflict-nojs", full_page=False)
    second.get_by_test_id("open-saved").click()
    expect(second.locator("#feedback")).to_have_value("Saved in the first tab.")
    expect(second.get_by_test_id("grading-error")).to_have_count(0)
    assert second.url == f"{live_server.url}/classes/default/grader/reports/{report_id}?v=1", second.url
