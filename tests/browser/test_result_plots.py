"""Result plots in real Chromium at 1280×800 and 390×844: a loss or scale plot reads out a point's step
and values on hover and on keyboard focus; comparing two runs draws both on one axis with a legend naming each; the
drawn SVG stays the view without JavaScript. And two layouts: the report's run menu at phone width, and the grader's
review page at both widths, measured by boxes.

Screenshots: test-artifacts/screenshots/result-plot-*.png, report-run-menu-*.png, grader-review-*.png."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SIZES, screenshot
from tests.browser.seed import Seeder
from tests.browser.test_lesson_quality import serious_violations
from tests.browser.test_report_grading_tasks import _grader

pytestmark = pytest.mark.browser

LESSON = "transformer-scaling"

# Elements under `root` whose box reaches past the viewport's right edge, or that scroll sideways inside.
OVERFLOW = """(root) => {
  const vw = document.documentElement.clientWidth, out = [];
  for (const el of document.querySelectorAll(root + ' *')) {
    const r = el.getBoundingClientRect();
    if (!r.width || getComputedStyle(el).position === 'fixed') continue;
    if (el.closest('.table-wrap, .scroll-box, .tlv-plot, .sr-only')) continue;  // boxes that scroll by design
    if (r.right > vw + 1) out.push(`${el.tagName}.${el.className}: right ${Math.round(r.right)} > ${vw}`);
  }
  return out.slice(0, 8);
}"""


@pytest.fixture(scope="module")
def people(live_server) -> dict:
    """A learner with two fp8-step runs (different parameters) and a run of each other lab, and a grader who has
    graded the learner's report."""
    s = Seeder(live_server.data)
    uid = s.user("plots@example.org", name="Pia")
    _grader(s, "plots-grader@example.org")  # a grader assigned to the lesson
    grader = s.user("plots-grader@example.org")
    first = s.job(uid, "fp8-step")
    sweep = s.job(uid, "tp-sweep")
    s.job(uid, "overlap-trace")
    second = s.job(uid, "fp8-step", {**_tiny_fp8(), "recipe": "current"})
    report = s.graded_report(uid, grader)
    s.close()
    return {
        "email": "plots@example.org",
        "grader": "plots-grader@example.org",
        "a": first,
        "b": second,
        "report": report,
        "sweep": sweep,
    }


def _tiny_fp8() -> dict:
    from tests.app.labruns import TINY

    return dict(TINY["fp8-step"])


def _overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_a_loss_plot_reads_out_a_steps_values_on_hover_and_focus(open_page, live_server, people, size):
    page = open_page(size, people["email"])
    page.goto(f"{live_server.url}/jobs/{people['b']}")
    figure = page.locator("figure.plot[data-plot-src]").first
    chart = figure.locator(".plotv-chart")
    expect(chart.locator("svg path")).to_have_count(2)  # BF16 reference and FP8, redrawn from the SVG's series
    expect(figure.locator(".scroll-box")).to_be_hidden()  # the drawn picture gives way to the interactive one
    expect(figure.locator(".scroll-hint")).to_be_hidden()  # and nothing tells a phone to swipe a chart that fits
    readout = figure.locator(".plotv-readout")

    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    assert box is not None
    chart.hover(position={"x": box["width"] - 20, "y": box["height"] / 2})  # the last step is at the right
    expect(readout).to_contain_text("step 3 · BF16 reference")
    expect(readout).to_contain_text("FP8 current")

    chart.focus()
    page.keyboard.press("Home")
    expect(readout).to_have_text(re.compile(r"^step 0 · BF16 reference [0-9.]+ · FP8 current [0-9.]+$"))
    page.keyboard.press("ArrowRight")
    expect(readout).to_contain_text("step 1 ·")
    expect(readout).to_have_attribute("role", "status")

    # the chart fits its figure and the page: nothing cut, nothing to swipe
    width, box = SIZES[size][0], chart.bounding_box()
    assert box is not None
    fig = figure.bounding_box()
    assert fig is not None and box["x"] >= fig["x"] - 1 and box["x"] + box["width"] <= fig["x"] + fig["width"] + 1
    assert box["x"] + box["width"] <= width and _overflow(page) <= 1
    legend = figure.locator(".plotv-legend li")
    expect(legend).to_have_count(2)
    for i in range(2):
        li = legend.nth(i).bounding_box()
        assert li is not None and li["x"] + li["width"] <= width
    figure.scroll_into_view_if_needed()
    screenshot(page, f"result-plot-hover-{size}", full_page=False)
    assert serious_violations(page) == []


