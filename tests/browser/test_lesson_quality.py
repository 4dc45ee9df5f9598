"""Lesson interactions, accessibility (axe-core, vendored) and screenshots at laptop and phone widths."""

import json

import pytest
from playwright.sync_api import expect

from app.content import load_course
from tests.browser.conftest import SHOTS, register, screenshot
from tests.browser.settle import goto_settled
from tests.conftest import ROOT

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

AXE = ROOT / "static" / "vendor" / "axe" / "axe.min.js"
PAGES = ["orient", "mental-model", "deep-dives", "code-trace", "history", "practice", "atlas", "lab"]
# Every part of every shipped lesson, plus the reference sections, read from the lessons themselves.
COURSE = load_course(ROOT / "lessons")
ALL_PAGES = [
    (lesson.id, page)
    for lesson in COURSE.ordered()
    for page in [p.id for p in lesson.parts] + (["atlas"] if lesson.atlas else []) + (["lab"] if lesson.lab else [])
]


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
    for lesson_id, part in ALL_PAGES:
        page.goto(f"{live_server.url}/lessons/{lesson_id}/{part}")
        violations = serious_violations(page)
        if violations:
            found[f"{lesson_id}/{part}"] = violations
    page.goto(f"{live_server.url}/labs/env-check")
    if v := serious_violations(page):
        found["labs/env-check"] = v
    assert found == {}, json.dumps(found, indent=1)
    # The check itself can fail: a page with a known problem is reported.
    page.set_content("<html><body><img src='x.png'><button></button></body></html>")
    assert {v["id"] for v in serious_violations(page)} >= {"image-alt", "button-name"}


