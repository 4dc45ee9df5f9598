"""A lesson without a lab offers none (lesson 08: header, pacing list, the last part's next step), the lab page's
eyebrow stays short, and the editor previews lesson.yaml as the lesson's header, in real Chromium at laptop and
phone width. Screenshots: test-artifacts/screenshots/sections-*.png."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, register, screenshot
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

WIDTHS = [(1280, 900, "laptop"), (390, 844, "phone")]
STAFF = "sections-staff@example.org"


@pytest.fixture(scope="module")
def staff(live_server):
    s = Seeder(live_server.data)
    s.user(STAFF, roles=("learner", "instructor"), name="Sam")
    s.close()
    return STAFF


def _context(browser, width, height):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    ctx.set_default_timeout(15_000)
    return ctx


def _overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


@pytest.mark.parametrize("width,height,name", WIDTHS)
def test_a_lesson_without_a_lab_ends_on_what_it_has(browser, live_server, width, height, name):
    ctx = _context(browser, width, height)
    page = ctx.new_page()
    register(page, live_server.url, f"sections-{name}@example.org")
    page.goto(f"{live_server.url}/lessons/planning-at-scale/plan")
    page.locator("details.lesson-intro summary").click()  # a later part folds the lesson's introduction
    expect(page.get_by_role("link", name="Play the interactive lesson")).to_be_visible()  # lesson 08's memory tool
    expect(page.get_by_role("link", name=re.compile("Hands-on lab"))).to_have_count(0)
    expect(page.get_by_role("link", name="Knowledge atlas")).to_have_count(0)
    assert page.locator("a[href$='/lab'], a[href$='/atlas']").count() == 0
    nxt = page.locator(".part-foot a.next")
    expect(nxt).to_have_text("Go deeper →")
    assert _overflow(page) <= 1
    screenshot(page, f"sections-planning-last-part-{name}")
    nxt.click()
    expect(page).to_have_url(f"{live_server.url}/lessons/planning-at-scale/references")
    expect(page.get_by_role("heading", name="Go deeper")).to_be_visible()
    expect(page.locator("#pacing a[aria-current=page]")).to_have_text("Go deeper")
    screenshot(page, f"sections-planning-references-{name}")
    ctx.close()


@pytest.mark.parametrize("width,height,name", WIDTHS)
def test_the_lab_page_eyebrow_is_short_and_the_requirements_read_as_prose(browser, live_server, width, height, name):
    ctx = _context(browser, width, height)
    page = ctx.new_page()
    register(page, live_server.url, f"sections-lab-{name}@example.org")
    page.goto(f"{live_server.url}/lessons/transformer-scaling/lab")
    eyebrow = page.locator("article[aria-labelledby=lab-h] > p.eyebrow")
    expect(eyebrow).to_have_text("Optional hands-on lab · 45–70 min")
    assert eyebrow.evaluate("e => e.getBoundingClientRect().height") < 40  # one line, even on a phone
    expect(page.get_by_text(re.compile(r"^Outside the lesson's core time\. Best on a CUDA GPU"))).to_be_visible()
    item = page.locator("#evidence-static-trace")
    text = re.sub(r"\s+", " ", item.inner_text())
    assert text.upper().count("UNSUPPORTED HARDWARE") == 1 and " :" not in text, text
    assert _overflow(page) <= 1
    screenshot(page, f"sections-lab-{name}")
    ctx.close()


@pytest.mark.parametrize("width,height,name", WIDTHS)
def test_the_editor_previews_lesson_yaml_as_the_lesson_header(browser, live_server, staff, width, height, name):
    ctx = _context(browser, width, height)
    page = ctx.new_page()
    login(page, live_server.url, staff)
    page.goto(f"{live_server.url}/instructor/lessons/transformer-scaling/edit")
    preview = page.locator("#preview")
    expect(preview).to_contain_text("Preview of the lesson's header")
    expect(preview.locator(".lesson-head h1")).to_have_text("Transformer Scaling")
    title = page.locator(".cm-line", has_text=re.compile(r"^title: Transformer Scaling$"))
    title.click()
    page.keyboard.press("End")
    page.keyboard.type(" in one step")
    expect(preview.locator(".lesson-head h1")).to_have_text("Transformer Scaling in one step", timeout=10_000)
    screenshot(page, f"sections-editor-header-{name}")
    page.keyboard.type(": again")  # a second colon: the usual YAML mistake, with its hint
    expect(preview).to_contain_text("1 problem: nothing is published until it is fixed.", timeout=10_000)
    hint = preview.locator(".yaml-hint")
    expect(hint.locator("code", has_text="key: >")).to_have_count(1)
    assert "`" not in hint.inner_text()
    assert _overflow(page) <= 1
    screenshot(page, f"sections-editor-hint-{name}")
    ctx.close()