def test_without_javascript_the_drawn_plot_stays(open_page, live_server, people):
    page = open_page("laptop", people["email"], js=False)
    page.goto(f"{live_server.url}/jobs/{people['b']}")
    figure = page.locator("figure.plot[data-plot-src]").first
    expect(figure.locator("img")).to_be_visible()
    expect(figure.locator(".plotv")).to_have_count(0)


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_comparing_two_runs_overlays_both_on_one_axis(open_page, live_server, people, size):
    page = open_page(size, people["email"])
    a, b = people["a"], people["b"]
    page.goto(f"{live_server.url}/labs/fp8-step/compare?a={a}&b={b}")
    figure = page.get_by_test_id("plot-compare").first
    chart = figure.locator(".plotv-chart")
    expect(chart.locator("svg path")).to_have_count(4)  # two series of each run, on one axis
    names = figure.locator(".plotv-legend li").all_inner_texts()
    # run A's delayed scaling clipped at steps 1-3, which its line rings: the legend keys the ring too
    assert [n.strip() for n in names] == [
        f"A · #{a} · BF16 reference",
        f"A · #{a} · FP8 delayed",
        f"B · #{b} · BF16 reference",
        f"B · #{b} · FP8 current",
        "clipped step",
    ]
    expect(chart.locator("svg circle.ring")).to_have_count(3)
    # run B's lines are dashed, run A's solid: the legend's keys say which is which, not colour alone
    dashes = chart.locator("svg path").evaluate_all("ps => ps.map(p => p.getAttribute('stroke-dasharray') || '')")
    assert dashes[:2] == ["", ""] and all(dashes[2:]), dashes
    chart.focus()
    page.keyboard.press("End")
    readout = figure.locator(".plotv-readout")
    expect(readout).to_contain_text(f"step 3 · A · #{a} · BF16 reference")
    expect(readout).to_contain_text(f"B · #{b} · FP8 current")
    assert _overflow(page) <= 1
    box = chart.bounding_box()
    assert box is not None and box["x"] + box["width"] <= SIZES[size][0]
    figure.scroll_into_view_if_needed()
    screenshot(page, f"result-plot-compare-{size}", full_page=False)
    # the two runs watched different tensors' amax and scale: one axis would mix them, so both stay as drawn
    history = page.get_by_test_id("plot-compare").nth(1)
    expect(history.locator("img")).to_have_count(2)
    for img in history.locator("img").all():
        expect(img).to_be_visible()
    expect(history.locator(".plotv")).to_have_count(0)
    assert serious_violations(page) == []


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_the_sweep_chart_is_two_panels_with_legends_under_them(open_page, live_server, people, size):
    """tp-sweep's measured and predicted panels, redrawn one under the other: each legend is HTML under its chart,
    so a phone reads every line's name without swiping, and every chart fits the screen."""
    page = open_page(size, people["email"])
    page.goto(f"{live_server.url}/jobs/{people['sweep']}")
    figure = page.locator("figure.plot[data-plot-src]").first
    charts = figure.locator(".plotv-chart")
    expect(charts).to_have_count(2)
    expect(figure.locator(".scroll-box")).to_be_hidden()
    expect(figure.locator(".scroll-hint")).to_be_hidden()
    expect(figure.locator(".plotv-title")).to_have_text(
        [re.compile("^Measured on this machine"), re.compile("^Predicted")]
    )
    width = SIZES[size][0]
    # Each chart's box and its legend items' boxes from one layout (the page may still reflow above the figure
    # between separate reads).
    panels = figure.evaluate(
        """f => [...f.querySelectorAll('.plotv-chart')].map((c, k) => {
             const box = e => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height}; };
             return {chart: box(c), items: [...f.querySelectorAll('.plotv-legend')[k].querySelectorAll('li')]
                                              .map(li => ({name: li.innerText.trim(), ...box(li)}))}; })"""
    )
    for k, panel in enumerate(panels):
        chart = panel["chart"]
        assert [b["name"] for b in panel["items"]] == ["step", "local GEMM", "collective", "exposed comm"]
        for b in panel["items"]:
            assert b["y"] >= chart["y"] + chart["height"] and b["x"] + b["width"] <= width, (k, b)
        assert chart["x"] >= 0 and chart["x"] + chart["width"] <= width
    # collective and exposed comm coincide when nothing hides the collective: hollow markers keep both visible
    assert charts.first.locator("svg rect, svg circle, svg polygon").count() > 4
    # both panels share the x axis: TP=1 and TP=2 sit at one x in each, though only the prediction reaches TP=8
    ticks = [
        c.locator("svg text[text-anchor=middle]").evaluate_all(
            "ts => Object.fromEntries(ts.filter(t => /^[0-9]+$/.test(t.textContent)).map(t => [t.textContent, +t.getAttribute('x')]))"
        )
        for c in (charts.nth(0), charts.nth(1))
    ]
    assert ticks[0]["1"] == pytest.approx(ticks[1]["1"]) and ticks[0]["2"] == pytest.approx(ticks[1]["2"]), ticks
    # the TP degrees are the x ticks, evenly spaced (log x)
    charts.nth(1).focus()
    page.keyboard.press("End")
    expect(figure.locator(".plotv-readout").nth(1)).to_contain_text("TP degree 8 · step ")
    assert _overflow(page) <= 1
    figure.scroll_into_view_if_needed()
    screenshot(page, f"result-plot-sweep-{size}", full_page=False)
    assert serious_violations(page) == []


