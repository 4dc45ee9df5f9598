"""Every page fits the screen at laptop and phone widths, long titles wrap inside their chips, and the laptop sweep
runs axe on the pages of the light colour scheme (the dark scheme's axe sweep is in test_dark_mode.py): one visit
per page serves both. Screenshots: test-artifacts/screenshots/polish-*.png."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.pages import (
    LEARNER,
    LESSON,
    SCROLL_BOXES,
    SQUEEZED_CAPTIONS,
    STAFF,
    WIDTHS,
    context_at,
    overflow,
)
from tests.browser.settle import goto_settled
from tests.browser.test_lesson_quality import serious_violations

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


def axe_pages(jobs: dict, report: int, learner: str = LEARNER, staff: str = STAFF) -> dict[str, list[str]]:
    """The pages axe checks in each colour scheme, by who sees them (test_dark_mode.py's sweep uses the same)."""
    return {
        learner: [
            "/",
            f"/lessons/{LESSON}/orient",
            f"/lessons/{LESSON}/deep-dives",
            f"/lessons/{LESSON}/practice",
            "/play",
            "/labs/fp8-step",
            f"/jobs/{jobs['tp-sweep']}",
            f"/jobs/{jobs['overlap-trace']}",
            "/jobs",
            f"/lessons/{LESSON}/report",
            "/no/such/page",
        ],
        staff: [
            "/classes/default/grader",
            f"/classes/default/grader/reports/{report}",
            "/instructor",
            "/instructor/cluster?saved=default",
        ],
    }


@pytest.mark.parametrize("width,height,name", WIDTHS)
def test_every_page_fits_the_screen(browser, live_server, seeded, width, height, name):
    """At every width: no sideways scroll, a full-width header, named scroll boxes, captions not squeezed. At the
    laptop width (light scheme) each page of the axe list also passes axe, in the same visit."""
    base, jobs = live_server.url, seeded["jobs"]
    pages = {
        LEARNER: [
            "/",
            "/labs",
            "/labs/fp8-step",
            "/labs/tp-sweep",
            "/jobs",
            *[f"/jobs/{jobs[k]}" for k in ("env-check", "fp8-delayed", "tp-sweep", "overlap-trace", "failed")],
            f"/lessons/{LESSON}/report",
            "/reports",
            "/no/such/page",
        ],
        STAFF: [
            "/classes/default/grader",
            f"/classes/default/grader/reports/{seeded['report']}",
            "/instructor",
            "/instructor/cluster",
            f"/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml",
        ],
    }
    axe = axe_pages(jobs, seeded["report"]) if name == "laptop" else {}
    problems, violations = [], {}
    for email, fit in pages.items():
        ctx = context_at(browser, width, height)
        page = ctx.new_page()
        login(page, base, email)
        for path in dict.fromkeys([*fit, *axe.get(email, [])]):  # each page once, in order
            goto_settled(page, base + path)
            if path in fit:
                problems += _fit_problems(page, path, width, name, email)
            if path in axe.get(email, []) and (found := serious_violations(page)):
                violations[path] = found
        ctx.close()
    assert problems == []
    assert violations == {}, "axe (light scheme): " + json.dumps(violations, indent=1)


def _fit_problems(page, path: str, width: int, name: str, email: str) -> list[str]:
    slug = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "home"
    screenshot(page, f"polish-{slug}-{name}")
    problems = []
    if (over := overflow(page)) > 1:
        problems.append(f"{path} at {width}px: the page scrolls sideways by {over}px")
    header = page.locator("header.site").evaluate("e => e.getBoundingClientRect().width")
    if header < width - 1:
        problems.append(f"{path} at {width}px: the header is {header:.0f}px wide")
    tall = page.locator("header.site").evaluate("e => e.getBoundingClientRect().height")
    if width >= 1280 and tall > 60:  # one line of links (~45 px), not "Log out" alone on a second
        problems.append(f"{path} at {width}px: the header wraps to {tall:.0f}px for {email}")
    if bad := page.evaluate(SCROLL_BOXES):
        problems.append(f"{path} at {width}px: scrolling boxes without keyboard focus or a name: {bad}")
    if squeezed := page.evaluate(SQUEEZED_CAPTIONS):
        problems.append(f"{path} at {width}px: a caption squeezed to a word per line: {squeezed}")
    return problems


# Chips of the phone's pacing strip wider than the strip itself: a long title ran past both edges ("…and pipeline").
WIDE_CHIPS = """[...document.querySelectorAll('.pacing li')]
  .filter(li => li.getBoundingClientRect().width > li.parentElement.clientWidth)
  .map(li => li.textContent.replace(/\\s+/g, ' ').trim())"""


@pytest.mark.parametrize("width,height,name", WIDTHS[1:])
def test_a_long_part_title_wraps_inside_its_pacing_chip(browser, live_server, seeded, width, height, name):
    ctx = context_at(browser, width, height)
    page = ctx.new_page()
    login(page, live_server.url, LEARNER)
    page.goto(f"{live_server.url}/lessons/precision-by-numbers/collectives-memory")
    current = page.locator(".pacing li.current")
    expect(current).to_contain_text("Collectives, memory and pipelines")
    assert page.evaluate(WIDE_CHIPS) == []
    strip, chip = page.locator(".pacing ol").bounding_box(), current.bounding_box()
    assert strip and chip and chip["x"] >= strip["x"] and chip["x"] + chip["width"] <= strip["x"] + strip["width"]
    page.goto(f"{live_server.url}/lessons/{LESSON}/orient")
    # on a phone the first part's summary (with the lab link) folds into "What this lesson is about"
    page.locator("#lesson-head .intro-phone details summary").click()
    link = page.locator("#lesson-head .intro-phone a", has_text="Hands-on lab")
    assert link.evaluate("a => a.getClientRects().length") == 1  # one line box: "Hands-/on lab" made two
    screenshot(page, f"polish-pacing-chips-{name}", full_page=False)
    ctx.close()
