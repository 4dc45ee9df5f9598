"""A result reads as an answer first (then plots, then folded tables); a lab page stays short and compares two
runs. Screenshots: test-artifacts/screenshots/polish-*.png."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.pages import (
    CURRENT,
    LEARNER,
    WIDTHS,
    context_at,
)
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


@pytest.mark.parametrize("width,height,name", WIDTHS[:2])
def test_a_result_leads_with_the_answer_then_plots_then_folded_tables(
    browser, live_server, seeded, width, height, name
):
    ctx = context_at(browser, width, height)
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


def settled_height(page) -> int:
    """The page's height once its requests are done and the plots' script has drawn them (two frames on)."""
    page.wait_for_load_state("networkidle")
    return page.evaluate(
        "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame("
        "() => done(document.documentElement.scrollHeight))))"
    )


def test_a_lab_page_stays_short_and_compares_two_runs(browser, live_server, seeded):
    s = Seeder(live_server.data)
    uid = s.user("runner@example.org", name="Rune")
    for _ in range(2):
        s.job(uid, "fp8-step")
        s.job(uid, "fp8-step", CURRENT, seconds=95)
    ctx = context_at(browser, 1280, 900)
    page = ctx.new_page()
    login(page, live_server.url, "runner@example.org")
    page.goto(f"{live_server.url}/labs/fp8-step")
    height4 = settled_height(page)
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
    height8 = settled_height(page)
    assert (height8 - height4) / 4 < 100, (height4, height8)
    for _ in range(20):  # past the twenty lines a lab page lists, the page stops growing
        s.job(uid, "fp8-step")
    page.reload()
    height28 = settled_height(page)
    for _ in range(5):
        s.job(uid, "fp8-step")
    page.reload()
    assert settled_height(page) == height28 < 9000
    expect(page.get_by_role("link", name="All your jobs")).to_be_visible()
    # pick two other runs: the comparison is swapped in without a reload
    ids = page.locator("#cmp-a option").evaluate_all("os => os.map(o => o.value)")
    page.locator("#cmp-a").select_option(ids[-1])
    expect(page.get_by_test_id("comparison")).to_contain_text(f"#{ids[-1]}")
    s.close()
    ctx.close()
