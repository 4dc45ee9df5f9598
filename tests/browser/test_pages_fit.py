"""One sweep per width over the pages people use first, each page loaded once and checked in both colour schemes:
it fits the screen (light), its text is legible and nothing glares in the dark scheme (prefers-color-scheme:
dark, emulated on the loaded page: the CSS and the vendored CodeMirror follow the change as a reload would), and
at the laptop width axe finds nothing serious in either scheme. Long titles wrap inside their chips.

Two widths: 1280 x 800 and 360 x 740. 360 px stands for the phones: the stylesheet's ranges break at 420, 600,
640, 900, 1000 and 1100 px and plot.js's at 520, so a 390 px phone gets the same rules, with 30 px more room.
Screenshots: test-artifacts/screenshots/polish-*.png (light) and dark-*.png: look at them."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.pages import (
    CONTRAST,
    LEARNER,
    LESSON,
    LIGHT_BOXES,
    SCROLL_BOXES,
    SQUEEZED_CAPTIONS,
    STAFF,
    WIDTHS,
    context_at,
    overflow,
    rgb,
)
from tests.browser.settle import goto_settled
from tests.browser.test_lesson_quality import serious_violations

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

SWEEP = [(1280, 800, "laptop"), (360, 740, "phone")]
GRADER = "/classes/default/grader"  # the class the seeded learner and staff are in


def sweep_pages(jobs: dict, report: int) -> dict[str, dict[str, set[str]]]:
    """email -> path -> the checks that page gets, in visiting order: "fit" (the screen, light scheme), "dark"
    (legible, nothing glaring) and "axe" (both schemes, laptop width only)."""
    fit = {
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
            GRADER,
            f"{GRADER}/reports/{report}",
            "/classes/default",
            "/admin",
            "/instructor",
            "/instructor/cluster",
            f"/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml",
        ],
    }
    dark = {
        LEARNER: [
            "/",
            *[f"/lessons/{LESSON}/{part}" for part in ("orient", "deep-dives", "code-trace", "history", "practice")],
            f"/lessons/{LESSON}/atlas",
            "/lessons/precision-by-numbers/formats",
            "/play",
            "/labs/fp8-step",
            "/labs/tp-sweep",
            *[f"/jobs/{jobs[k]}" for k in ("tp-sweep", "overlap-trace", "failed")],
            "/jobs",
            f"/lessons/{LESSON}/report",
            "/account",
            "/no/such/page",
        ],
        STAFF: [
            GRADER,
            f"{GRADER}/reports/{report}",
            "/classes/default",
            "/admin",
            "/instructor",
            f"/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml",
            "/instructor/cluster?saved=default",  # a .banner.ok
        ],
    }
    axe = {
        LEARNER: [
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
        STAFF: [GRADER, f"{GRADER}/reports/{report}", "/instructor", "/instructor/cluster?saved=default"],
    }
    pages: dict[str, dict[str, set[str]]] = {}
    for check, lists in (("fit", fit), ("dark", dark), ("axe", axe)):
        for email, paths in lists.items():
            for path in paths:
                pages.setdefault(email, {}).setdefault(path, set()).add(check)
    return pages


def _slug(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "home"


@pytest.mark.parametrize("width,height,name", SWEEP)
def test_every_page_fits_reads_in_the_dark_and_passes_axe(browser, live_server, seeded, width, height, name):
    """Each page once per width. Light scheme: no sideways scroll, a full-width header, named scroll boxes,
    captions not squeezed. Then the dark scheme on the same page: text against the background it really sits on
    (WCAG AA), form fields' borders, no light box glaring except the paper islands (figures, plots, /play
    drawings). At the laptop width, axe in each scheme."""
    base = live_server.url
    problems, low, light, violations = [], {}, {}, {}
    for email, pages in sweep_pages(seeded["jobs"], seeded["report"]).items():
        ctx = context_at(browser, width, height)
        page = ctx.new_page()
        login(page, base, email)
        for path, checks in pages.items():
            page.emulate_media(color_scheme="light")
            goto_settled(page, base + path)
            if "/edit" in path:
                page.locator(".cm-editor .cm-gutters").wait_for()  # CodeMirror has replaced the textarea
            if "fit" in checks:
                problems += _fit_problems(page, path, width, name, email)
            axe = "axe" in checks and name == "laptop"
            if axe and (found := serious_violations(page)):
                violations[f"light {path}"] = found
            if "dark" not in checks and not axe:
                continue
            _to_dark(page, path)
            bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert sum(rgb(bg)) < 3 * 60, f"{path}: the dark scheme is not in effect ({bg})"
            if "dark" in checks:
                screenshot(page, f"dark-{_slug(path)}-{name}")
                if found := page.evaluate(CONTRAST):
                    low[path] = found
                if found := page.evaluate(LIGHT_BOXES):
                    light[path] = found
            if axe and (found := serious_violations(page)):
                violations[f"dark {path}"] = found
        ctx.close()
    assert problems == []
    assert low == {}, low
    assert light == {}, light
    assert violations == {}, "axe: " + json.dumps(violations, indent=1)


def _to_dark(page, path: str) -> None:
    """Switch the loaded page to the dark scheme and let what listens for the change (CodeMirror's theme) follow."""
    page.emulate_media(color_scheme="dark")
    if "/edit" in path:  # one-dark's gutter, #282c34: the editor took the change, as a reload in the dark would
        page.wait_for_function(
            "() => getComputedStyle(document.querySelector('.cm-editor .cm-gutters')).backgroundColor"
            " === 'rgb(40, 44, 52)'"
        )
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => setTimeout(done)))")  # a rendered frame


def _fit_problems(page, path: str, width: int, name: str, email: str) -> list[str]:
    screenshot(page, f"polish-{_slug(path)}-{name}")
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
