"""Lesson interactions, accessibility (axe-core, vendored) and screenshots at laptop and phone widths."""

import json

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SHOTS, register, screenshot
from tests.conftest import ROOT

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

AXE = ROOT / "static" / "vendor" / "axe" / "axe.min.js"
PAGES = ["orient", "mental-model", "deep-dives", "code-trace", "history", "practice", "atlas", "lab"]


def serious_violations(page) -> list[dict]:
    page.add_script_tag(url="/" + AXE.relative_to(ROOT).as_posix())  # by URL: an inline copy is refused by the CSP
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "impact": v["impact"], "help": v["help"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@pytest.fixture
def learner_page(page, live_server, request):
    register(page, live_server.url, f"{request.node.name[:40]}@example.org".replace("[", "-").replace("]", ""))
    return page


def test_no_serious_accessibility_violations(learner_page, live_server):
    page = learner_page
    found = {}
    for part in PAGES:
        page.goto(f"{live_server.url}/lessons/transformer-scaling/{part}")
        violations = serious_violations(page)
        if violations:
            found[part] = violations
    page.goto(f"{live_server.url}/labs/env-check")
    if v := serious_violations(page):
        found["labs/env-check"] = v
    assert found == {}, json.dumps(found, indent=1)
    # The check itself can fail: a page with a known problem is reported.
    page.set_content("<html><body><img src='x.png'><button></button></body></html>")
    assert {v["id"] for v in serious_violations(page)} >= {"image-alt", "button-name"}


@pytest.mark.parametrize("width,height,name", [(1280, 900, "laptop"), (390, 844, "phone")])
def test_screenshots_at_two_widths(browser, live_server, width, height, name):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    register(page, live_server.url, f"shots-{name}@example.org")
    for part in ("orient", "code-trace", "practice"):
        page.goto(f"{live_server.url}/lessons/transformer-scaling/{part}")
        path = screenshot(page, f"lesson-{part}-{name}")
        assert path.stat().st_size > 10_000
        # Nothing runs off the side of a phone screen.
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 1, f"{part} at {width}px scrolls sideways by {overflow}px"
    context.close()


def test_pause_answer_reveal_and_practice_feedback(learner_page, live_server):
    page = learner_page
    page.goto(f"{live_server.url}/lessons/transformer-scaling/deep-dives")
    pause = page.locator(".pause").first
    pause.get_by_role("button", name="Save my answer and reveal the reference").click()
    expect(pause.get_by_role("alert")).to_contain_text("write an answer first")
    pause = page.locator(".pause").first
    pause.get_by_label("Your answer").fill("Distributions drift, so a fixed scale clips or underflows.")
    pause.get_by_role("button", name="Save my answer and reveal the reference").click()
    expect(page.locator(".pause").first.locator(".reference")).to_be_visible()
    page.reload()  # saved on the server, not only on the page
    expect(page.locator(".pause").first).to_contain_text("Distributions drift")

    page.goto(f"{live_server.url}/lessons/transformer-scaling/practice")
    q = page.locator(".question").first
    q.get_by_label("B.", exact=False).check()
    q.get_by_role("button", name="Check").click()
    q = page.locator(".question").first
    expect(q.locator(".feedback")).to_contain_text("Not yet")
    q.get_by_label("A.", exact=False).check()
    q.get_by_role("button", name="Check").click()
    expect(page.locator(".question").first.locator(".feedback")).to_contain_text("Correct")
    numeric = page.locator(".question", has=page.locator("input[inputmode=decimal]")).first
    numeric.locator("input[name=answer]").fill("about twelve")
    numeric.get_by_role("button", name="Check").click()
    expect(page.locator(".question [role=alert]").first).to_be_visible()


def test_code_trace_step_lights_its_lines(learner_page, live_server):
    page = learner_page
    page.goto(f"{live_server.url}/lessons/transformer-scaling/code-trace")
    step = page.locator(".trace-step").first
    step.click()
    expect(step).to_have_attribute("aria-pressed", "true")
    lines = step.get_attribute("data-lines").split(",")
    for n in lines:
        expect(page.locator(f'.line[data-line="{n}"]')).to_have_class("line hl")
    assert page.locator(".line.hl").count() == len(lines)
    # Math rendered by the vendored KaTeX, offline.
    page.goto(f"{live_server.url}/lessons/precision-by-numbers")
    assert SHOTS.exists()
