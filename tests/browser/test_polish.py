"""What a learner, an instructor and a grader meet in their first minutes, in real Chromium at laptop width
and at phone widths (360 and 390 px): pages that fit, results that read as answers, lab pages that stay
short, feedback in colour, errors next to their fields, notices, the editor, dark mode, offline docs.

Every test writes screenshots under test-artifacts/screenshots/polish-*.png: look at them."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.app import labruns
from tests.app.reporting import CRASHED
from tests.browser.conftest import login, screenshot
from tests.browser.seed import Seeder
from tests.browser.test_lesson_quality import serious_violations

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

WIDTHS = [(1280, 900, "laptop"), (390, 844, "phone390"), (360, 740, "phone360")]
LESSON = "transformer-scaling"
LEARNER, STAFF = "polly@example.org", "stella@example.org"
CURRENT = {**labruns.TINY["fp8-step"], "recipe": "current"}

# Overflowing boxes must scroll by keyboard and say what they hold (axe: scrollable-region-focusable).
SCROLL_BOXES = """() => [...document.querySelectorAll('main *')]
  .filter(e => e.scrollWidth > e.clientWidth + 1 && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
  .filter(e => !e.closest('.cm-editor') && e.tagName !== 'PRE' && !e.matches('.pacing ol, .pacing ul'))
  .filter(e => !(e.tabIndex >= 0 && (e.getAttribute('aria-label') || e.getAttribute('aria-labelledby'))))
  .map(e => e.className || e.tagName)"""


@pytest.fixture(scope="module")
def seeded(live_server):
    s = Seeder(live_server.data)
    learner = s.user(LEARNER, name="Polly")
    staff = s.user(STAFF, roles=("learner", "instructor", "grader"), name="Stella")
    ids = {lab: s.job(learner, lab) for lab in ("env-check", "tp-sweep", "overlap-trace")}
    ids["fp8-delayed"] = s.job(learner, "fp8-step")
    ids["fp8-current"] = s.job(learner, "fp8-step", CURRENT, seconds=95)
    ids["failed"] = s.failed_job(learner, "tp-sweep", CRASHED)
    s.loss(ids["failed"], "The lab process was stopped from outside its run (SIGKILL, signal 9): the host's OOM killer")
    report = s.graded_report(learner, staff)
    yield {"jobs": ids, "report": report}
    s.close()


def _context(browser, width, height, **kw):
    ctx = browser.new_context(viewport={"width": width, "height": height}, **kw)
    ctx.set_default_timeout(15_000)
    return ctx


# a visible caption narrower than its table (a phone's display:block table once left "Run / #4 / (A) / and ..."
# one word per line)
SQUEEZED_CAPTIONS = """[...document.querySelectorAll('caption')]
  .filter(c => !c.classList.contains('sr-only') && c.getClientRects().length)
  .filter(c => c.getBoundingClientRect().width < 0.6 * c.closest('table').getBoundingClientRect().width)
  .map(c => c.textContent.trim().slice(0, 40))"""


def _overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


# ---- phones: every page fits ------------------------------------------------------------------------


@pytest.mark.parametrize("width,height,name", WIDTHS)
def test_every_page_fits_the_screen(browser, live_server, seeded, width, height, name):
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
            "/grader",
            f"/grader/reports/{seeded['report']}",
            "/instructor",
            "/instructor/cluster",
            f"/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml",
        ],
    }
    problems = []
    for email, paths in pages.items():
        ctx = _context(browser, width, height)
        page = ctx.new_page()
        login(page, base, email)
        for path in paths:
            page.goto(base + path)
            page.wait_for_load_state("networkidle")
            slug = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "home"
            screenshot(page, f"polish-{slug}-{name}")
            if (over := _overflow(page)) > 1:
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
        ctx.close()
    assert problems == []


# ---- result pages ---------------------------------------------------------------------------------


@pytest.mark.parametrize("width,height,name", WIDTHS[:2])
def test_a_result_leads_with_the_answer_then_plots_then_folded_tables(
    browser, live_server, seeded, width, height, name
):
    ctx = _context(browser, width, height)
    page = ctx.new_page()
    login(page, live_server.url, LEARNER)
    page.goto(f"{live_server.url}/jobs/{seeded['jobs']['fp8-delayed']}")
    result = page.get_by_test_id("result")
    answer = result.get_by_test_id("result-answer")
    expect(answer).to_be_visible()
    expect(page.get_by_test_id("honesty-label")).to_have_count(1)  # once, prominently
    assert "CPU emulation" not in result.locator("dl.summary").inner_text()  # not again in the cards
    order = result.evaluate(
        """r => ['[data-testid=result-answer]', 'figure.plot', '.table-block']
              .map(s => r.querySelector(s).getBoundingClientRect().top)"""
    )
    assert order == sorted(order), order
    text = result.inner_text()
    for raw in ("None", "True", "False"):
        assert not re.search(rf"\b{raw}\b", text), raw
    assert "% of tokens" in text
    folded = result.locator(".table-block details")
    assert folded.count() >= 1  # the 24-row FP8 tensor table shows five rows, the rest behind a summary
    expect(folded.first.locator("summary")).to_contain_text("Show all")
    screenshot(page, f"polish-result-fp8-{name}")
    folded.first.locator("summary").click()
    screenshot(page, f"polish-result-fp8-unfolded-{name}")
    # with JavaScript the timeline viewer takes the drawn timelines' place and fits its box at either width
    page.goto(f"{live_server.url}/jobs/{seeded['jobs']['overlap-trace']}")
    viewer = page.locator("section.tlv").first
    expect(viewer).to_be_visible()
    expect(page.locator("figure.plot.wide").first).to_be_hidden()
    assert viewer.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), name
    if name == "laptop":  # an 11-column table fits a laptop: its long headings wrap instead of pushing it out
        wraps = page.locator(".result .table-wrap")
        assert wraps.count() >= 2
        assert wraps.evaluate_all("ws => ws.filter(w => w.scrollWidth > w.clientWidth).length") == 0
    screenshot(page, f"polish-result-overlap-{name}")
    # a plot cut off by its box, on the job page or in a lab page's narrower result column, says so under it; one
    # that fits says nothing
    for path in (f"/jobs/{seeded['jobs']['overlap-trace']}", "/labs/overlap-trace"):
        page.goto(live_server.url + path)
        plots = page.locator("figure.plot")
        assert plots.count() >= 1, path
        wrong = plots.evaluate_all(
            """fs => fs.filter(f => { const box = f.querySelector('.scroll-box'), hint = f.querySelector('.scroll-hint');
                   return (box.scrollWidth > box.clientWidth + 1) !== (hint.getClientRects().length > 0); })
                 .map(f => f.querySelector('figcaption').textContent.trim().slice(0, 40))"""
        )
        assert wrong == [], (path, name, wrong)
    # a short table of sentences (env-check's FP8 recipes) fits a phone: its sentences wrap, none ends past the edge
    page.goto(f"{live_server.url}/jobs/{seeded['jobs']['env-check']}")
    recipes = page.locator(".result .table-wrap", has=page.locator("td.long")).first
    assert recipes.evaluate("w => w.scrollWidth <= w.clientWidth + 1"), name
    ctx.close()


# ---- lab pages ------------------------------------------------------------------------------------


def test_a_lab_page_stays_short_and_compares_two_runs(browser, live_server, seeded):
    s = Seeder(live_server.data)
    uid = s.user("runner@example.org", name="Rune")
    for _ in range(2):
        s.job(uid, "fp8-step")
        s.job(uid, "fp8-step", CURRENT, seconds=95)
    ctx = _context(browser, 1280, 900)
    page = ctx.new_page()
    login(page, live_server.url, "runner@example.org")
    page.goto(f"{live_server.url}/labs/fp8-step")
    height4 = page.evaluate("document.documentElement.scrollHeight")
    expect(page.locator("#job-list article.job")).to_have_count(1)  # only the latest run in full
    expect(page.locator("#earlier-runs tbody tr")).to_have_count(3)  # the others one line each
    expect(page.locator("#earlier-runs tbody tr").first).to_contain_text("steps=4")
    expect(page.locator("#earlier-runs")).to_contain_text("1 min 35 s")  # how long each run took
    table = page.get_by_test_id("comparison")
    expect(table).to_contain_text("recipe")
    row = table.locator("tr", has_text="recipe")
    expect(row.locator("td").nth(0)).to_have_text("delayed")
    expect(row.locator("td").nth(1)).to_have_text("current")
    # the answers are sentences: side by side above the table, each at least half a lab column wide
    answers = page.get_by_test_id("compare-answers").locator(":scope > div")
    expect(answers.nth(0)).to_contain_text("FP8 (delayed, emulated)")
    expect(answers.nth(1)).to_contain_text("FP8 (current, emulated)")
    boxes = answers.evaluate_all("ds => ds.map(d => d.getBoundingClientRect()).map(r => [r.top, r.width])")
    assert boxes[0][0] == boxes[1][0] and min(w for _, w in boxes) > 250, boxes
    screenshot(page, "polish-lab-fp8-compare-laptop")
    for _ in range(4):  # four more runs: one more line each in the list, nothing more
        s.job(uid, "fp8-step")
    page.reload()
    height8 = page.evaluate("document.documentElement.scrollHeight")
    assert (height8 - height4) / 4 < 100, (height4, height8)
    for _ in range(20):  # past the twenty lines a lab page lists, the page stops growing
        s.job(uid, "fp8-step")
    page.reload()
    height28 = page.evaluate("document.documentElement.scrollHeight")
    for _ in range(5):
        s.job(uid, "fp8-step")
    page.reload()
    assert page.evaluate("document.documentElement.scrollHeight") == height28 < 9000
    expect(page.get_by_role("link", name="All your jobs")).to_be_visible()
    # pick two other runs: the comparison is swapped in without a reload
    ids = page.locator("#cmp-a option").evaluate_all("os => os.map(o => o.value)")
    page.locator("#cmp-a").select_option(ids[-1])
    expect(page.get_by_test_id("comparison")).to_contain_text(f"#{ids[-1]}")
    s.close()
    ctx.close()


# ---- feedback, errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("width,height,name", WIDTHS[:2])
def test_answer_feedback_is_compact_and_coloured_by_outcome(browser, live_server, width, height, name):
    ctx = _context(browser, width, height)
    page = ctx.new_page()
    Seeder(live_server.data).user(f"fb-{name}@example.org")
    login(page, live_server.url, f"fb-{name}@example.org")
    page.goto(f"{live_server.url}/lessons/{LESSON}/practice")
    q = page.locator(".question").first
    q.get_by_label("B.", exact=False).check()
    q.get_by_role("button", name="Check").click()
    wrong = page.locator(".question").first.locator(".feedback")
    expect(wrong).to_contain_text("Not yet")
    style = wrong.evaluate("e => [getComputedStyle(e).whiteSpace, getComputedStyle(e).backgroundColor]")
    assert style[0] == "normal"  # the template's own line breaks do not become gaps
    assert _reddish(style[1]), style
    screenshot(page, f"polish-feedback-wrong-{name}")
    page.locator(".question").first.get_by_label("A.", exact=False).check()
    page.locator(".question").first.get_by_role("button", name="Check").click()
    right = page.locator(".question").first.locator(".feedback")
    expect(right).to_contain_text("Correct")
    assert _greenish(right.evaluate("e => getComputedStyle(e).backgroundColor"))
    # no gap taller than a line between the box's paragraphs
    gaps = right.evaluate(
        """e => [...e.children].slice(1).map((c, i) =>
             c.getBoundingClientRect().top - e.children[i].getBoundingClientRect().bottom)"""
    )
    assert max(gaps or [0]) < 30, gaps
    screenshot(page, f"polish-feedback-right-{name}")
    # a numeric answer may be a calculation
    numeric = page.locator(".question", has=page.locator("input[inputmode=decimal]")).first
    numeric.locator("input[name=answer]").fill("448/400")
    numeric.get_by_role("button", name="Check").click()
    expect(
        page.locator(".question", has=page.locator("input[inputmode=decimal]")).first.locator(".feedback")
    ).to_be_visible()
    ctx.close()


def _rgb(css: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", css)[:3])


def _reddish(css: str) -> bool:
    r, g, b = _rgb(css)
    return r > g + 10 and r > b + 10


def _greenish(css: str) -> bool:
    r, g, b = _rgb(css)
    return g > r + 10 and g > b


@pytest.mark.parametrize("width,height,name", WIDTHS[:2])
def test_lab_form_shows_every_error_next_to_its_field(browser, live_server, width, height, name):
    ctx = _context(browser, width, height)
    page = ctx.new_page()
    Seeder(live_server.data).user(f"form-{name}@example.org")
    login(page, live_server.url, f"form-{name}@example.org")
    page.goto(f"{live_server.url}/labs/tp-sweep")
    # a yes/no parameter: its box sits on its name's line and is described by its hint
    box, name_label = page.locator("#p-fp8"), page.locator("label[for=p-fp8]")
    b, lab = box.bounding_box(), name_label.bounding_box()
    assert b and lab and lab["y"] <= b["y"] + b["height"] / 2 <= lab["y"] + lab["height"], (b, lab)
    expect(box).to_have_attribute("aria-describedby", "h-fp8")
    page.locator("#p-degrees").fill("1, 2, 9")
    page.locator("#p-tokens").fill("1")
    page.locator("#p-steps").fill("many")
    page.get_by_role("button", name="Run tp-sweep").click()
    expect(page.locator("#lab-form-wrap [role=alert]").first).to_contain_text("3 fields below")
    expect(page.locator("#e-degrees")).to_have_text("degrees: each at most 8, got 9")
    expect(page.locator("#e-tokens")).to_have_text("tokens: at least 8, got 1")
    expect(page.locator("#e-steps")).to_have_text("steps: a whole number from 1 to 50, got 'many'")
    expect(page.locator("#p-tokens")).to_have_attribute("aria-invalid", "true")
    screenshot(page, f"polish-lab-form-errors-{name}")
    page.locator("#p-degrees").fill("1,3")
    page.locator("#p-tokens").fill("16")
    page.locator("#p-steps").fill("1")
    page.get_by_role("button", name="Run tp-sweep").click()
    expect(page.locator("#e-degrees")).to_contain_text("ffn(2048) % degree(3) = 2")  # at submit, not by the job
    expect(page.locator("#job-list article.job")).to_have_count(0)
    ctx.close()


@pytest.mark.parametrize("width,height,name", WIDTHS[:2])
def test_registration_shows_every_error_at_once(browser, live_server, seeded, width, height, name):
    ctx = _context(browser, width, height)
    page = ctx.new_page()
    page.goto(f"{live_server.url}/register")
    page.locator("#email").fill("not an address")
    page.locator("#display_name").fill("   ")
    page.locator("#password").fill("short")
    page.get_by_role("button", name="Register").click()
    expect(page.locator("#email-error")).to_have_text("enter an address like name@example.org")
    expect(page.locator("#display_name-error")).to_contain_text("use 1 to 80 characters")
    expect(page.locator("#password-error")).to_contain_text("(you gave 5)")
    expect(page.locator("#email")).to_have_value("not an address")  # what was typed stays
    expect(page.locator("#password")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#email")).to_be_focused()  # the first field to fix, not the top of the reloaded page
    assert _overflow(page) <= 0
    screenshot(page, f"polish-register-errors-{name}")
    page.locator("#email").fill(f"fixed-{name}@example.org")
    page.locator("#display_name").fill("Fay")
    page.locator("#password").fill("short")
    page.keyboard.press("Enter")
    expect(page.locator("#password-error")).to_be_visible()
    expect(page.locator("#password")).to_be_focused()
    # a refused login: the email stays, the focus is on the password to type again
    page.goto(f"{live_server.url}/login")
    page.locator("#email").fill(LEARNER)
    page.locator("#password").fill("not the password")
    page.keyboard.press("Enter")
    expect(page.locator("#login-error")).to_be_visible()
    expect(page.locator("#password")).to_be_focused()
    ctx.close()


# ---- notices ------------------------------------------------------------------------------------


def test_a_finished_job_is_announced_on_another_page(browser, live_server):
    ctx = _context(browser, 390, 844)
    page = ctx.new_page()
    Seeder(live_server.data).user("waiter@example.org")
    login(page, live_server.url, "waiter@example.org")
    page.goto(f"{live_server.url}/labs/env-check")
    page.get_by_role("button", name="Run env-check").click()
    expect(page.locator("#job-list article.job")).to_have_count(1)
    page.goto(f"{live_server.url}/lessons/{LESSON}/orient")  # the learner reads on while it runs
    notice = page.locator("#notices .notice")
    expect(notice).to_contain_text("Your env-check run", timeout=120_000)
    expect(notice).to_contain_text("finished")
    screenshot(page, "polish-notice-job-phone390")
    notice.get_by_role("link", name="See the result").click()
    expect(page.get_by_test_id("result-answer")).to_be_visible()
    expect(page.locator("#notices .notice")).to_have_count(0)  # seen: not announced again
    ctx.close()


def test_a_new_grade_is_announced_and_links_to_it(browser, live_server, seeded):
    ctx = _context(browser, 1280, 900)
    page = ctx.new_page()
    login(page, live_server.url, LEARNER)  # a fresh session asks once whether a grade arrived
    notice = page.locator("#notices .notice-grade")
    expect(notice).to_contain_text("was graded: 16 / 20")
    screenshot(page, "polish-notice-grade-laptop")
    notice.get_by_role("link").click()
    expect(page).to_have_url(re.compile(f"/lessons/{LESSON}/report\\?v=1#version-1$"))
    expect(page.locator("#version-1").get_by_test_id("grade")).to_contain_text("16 / 20")
    feedback = page.locator("#version-1 .grade-feedback")
    assert feedback.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"  # the grader's line breaks
    ctx.close()


# ---- authoring ----------------------------------------------------------------------------------


def test_the_editor_highlights_yaml_numbers_lines_and_marks_the_broken_one(browser, live_server, seeded):
    ctx = _context(browser, 1280, 900)
    page = ctx.new_page()
    login(page, live_server.url, STAFF)
    page.goto(f"{live_server.url}/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml")
    editor = page.locator(".cm-editor")
    expect(editor).to_be_visible()
    expect(page.locator("#text")).to_be_hidden()  # the textarea stays the form field, under the editor
    expect(editor.locator(".cm-lineNumbers .cm-gutterElement", has_text="12")).to_have_count(1)
    assert editor.locator(".cm-content span[class]").count() > 10  # highlighted tokens
    line2 = editor.locator(".cm-line").nth(1)
    line2.click()
    page.keyboard.press("End")
    page.keyboard.type(": broken")
    preview = page.locator("#preview")
    expect(preview).to_contain_text("Put the whole text in double quotes", timeout=10_000)
    expect(preview).to_contain_text("1 problem")
    expect(editor.locator(".cm-error-line")).to_have_count(1)
    assert "broken" in page.locator("#text").input_value()  # what is typed reaches the form
    screenshot(page, "polish-editor-error-laptop")
    ctx.close()
    # without JavaScript the page is a plain textarea form
    ctx = _context(browser, 1280, 900, java_script_enabled=False)
    page = ctx.new_page()
    login(page, live_server.url, STAFF)
    page.goto(f"{live_server.url}/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml")
    expect(page.locator("textarea#text")).to_be_visible()
    expect(page.locator(".cm-editor")).to_have_count(0)
    ctx.close()


def test_a_stale_token_in_the_editor_renews_it_and_never_publishes(browser, live_server, seeded):
    """The editor's form previews on input (hx-post .../preview) but its action publishes: when its token went
    stale, the page takes the fresh one and says the next try goes through; it must not send the form again
    (static/requests.js resends only a form htmx sends on submit to its own action)."""
    ctx = _context(browser, 1280, 900)
    page = ctx.new_page()
    login(page, live_server.url, STAFF)
    url = f"{live_server.url}/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml"
    page.goto(url)
    sent = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    page.evaluate(
        """() => {
          document.body.setAttribute('hx-headers:inherited', '{"X-CSRF-Token": "stale"}');
          document.querySelectorAll('input[name=csrf_token]').forEach(i => { i.value = 'stale'; });
        }"""
    )
    editor = page.locator(".cm-editor")
    editor.locator(".cm-line").nth(1).click()
    page.keyboard.press("End")
    page.keyboard.type(" x")
    alert = page.locator("#request-error")
    expect(alert).to_contain_text("the next try goes through", timeout=10_000)
    with page.expect_response(lambda r: r.url.endswith("/preview") and r.status == 200, timeout=10_000):
        page.keyboard.type("y")  # the next preview carries the fresh token
    expect(alert).to_be_hidden()
    assert page.url == url and not [u for u in sent if "/publish" in u], sent
    assert len([u for u in sent if u.endswith("/preview")]) == 2, sent
    ctx.close()


# ---- dark mode, accessibility -------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_pages_pass_axe_in_both_colour_schemes(browser, live_server, seeded, scheme):
    jobs = seeded["jobs"]
    found = {}
    for email, paths in {
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
        STAFF: ["/grader", f"/grader/reports/{seeded['report']}", "/instructor", "/instructor/cluster?saved=default"],
    }.items():
        ctx = _context(browser, 1280, 900, color_scheme=scheme)
        page = ctx.new_page()
        login(page, live_server.url, email)
        for path in paths:
            page.goto(live_server.url + path)
            page.wait_for_load_state("networkidle")
            if v := serious_violations(page):
                found[path] = v
            if scheme == "dark" and path in (
                "/",
                f"/lessons/{LESSON}/practice",
                "/play",
                f"/jobs/{jobs['tp-sweep']}",
                "/grader",
            ):
                slug = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "home"
                screenshot(page, f"polish-dark-{slug}-laptop")
        if scheme == "dark":
            bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert sum(_rgb(bg)) < 3 * 60, bg  # the dark scheme is in effect
        ctx.close()
    assert found == {}, json.dumps(found, indent=1)


# ---- offline ------------------------------------------------------------------------------------


def test_nothing_is_fetched_from_another_host_and_the_api_docs_render(browser, live_server, seeded):
    ctx = _context(browser, 1280, 900)
    outside = []

    def guard(route):
        url = route.request.url
        if url.startswith(live_server.url) or url.startswith("data:"):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    ctx.route("**/*", guard)
    page = ctx.new_page()
    login(page, live_server.url, STAFF)
    for path in ["/", f"/lessons/{LESSON}/deep-dives", "/labs/tp-sweep", f"/jobs/{seeded['jobs']['tp-sweep']}"]:
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
    page.goto(f"{live_server.url}/api/v1/docs")
    ops = page.locator(".opblock-summary-path")
    expect(ops.first).to_be_visible()
    paths = ops.all_inner_texts()
    assert any("/api/v1/jobs" in p for p in paths) and len(paths) >= 8
    screenshot(page, "polish-api-docs-laptop")
    assert outside == []
    ctx.close()


@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_the_api_docs_follow_the_readers_colour_scheme(browser, live_server, scheme):
    """Swagger UI 5.35 has a dark theme under <html class="dark-mode">; the page turns it on when the system asks
    for dark (it stayed white before), and its line back to the course stays legible in both."""
    ctx = _context(browser, 1280, 800, color_scheme=scheme)
    page = ctx.new_page()
    page.goto(f"{live_server.url}/api/v1/docs")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
    background = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert page.evaluate("document.documentElement.classList.contains('dark-mode')") == (scheme == "dark")
    assert background == ("rgb(28, 32, 34)" if scheme == "dark" else "rgba(0, 0, 0, 0)")
    link = page.get_by_role("link", name="Account")
    colour = link.evaluate("a => getComputedStyle(a).color")
    assert colour == ("rgb(140, 180, 255)" if scheme == "dark" else "rgb(0, 0, 238)")
    screenshot(page, f"polish-api-docs-{scheme}-laptop")
    ctx.close()


def test_without_javascript_a_refused_form_comes_back_filled_in(browser, live_server):
    """No script renews a stale token on a plain form: the refusal page offers the form back with what was
    typed and the current token, and sending it from there saves the answer."""
    ctx = _context(browser, 390, 844, java_script_enabled=False)
    page = ctx.new_page()
    email = "nojs@example.org"
    Seeder(live_server.data).user(email)
    login(page, live_server.url, email)
    page.goto(f"{live_server.url}/lessons/{LESSON}/deep-dives")
    other = ctx.new_page()  # logged out and in again in another tab: this page's token is out of date
    other.goto(live_server.url + "/")
    other.get_by_role("button", name="Log out").click()
    login(other, live_server.url, email)
    first = page.locator(".pause").first
    text = "One outlier sets a per-tensor scale,\nso the small values fall below FP8's range."
    first.get_by_label("Your answer").fill(text)
    first.get_by_role("button", name="Save my answer and reveal the reference").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Not sent: the page was out of date")
    resend = page.get_by_test_id("resend")
    expect(resend.get_by_label("answer")).to_have_value(text)
    screenshot(page, "polish-resend-nojs-phone390")
    assert _overflow(page) <= 1
    resend.get_by_role("button", name="Send it again").click()
    # without JavaScript the answer comes back as a whole page, in the site's frame, with a way back
    saved = page.locator(".pause")
    expect(saved).to_contain_text("Reference answer")
    expect(saved.locator(".your-answer")).to_contain_text("so the small values fall below")
    expect(page.locator("header.site")).to_be_visible()
    screenshot(page, "polish-answered-nojs-phone390")
    assert _overflow(page) <= 1
    page.get_by_role("link", name="Back to the part").click()
    expect(page).to_have_url(re.compile(f"/lessons/{LESSON}/deep-dives#pause-"))
    expect(page.locator(".pause").first).to_contain_text("so the small values fall below")
    ctx.close()


# Resolves once htmx has finished with a reading-time beat answered 401 (static/requests.js has had its say).
BEAT_401_HANDLED = """() => { window.beat401Handled = new Promise(done => document.addEventListener('htmx:finally:request',
  ev => { if (ev.detail.ctx.response?.status === 401 && ev.detail.ctx.sourceElement?.getAttribute('hx-post')?.endsWith('/time')) done(true); })); }"""


@pytest.mark.parametrize(("width", "height", "name"), WIDTHS[:2])
def test_a_failed_action_says_why_and_keeps_what_was_typed(browser, live_server, width, height, name):
    """An htmx action whose answer does not come back into the page says why in an alert at the foot of the screen
    (static/requests.js) instead of doing nothing, and what the learner typed stays: a server that cannot be
    reached; a form token gone out of date (a login in another tab), which the page renews so the next press
    works without a reload; being logged out, which keeps the page (no redirect) and links to a login in a new
    tab. Background requests stay quiet."""
    ctx = _context(browser, width, height)
    page = ctx.new_page()
    email = f"fail-{name}@example.org"
    Seeder(live_server.data).user(email)
    login(page, live_server.url, email)
    page.clock.install()  # time runs as usual; run_for below brings the reading-time beat forward
    url = f"{live_server.url}/lessons/{LESSON}/deep-dives"
    page.goto(url)
    alert = page.locator("#request-error")
    expect(alert).to_be_hidden()
    first, second = page.locator(".pause").nth(0), page.locator(".pause").nth(1)
    text = "A fixed scale either clips the outliers or leaves most of the range unused."
    first.get_by_label("Your answer").fill(text)
    save = first.get_by_role("button", name="Save my answer and reveal the reference")

    # no answer at all
    page.route("**/pauses/**", lambda route: route.abort())
    save.click()
    expect(alert).to_contain_text("could not be reached")
    expect(first.get_by_label("Your answer")).to_have_value(text)
    alert.get_by_role("button", name="Dismiss").click()
    expect(alert).to_be_hidden()
    page.unroute("**/pauses/**")

    # logged out and in again in another tab: a new session, so this page's form token is out of date
    other = ctx.new_page()
    other.goto(live_server.url + "/")
    other.get_by_role("button", name="Log out").click()
    login(other, live_server.url, email)
    with page.expect_response(lambda r: "/pauses/" in r.url and r.status == 403):
        save.click()  # refused; the page takes the token the 403 brought and sends the form again by itself
    expect(first).to_contain_text("Reference answer")
    expect(first).to_contain_text(text)
    expect(alert).to_be_hidden()

    # logged out (everywhere, from another tab): the page stays, with what was typed, and offers a login
    other.get_by_role("button", name="Log out").click()
    second.get_by_label("Your answer").fill("Each axis splits a different dimension.")
    second.get_by_role("button", name="Save my answer and reveal the reference").click()
    expect(alert).to_contain_text("You are logged out")
    expect(alert.get_by_role("link", name="log in again in a new tab")).to_have_attribute("target", "_blank")
    expect(page).to_have_url(url)
    expect(second.get_by_label("Your answer")).to_have_value("Each axis splits a different dimension.")
    box = alert.bounding_box()
    assert box and box["y"] + box["height"] <= height and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    screenshot(page, f"polish-request-error-{name}", full_page=False)  # the alert is fixed to the screen
    login(other, live_server.url, email)  # ...in the new tab; then the same button saves
    second.get_by_role("button", name="Save my answer and reveal the reference").click()
    expect(second).to_contain_text("Reference answer")
    expect(alert).to_be_hidden()

    # a background request that fails (the reading-time beat, logged out or unreachable) stays quiet
    page.route("**/progress/**", lambda route: route.abort())
    with page.expect_event("requestfailed", lambda r: r.url.endswith("/progress/deep-dives/time")):
        page.clock.run_for(21_000)
    page.unroute("**/progress/**")
    with page.expect_response(lambda r: r.url.endswith("/progress/deep-dives/time")) as beat:
        page.clock.run_for(21_000)
    assert beat.value.status == 204
    other.get_by_role("button", name="Log out").click()
    with page.expect_response(lambda r: r.url.endswith("/progress/deep-dives/time")) as beat:
        page.clock.run_for(21_000)
    assert beat.value.status == 403  # logged out: refused before the login check; quiet all the same
    page.evaluate(BEAT_401_HANDLED)
    with page.expect_response(lambda r: r.url.endswith("/progress/deep-dives/time")) as beat:
        page.clock.run_for(21_000)
    assert beat.value.status == 401  # with the token the 403 brought: logged out, and no redirect
    page.evaluate("() => window.beat401Handled")  # static/requests.js has handled the answer
    expect(alert).to_be_hidden()
    expect(page).to_have_url(url)
    ctx.close()


# Chips of the phone's pacing strip wider than the strip itself: a long title ran past both edges ("…and pipeline").
WIDE_CHIPS = """[...document.querySelectorAll('.pacing li')]
  .filter(li => li.getBoundingClientRect().width > li.parentElement.clientWidth)
  .map(li => li.textContent.replace(/\\s+/g, ' ').trim())"""


@pytest.mark.parametrize("width,height,name", WIDTHS[1:])
def test_a_long_part_title_wraps_inside_its_pacing_chip(browser, live_server, seeded, width, height, name):
    ctx = _context(browser, width, height)
    page = ctx.new_page()
    login(page, live_server.url, LEARNER)
    page.goto(f"{live_server.url}/lessons/precision-by-numbers/collectives-memory")
    current = page.locator(".pacing li.current")
    expect(current).to_contain_text("Collectives, memory and pipelines")
    assert page.evaluate(WIDE_CHIPS) == []
    strip, chip = page.locator(".pacing ol").bounding_box(), current.bounding_box()
    assert strip and chip and chip["x"] >= strip["x"] and chip["x"] + chip["width"] <= strip["x"] + strip["width"]
    page.goto(f"{live_server.url}/lessons/{LESSON}/orient")
    link = page.locator("#lesson-head a", has_text="Hands-on lab")
    assert link.evaluate("a => a.getClientRects().length") == 1  # one line box: "Hands-/on lab" made two
    screenshot(page, f"polish-pacing-chips-{name}", full_page=False)
    ctx.close()
