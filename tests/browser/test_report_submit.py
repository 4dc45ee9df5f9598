"""Submitting a lab report in real Chromium: an incomplete one is listed and confirmed first (with and without
JavaScript), optional items read as neutral, and the run menu shows its descriptions whole at laptop width.

Screenshots: test-artifacts/screenshots/report-missing-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.pages import SPIKED
from tests.browser.seed import Seeder
from tests.browser.test_lesson_quality import serious_violations

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

LESSON = "transformer-scaling"

# Width of each option's text in the select's own font, and the width the closed select shows text in (its box
# less padding and the drop-down arrow, about 20 px in Chromium).
MENU_FIT = """(sel) => {
  const s = getComputedStyle(sel);
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = `${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
  const room = sel.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight) - 20;
  const width = (t) => ctx.measureText(t).width;
  return {room, options: [...sel.options].map(o => [o.text, width(o.text)])};
}"""


@pytest.fixture(scope="module")
def seeder(live_server):
    s = Seeder(live_server.data)
    yield s
    s.close()


@pytest.mark.parametrize("js", [True, False], ids=["js", "nojs"])
def test_incomplete_report_is_listed_kept_and_submitted_only_when_confirmed(browser, live_server, seeder, js):
    base, email = live_server.url, f"rita-{'js' if js else 'nojs'}@example.org"
    learner = seeder.user(email, name="Rita")
    env = seeder.job(learner, "env-check")
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=js)
    ctx.set_default_timeout(15_000)
    page = ctx.new_page()
    try:
        login(page, base, email)
        page.goto(f"{base}/lessons/{LESSON}/report")
        expect(page.locator("#complete-rule")).to_contain_text("items marked optional never count")
        page.locator("#evidence-env-capability").select_option(f"job:{env}")
        page.locator("#answer-numbers").fill("Loss gap 0.02% at the last step.")
        page.get_by_role("button", name="Submit report").click()

        box = page.locator("#missing")
        expect(box).to_contain_text("Not submitted: 5 things are missing")
        expect(page.get_by_text("Submitted as version")).to_have_count(0)
        items = box.get_by_role("listitem")
        expect(items).to_have_count(5)
        expect(items.nth(0)).to_contain_text("Evidence “BF16 vs FP8 numerics”: no run attached")
        expect(items.nth(3)).to_contain_text("Question 2: Where was the overlap real?: no answer written")
        expect(box).not_to_contain_text("Stretch")  # optional items are never listed
        # what was typed and picked is still there
        expect(page.locator("#answer-numbers")).to_have_value("Loss gap 0.02% at the last step.")
        expect(page.locator("#evidence-env-capability")).to_have_value(f"job:{env}")
        expect(box).to_be_in_viewport()  # the page opens on the list
        screenshot(page, f"report-missing-laptop-{'js' if js else 'nojs'}")
        if js:  # axe needs a script
            assert serious_violations(page) == []
        page.set_viewport_size({"width": 390, "height": 844})
        screenshot(page, f"report-missing-phone390-{'js' if js else 'nojs'}")
        page.set_viewport_size({"width": 1280, "height": 900})
        # each item links to its control
        box.get_by_role("link", name="Evidence “Timeline”").click()
        expect(page).to_have_url(f"{base}/lessons/{LESSON}/report#evidence-timeline")
        expect(page.locator("#evidence-timeline")).to_be_in_viewport()

        # the learner writes one more answer, then hands the rest in as it is
        page.locator("#answer-overlap").fill("Rank 1's window held the gradient all-reduce.")
        page.get_by_role("button", name="Submit with these missing").click()
        expect(page.locator("main").get_by_role("status")).to_contain_text(
            "Submitted as version 1, with 4 items missing as you confirmed."
        )
        expect(page.locator("#missing")).to_have_count(0)
        expect(page.locator("#version-1")).to_contain_text("Rank 1's window held the gradient all-reduce.")
    finally:
        ctx.close()


def test_complete_report_submits_in_one_press(page, live_server, seeder):
    base, email = live_server.url, "cora@example.org"
    learner = seeder.user(email, name="Cora")
    for lab in ("env-check", "tp-sweep", "overlap-trace"):
        seeder.job(learner, lab)
    seeder.job(learner, "fp8-step", SPIKED)  # the run the numerics item asks for
    login(page, base, email)
    page.goto(f"{base}/lessons/{LESSON}/report")
    page.get_by_role("button", name="Attach my latest runs to empty items").click()
    for q in ("numbers", "overlap", "sharding"):
        page.locator(f"#answer-{q}").fill(f"My answer about {q}.")
    page.get_by_role("button", name="Submit report").click()
    expect(page.locator("main").get_by_role("status")).to_contain_text("Submitted as version 1. The automatic checks")
    expect(page.locator("#missing")).to_have_count(0)


@pytest.mark.parametrize("width,height,name", [(1280, 900, "laptop"), (390, 844, "phone390")])
def test_optional_items_are_neutral_and_run_menu_fits(browser, live_server, seeder, width, height, name):
    base, email = live_server.url, f"mona-{name}@example.org"
    learner = seeder.user(email, name="Mona")
    for _ in range(3):
        seeder.job(learner, "fp8-step")
    ctx = browser.new_context(viewport={"width": width, "height": height})
    ctx.set_default_timeout(15_000)
    page = ctx.new_page()
    try:
        login(page, base, email)
        page.goto(f"{base}/lessons/{LESSON}/report")
        optional = page.get_by_test_id("state-tp-sweep-oversharding")
        required = page.get_by_test_id("state-timeline")
        expect(optional).to_have_text("Optional, not attached")
        expect(page.get_by_test_id("state-static-trace")).to_have_text("Optional, not attached")
        expect(required).to_have_text("Missing")
        colour = "e => getComputedStyle(e).color + ' on ' + getComputedStyle(e).backgroundColor"
        assert optional.evaluate(colour) != required.evaluate(colour)  # not the red of a missing required item
        assert optional.evaluate(colour) == page.get_by_test_id("state-bf16-fp8-numerics").evaluate(
            "e => { const s = document.createElement('span'); s.className = 'status-check-missing';"
            " e.parentElement.append(s); const c = getComputedStyle(s); const out = c.color + ' on ' +"
            " c.backgroundColor; s.remove(); return out; }"
        )
        menu = page.locator("#evidence-bf16-fp8-numerics")
        menu.select_option(index=1)  # the newest run, shown in the closed menu on the screenshot
        fit = menu.evaluate(MENU_FIT)
        screenshot(page, f"report-menu-{name}")
        if name == "laptop":
            # every description, parameters in words included, fits the closed menu
            too_wide = [(text, round(w)) for text, w in fit["options"] if w > fit["room"]]
            assert not too_wide, (fit["room"], too_wide)
    finally:
        ctx.close()