@pytest.mark.parametrize("width,height,name", [(1280, 900, "laptop"), (390, 844, "phone")])
def test_screenshots_at_two_widths(browser, live_server, width, height, name):
    """Every part of every lesson at laptop and phone width: no sideways page scroll, figures legible."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    register(page, live_server.url, f"shots-{name}@example.org")
    problems, phone_layouts = [], set()
    for lesson_id, part in ALL_PAGES:
        goto_settled(page, f"{live_server.url}/lessons/{lesson_id}/{part}")
        path = screenshot(page, f"{lesson_id}-{part}-{name}")
        assert path.stat().st_size > 10_000
        # Nothing runs off the side of a phone screen.
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if overflow > 1:
            problems.append(f"{lesson_id}/{part} at {width}px scrolls sideways by {overflow}px")
        # Figures keep a legible size: on a phone they scroll inside their own box instead of shrinking, or
        # swap to their phone layout (memory-anatomy), which fits the box whole at about its drawn size.
        for fig in page.locator(".lesson-figure").all():
            box = fig.locator(".figure-scroll")
            narrow = name == "phone" and "has-narrow" in (fig.get_attribute("class") or "")
            if narrow:
                phone_layouts.add(fig.get_attribute("id"))
            svg = box.locator(".fig-narrow svg" if narrow else "svg:visible")
            svg_width = svg.evaluate("e => e.getBoundingClientRect().width")
            drawn = int(svg.get_attribute("viewBox").split()[2])
            # compact figures (lesson 07's ring steps, ZeRO bars, pipeline grid) are drawn for a phone's width and
            # shown at that size everywhere: legible at their drawn size, nothing to scroll
            compact = drawn <= 400
            # a wide drawing keeps about its size, or the 620 px it scrolls at; one with a phone layout fits its
            # box (a 600 px ring chart is 598 px inside its border)
            if svg_width < 0.95 * (drawn if narrow or compact else min(drawn, 620)):
                problems.append(f"{lesson_id}/{part}: figure {fig.get_attribute('id')} drawn {svg_width:.0f}px wide")
            if name == "phone" and (narrow or compact) == box.evaluate("e => e.scrollWidth > e.clientWidth"):
                problems.append(f"{lesson_id}/{part}: figure {fig.get_attribute('id')} scroll in its box wrong")
            # a figure cut off by its box says so under it; one that fits says nothing (on a phone, every one)
            cut = box.evaluate("e => e.scrollWidth > e.clientWidth + 1")
            if fig.locator(".scroll-hint").is_visible() != cut:
                problems.append(f"{lesson_id}/{part}: figure {fig.get_attribute('id')}'s swipe hint wrong at {width}px")
    context.close()
    assert problems == []
    # figures with a phone layout are read whole on a phone: lesson 08's memory bars (their totals and the 80 GB
    # line were off-screen), and every lesson 06 figure (tests/browser/test_figure_phone_layouts.py measures their
    # labels: none under 11 px, none overlapping or cut off)
    expected = {"fig-memory-7b", "fig-memory-70b", "fig-tp-roof", "fig-mesh-right", "fig-mesh-wrong", "fig-mesh-domain"}
    expected |= {"fig-fp8-grid", "fig-tp-mlp", "fig-tp-mlp-sp", "fig-step-14ms", "fig-ring-bytes", "fig-ring-alpha"}
    assert phone_layouts == (expected if name == "phone" else set())


def test_figures_have_text_alternatives_read_once(learner_page, live_server):
    """On a phone the figure is its phone layout: one image with the figure's title (the wide drawing is
    display: none, so a screen reader does not meet the picture twice), its numbers as text under it."""
    page = learner_page
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/lessons/transformer-scaling/deep-dives")
    figure = page.locator("#fig-fp8-grid")
    expect(figure.get_by_role("img")).to_have_count(1)
    expect(figure.get_by_role("img", name="FP8 number lines")).to_be_visible()
    expect(figure.locator(".fig-narrow svg[role=img] title")).to_contain_text("FP8 number lines")
    expect(figure.locator(".fig-wide svg[role=img]")).to_be_hidden()
    page.set_viewport_size({"width": 1280, "height": 844})  # the same figure on a laptop: the wide drawing, once
    expect(figure.get_by_role("img")).to_have_count(1)
    expect(figure.locator(".fig-wide svg[role=img]")).to_be_visible()
    figure.get_by_text("The figure as text").click()
    expect(figure.locator(".figure-text table")).to_contain_text("560")


def test_pause_answer_reveal_and_practice_feedback(learner_page, live_server):
    page = learner_page
    page.goto(f"{live_server.url}/lessons/transformer-scaling/deep-dives")
    pause = page.locator(".pause").first
    pause.get_by_role("button", name="Save my answer and reveal the reference").click()
    expect(pause.get_by_role("alert")).to_contain_text("Write an answer first")
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


def test_multi_step_problem_and_self_check(learner_page, live_server):
    page = learner_page
    page.goto(f"{live_server.url}/lessons/planning-at-scale/plan")
    problem = page.locator("#q-tp8-zero1-70b")
    step = problem.locator("#q-tp8-zero1-70b-total-state")
    expect(step).to_contain_text("opens after your first try")
    step.get_by_label("Your answer").fill("112 GB")
    step.get_by_role("button", name="Check step 1").click()
    step = page.locator("#q-tp8-zero1-70b-total-state")
    expect(step.locator(".feedback")).to_contain_text("Not yet")
    step.get_by_text("Worked step 1").click()
    expect(step.locator(".solution")).to_contain_text("1,120")
    step.get_by_label("Your answer").fill("1.12 TB")
    step.get_by_role("button", name="Check step 1").click()
    expect(page.locator("#q-tp8-zero1-70b-total-state .feedback")).to_contain_text("Correct")
    expect(page.locator("#q-tp8-zero1-70b .steps-right")).to_have_text("1 of 6 steps right")
    screenshot(page, "planning-at-scale-plan-step-answered-laptop")

    defend = page.locator("#q-defend-plan")
    defend.get_by_label("Your answer").fill(
        "Shard the state in the node, replicate across nodes; the batch limits scale."
    )
    defend.get_by_role("button", name="Save and reveal the reference answer").click()
    check = page.locator("#selfcheck-defend-plan")
    check.get_by_label("The state is sharded inside the node", exact=False).check()
    check.get_by_label("Across nodes the model is replicated", exact=False).check()
    check.get_by_role("button", name="Save my self-check").click()
    expect(page.locator("#selfcheck-defend-plan [role=status]")).to_contain_text("2 of 5 points")
    page.reload()
    expect(page.locator("#selfcheck-defend-plan")).to_contain_text("Saved with your answer: 2 of 5 points")
    screenshot(page, "planning-at-scale-plan-self-check-laptop")


def test_on_a_phone_the_pacing_strip_shows_the_current_part(learner_page, live_server):
    """The pacing list is a sideways-scrolling row of chips on a phone: on a late part its chip is in view (once,
    the strip showed parts 1 and 2 on part 6), and the page itself was not scrolled to get it there."""
    page = learner_page
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/lessons/transformer-scaling/practice")
    strip = page.locator(".pacing ol")
    chip = strip.locator("li.current")
    expect(chip).to_have_count(1)
    page.wait_for_function("s => s.scrollLeft > 0", arg=strip.element_handle(), timeout=5000)
    inside = strip.evaluate(
        """s => { const a = s.getBoundingClientRect(), c = s.querySelector('li.current').getBoundingClientRect();
                  return c.left >= a.left - 1 && c.right <= a.right + 1; }"""
    )
    assert inside
    assert page.evaluate("window.scrollY") == 0


def test_on_a_phone_a_later_part_starts_on_the_first_screen(learner_page, live_server):
    """The lesson's introduction is in full above its first part; above the others it is folded (one click
    away), so a phone shows a later part's title without scrolling past the whole introduction again."""
    page = learner_page
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/lessons/transformer-scaling/deep-dives")
    title = page.locator("#part-title")
    assert title.bounding_box()["y"] + 30 < 844
    intro = page.locator("details.lesson-intro")
    expect(intro.locator(".remember")).to_be_hidden()
    screenshot(page, "lesson-later-part-phone", full_page=False)
    intro.locator("summary").click()
    expect(intro.locator(".remember")).to_be_visible()
    page.goto(f"{live_server.url}/lessons/transformer-scaling/orient")  # the first part: in full, nothing folded
    expect(page.locator(".lesson-head .remember:visible")).to_have_count(1)  # the phone's copy, not the laptop's
    expect(page.locator("details.lesson-intro")).to_have_count(0)


def test_on_a_phone_tabbing_along_the_pacing_strip_shows_each_chip_whole(learner_page, live_server):
    page = learner_page
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/lessons/transformer-scaling/orient")
    links = page.locator(".pacing ol li a")
    strip = page.locator(".pacing ol")
    for i in range(links.count()):
        links.nth(i).focus()
        page.wait_for_function(
            """([s, a]) => { const r = s.getBoundingClientRect(), c = a.getBoundingClientRect();
                            return c.left >= r.left - 1 && c.right <= r.right + 1; }""",
            arg=[strip.element_handle(), links.nth(i).element_handle()],
            timeout=5000,
        )
    page.keyboard.press("Tab")  # on to the next control, focused by keyboard so its ring shows
    screenshot(page, "focus-ring-phone", full_page=False)