def test_the_report_run_menu_fits_a_phone(open_page, live_server, people):
    page = open_page("phone", people["email"])
    page.goto(f"{live_server.url}/lessons/{LESSON}/report")
    menus = page.locator("select[id^=evidence-]")
    assert menus.count() >= 3
    page.locator("#evidence-bf16-fp8-numerics").select_option(index=1)
    vw = SIZES["phone"][0]
    for i in range(menus.count()):
        menu = menus.nth(i)
        menu.scroll_into_view_if_needed()
        box = menu.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= vw, (menu.get_attribute("id"), box)
        # the closed menu keeps its text inside its own box (it clips, it does not push the page wider)
        assert menu.evaluate("s => s.scrollWidth <= s.clientWidth + 1"), menu.get_attribute("id")
    assert _overflow(page) <= 1
    assert page.evaluate(OVERFLOW, "main") == []
    page.locator("#evidence-bf16-fp8-numerics").scroll_into_view_if_needed()
    screenshot(page, "report-run-menu-phone", full_page=False)


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_the_grader_review_page_fits_and_shows_the_result_without_sideways_scrolling(
    open_page, live_server, people, size
):
    page = open_page(size, people["grader"])
    page.goto(f"{live_server.url}/classes/default/grader/reports/{people['report']}")
    answer = page.get_by_test_id("result-answer").first
    expect(answer).to_be_visible()
    vw = SIZES[size][0]
    assert _overflow(page) <= 1
    assert page.evaluate(OVERFLOW, "main") == []
    results = page.locator("main .result")
    assert results.count() >= 1
    for i in range(results.count()):
        r = results.nth(i)
        r.scroll_into_view_if_needed()
        box = r.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= vw + 1, box
        a = r.get_by_test_id("result-answer").bounding_box()
        assert a is not None and a["x"] >= 0 and a["x"] + a["width"] <= vw + 1, a
    screenshot(page, f"grader-review-{size}")
    answer.scroll_into_view_if_needed()
    screenshot(page, f"grader-review-{size}-result", full_page=False)
