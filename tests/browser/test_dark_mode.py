"""Dark mode (prefers-color-scheme: dark), measured in real Chromium at 1280 x 800 and 390 x 844: text against
the background it really sits on (WCAG AA), form fields' borders, no light boxes glaring on the dark page
except the paper islands that must stay light (lesson figures, lab plots, /play drawings: their SVGs draw dark
ink), the code trace turned dark, the memory bar's track and HBM mark, CodeMirror's one-dark gutter; at the laptop width, axe in the dark scheme on the pages test_pages_fit.py checks
in the light one (the same visit serves both).

Screenshots: test-artifacts/screenshots/dark-*.png: look at them."""

from __future__ import annotations

import json
import re

import pytest

from tests.app.reporting import CRASHED
from tests.browser.conftest import login, screenshot
from tests.browser.pages import rgb
from tests.browser.seed import Seeder
from tests.browser.settle import goto_settled
from tests.browser.test_lesson_quality import serious_violations
from tests.browser.test_pages_fit import axe_pages

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

LEARNER, STAFF = "dana@example.org", "dexter@example.org"
LESSON = "transformer-scaling"
WIDTHS = [(1280, 800, "laptop"), (390, 844, "phone390")]

# WCAG contrast of every visible element's own text against its effective background: the first opaque
# background up the tree, with translucent ones blended over it. Large text (24 px, or 18.66 px bold) needs 3:1,
# the rest 4.5:1; a text field's border needs 3:1 against what is around it. SVG text is the paper islands'.
CONTRAST = """() => {
  const parse = s => { const m = s.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const blend = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const bgOf = el => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let base = [255, 255, 255, 1]; for (let i = layers.length - 1; i >= 0; i--) base = blend(layers[i], base); return base; };
  const name = e => e.tagName.toLowerCase() + (typeof e.className === 'string' && e.className.trim() ? '.' + e.className.trim().split(/\\s+/).join('.') : '');
  const shown = e => e.getClientRects().length && getComputedStyle(e).visibility === 'visible'
    && parseFloat(getComputedStyle(e).opacity) > 0 && !e.closest('.sr-only, svg');
  const low = [];
  for (const e of document.querySelectorAll('body *')) {
    if (!shown(e)) continue;
    const cs = getComputedStyle(e), bg = bgOf(e);
    const text = [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent.trim()).join(' ').trim();
    if (text) {
      const size = parseFloat(cs.fontSize), need = size >= 24 || (size >= 18.66 && parseInt(cs.fontWeight) >= 700) ? 3 : 4.5;
      const r = ratio(blend(parse(cs.color), bg), bg);
      if (r < need) low.push(`${name(e)} "${text.slice(0, 30)}": ${r.toFixed(2)} < ${need} (${cs.color} on rgb(${bg.slice(0, 3).map(Math.round)}))`);
    }
    if (e.matches('input:not([type=checkbox]):not([type=radio]):not([type=hidden]), select, textarea')) {
      const around = bgOf(e.parentElement), r = ratio(blend(parse(cs.borderTopColor), around), around);
      if (r < 3) low.push(`${name(e)} border: ${r.toFixed(2)} < 3`);
    }
  }
  return low;
}"""

# Boxes with a light background (relative luminance over 0.35) on a dark page. Allowed: buttons (light blue with
# dark ink), the memory bar legend's and the timeline viewer's colour keys, and the paper islands that must stay
# light.
LIGHT_BOXES = """() => {
  const lum = s => { const p = s.match(/[\\d.]+/g).map(Number); if (p.length > 3 && p[3] < 0.5) return 0;
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(p[0]) + 0.7152 * f(p[1]) + 0.0722 * f(p[2]); };
  const islands = '.figure-scroll, figure.plot .scroll-box, figure.plot img, .plotv-chart, svg.numberline, button, .button, .membar-legend .key, .tlv-key';
  return [...document.querySelectorAll('body *')]
    .filter(e => e.getClientRects().length && !e.matches(islands) && lum(getComputedStyle(e).backgroundColor) > 0.35)
    .map(e => e.tagName.toLowerCase() + '.' + (typeof e.className === 'string' ? e.className : '') + ' ' + getComputedStyle(e).backgroundColor);
}"""

LUM = """c => { const p = c.match(/[\\d.]+/g).map(Number);
  const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(p[0]) + 0.7152 * f(p[1]) + 0.0722 * f(p[2]); }"""


def _contrast(a: float, b: float) -> float:
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


