"""Dark mode (prefers-color-scheme: dark) where the page sweep's general checks cannot reach, in real Chromium at
1280 x 800: the paper islands that must stay light (lesson figures, lab plots: their SVGs draw dark ink), the code
trace turned dark, the memory bar's track and HBM mark, banners of each kind, CodeMirror's one-dark gutter; and the
light scheme unchanged where the dark fixes reach. Every page's text contrast, glaring boxes and axe in the dark
scheme are checked in the page sweep, tests/browser/test_pages_fit.py.

Screenshots: test-artifacts/screenshots/dark-*.png: look at them."""

from __future__ import annotations

import pytest

from tests.browser.conftest import login, screenshot
from tests.browser.pages import CONTRAST, LEARNER, LESSON, LUM, STAFF
from tests.browser.settle import goto_settled

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


def _contrast(a: float, b: float) -> float:
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def _context(browser, width, height, scheme="dark"):
    ctx = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    ctx.set_default_timeout(15_000)
    return ctx


def test_dark_paper_islands_code_trace_memory_bar_and_editor(browser, live_server, seeded):
    ctx = _context(browser, 1280, 800)
    page = ctx.new_page()
    login(page, live_server.url, STAFF)

    def luminance(colour: str) -> float:
        return page.evaluate(f"({LUM})({colour!r})")

    # Figures and plots: dark ink, so they stay on light paper, dimmed a little against glare.
    page.goto(f"{live_server.url}/lessons/{LESSON}/deep-dives")
    box = page.locator(".lesson-figure .figure-scroll").first
    assert luminance(box.evaluate("e => getComputedStyle(e).backgroundColor")) > 0.9
    assert box.evaluate("e => getComputedStyle(e).filter") == "brightness(0.9)"
    page.goto(f"{live_server.url}/jobs/{seeded['jobs']['tp-sweep']}")
    plot = page.locator("figure.plot .scroll-box").first
    assert luminance(plot.evaluate("e => getComputedStyle(e).backgroundColor")) > 0.9

    # The code trace is dark, its line numbers and tokens legible on it and on a lit line.
    page.goto(f"{live_server.url}/lessons/{LESSON}/code-trace")
    code = page.locator(".trace pre.code").first
    code_bg = luminance(code.evaluate("e => getComputedStyle(e).backgroundColor"))
    assert code_bg < 0.02  # not the light scheme's #f7f8fa (0.94): a white box on the dark page
    page.locator(".trace-step").first.click()
    lit = page.locator(".trace .line.hl").first
    lit_bg = luminance(lit.evaluate("e => getComputedStyle(e).backgroundColor"))
    assert lit_bg < 0.1  # not the light scheme's #fff0b3
    colours = code.evaluate(
        "e => [...new Set([...e.querySelectorAll('.ln, [class^=tok-]')].map(t => getComputedStyle(t).color))]"
    )
    assert len(colours) >= 4
    for colour in colours:
        ink = luminance(colour)
        assert _contrast(ink, code_bg) >= 4.5 and _contrast(ink, lit_bg) >= 4.5, colour

    # The memory bar: a dark track, and the HBM line and its legend key at 3:1 (non-text) on the card.
    page.goto(f"{live_server.url}/play/memory")
    card = luminance(page.locator("#tool-memory").evaluate("e => getComputedStyle(e).backgroundColor"))
    track = page.locator("svg.membar > rect").first.evaluate("e => getComputedStyle(e).fill")
    assert luminance(track) < 0.1, track  # not the light scheme's #f3f5f8
    for what, js in [("line", "svg.membar line"), ("key", ".membar-legend .hbm-key")]:
        prop = "stroke" if what == "line" else "backgroundColor"
        colour = page.locator(js).first.evaluate(f"e => getComputedStyle(e).{prop}")
        assert _contrast(luminance(colour), card) >= 3, (
            what,
            colour,
        )  # the light scheme's #a4161a is 2.2:1 on a dark card
    page.locator("svg.membar").scroll_into_view_if_needed()
    screenshot(page, "dark-play-memory-laptop", full_page=False)

    # Banners of each kind (planted on the page, as the templates write them): text 4.5:1, border 3:1 on the page.
    page.goto(f"{live_server.url}/classes/default/grader")
    page.evaluate(
        """() => document.querySelector('main').insertAdjacentHTML('afterbegin',
        '<p class="banner" id="b1">Caution</p><p class="banner ok" id="b2">Saved</p><p class="banner error" id="b3">No</p>')"""
    )
    wash = luminance(page.evaluate("getComputedStyle(document.documentElement).backgroundColor"))
    for bid in ("b1", "b2", "b3"):
        banner = page.locator(f"#{bid}")
        fill = luminance(banner.evaluate("e => getComputedStyle(e).backgroundColor"))
        assert _contrast(luminance(banner.evaluate("e => getComputedStyle(e).color")), fill) >= 4.5, bid
        assert _contrast(luminance(banner.evaluate("e => getComputedStyle(e).borderTopColor")), wash) >= 3, bid

    # The editor uses CodeMirror's one-dark theme, its line numbers legible on its gutter.
    page.goto(f"{live_server.url}/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml")
    gutter = page.locator(".cm-editor .cm-gutters")
    gutter.wait_for()
    bg = luminance(gutter.evaluate("e => getComputedStyle(e).backgroundColor"))
    ink = luminance(gutter.evaluate("e => getComputedStyle(e).color"))
    assert bg < 0.05  # one-dark's #282c34, not the light theme
    assert _contrast(ink, bg) >= 4.5  # one-dark's own #7d8799 is 3.86:1
    ctx.close()


@pytest.mark.parametrize("path", [f"/lessons/{LESSON}/code-trace", "/play/memory"])
def test_light_scheme_unchanged_where_the_dark_fixes_reach(browser, live_server, seeded, path):
    """The light scheme keeps its light code trace and passes the same contrast check."""
    ctx = _context(browser, 1280, 800, scheme="light")
    page = ctx.new_page()
    login(page, live_server.url, LEARNER)
    goto_settled(page, live_server.url + path)
    assert page.evaluate(CONTRAST) == []
    if "code-trace" in path:
        bg = page.locator(".trace pre.code").evaluate("e => getComputedStyle(e).backgroundColor")
        assert bg == "rgb(247, 248, 250)"
    else:
        assert page.locator("svg.membar > rect").first.evaluate("e => getComputedStyle(e).fill") == "rgb(243, 245, 248)"
    ctx.close()