@pytest.fixture(scope="module")
def dark_seeded(live_server):
    s = Seeder(live_server.data)
    learner = s.user(LEARNER, name="Dana")
    staff = s.user(STAFF, roles=("learner", "instructor", "grader"), name="Dexter")
    jobs = {lab: s.job(learner, lab) for lab in ("env-check", "tp-sweep", "overlap-trace", "fp8-step")}
    jobs["failed"] = s.failed_job(learner, "tp-sweep", CRASHED)
    report = s.graded_report(learner, staff)
    yield {"jobs": jobs, "report": report}
    s.close()


def _context(browser, width, height, scheme="dark"):
    ctx = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    ctx.set_default_timeout(15_000)
    return ctx


def _slug(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "home"


@pytest.mark.parametrize("width,height,name", WIDTHS)
def test_dark_pages_have_legible_text_and_no_glaring_boxes(browser, live_server, dark_seeded, width, height, name):
    jobs = dark_seeded["jobs"]
    pages = {
        LEARNER: [
            "/",
            f"/lessons/{LESSON}/orient",
            f"/lessons/{LESSON}/deep-dives",
            f"/lessons/{LESSON}/code-trace",
            f"/lessons/{LESSON}/history",
            f"/lessons/{LESSON}/practice",
            f"/lessons/{LESSON}/atlas",
            "/lessons/precision-by-numbers/formats",
            "/play",
            "/labs/fp8-step",
            "/labs/tp-sweep",
            f"/jobs/{jobs['tp-sweep']}",
            f"/jobs/{jobs['overlap-trace']}",
            f"/jobs/{jobs['failed']}",
            "/jobs",
            f"/lessons/{LESSON}/report",
            "/account",
            "/no/such/page",
        ],
        STAFF: [
            "/classes/default/grader",
            f"/classes/default/grader/reports/{dark_seeded['report']}",
            "/instructor",
            f"/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml",
            "/instructor/cluster?saved=default",  # a .banner.ok
        ],
    }
    axe = axe_pages(jobs, dark_seeded["report"], LEARNER, STAFF) if name == "laptop" else {}
    low, light, violations = {}, {}, {}
    for email, paths in pages.items():
        ctx = _context(browser, width, height)
        page = ctx.new_page()
        login(page, live_server.url, email)
        assert set(axe.get(email, [])) <= set(paths), "every axe page is in the dark sweep"
        for path in paths:
            goto_settled(page, live_server.url + path)
            if "/edit" in path:
                page.locator(".cm-editor .cm-gutters").wait_for()  # CodeMirror has replaced the textarea
            screenshot(page, f"dark-{_slug(path)}-{name}")
            if found := page.evaluate(CONTRAST):
                low[path] = found
            if found := page.evaluate(LIGHT_BOXES):
                light[path] = found
            if path in axe.get(email, []) and (found := serious_violations(page)):
                violations[path] = found
        bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert sum(rgb(bg)) < 3 * 60, bg  # the dark scheme is in effect
        ctx.close()
    assert low == {}, low
    assert light == {}, light
    assert violations == {}, "axe (dark scheme): " + json.dumps(violations, indent=1)


def test_dark_paper_islands_code_trace_memory_bar_and_editor(browser, live_server, dark_seeded):
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
    page.goto(f"{live_server.url}/jobs/{dark_seeded['jobs']['tp-sweep']}")
    plot = page.locator("figure.plot .scroll-box").first
    assert luminance(plot.evaluate("e => getComputedStyle(e).backgroundColor")) > 0.9

    # The code trace is dark, its line numbers and tokens legible on it and on a lit line.
    page.goto(f"{live_server.url}/lessons/{LESSON}/code-trace")
    code = page.locator(".trace pre.code").first
    code_bg = luminance(code.evaluate("e => getComputedStyle(e).backgroundColor"))
    assert code_bg < 0.02  # was #f7f8fa (0.94): a white box on the dark page
    page.locator(".trace-step").first.click()
    lit = page.locator(".trace .line.hl").first
    lit_bg = luminance(lit.evaluate("e => getComputedStyle(e).backgroundColor"))
    assert lit_bg < 0.1  # was #fff0b3
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
    assert luminance(track) < 0.1, track  # was #f3f5f8
    for what, js in [("line", "svg.membar line"), ("key", ".membar-legend .hbm-key")]:
        prop = "stroke" if what == "line" else "backgroundColor"
        colour = page.locator(js).first.evaluate(f"e => getComputedStyle(e).{prop}")
        assert _contrast(luminance(colour), card) >= 3, (what, colour)  # #a4161a was 2.2:1
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
    assert _contrast(ink, bg) >= 4.5  # one-dark's #7d8799 was 3.86:1
    ctx.close()


@pytest.mark.parametrize("path", [f"/lessons/{LESSON}/code-trace", "/play/memory"])
def test_light_scheme_unchanged_where_the_dark_fixes_reach(browser, live_server, dark_seeded, path):
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
