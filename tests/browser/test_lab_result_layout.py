"""In real Chromium at 1280×800 and 390×844: once a run exists its result comes first at the
page's full width, above the form folded under "Change and run again" (prefilled with that run's parameters);
nothing in a result is wider than its box at laptop width; a refused form lists its errors at the Run button, each
beside its field too, with the focus on the first field to fix, with and without JavaScript.

Layout is asserted by measuring boxes. Screenshots: test-artifacts/screenshots/lab-result-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.browser.seed import Seeder
from tests.browser.test_lesson_quality import serious_violations

pytestmark = pytest.mark.browser

LABS = ["overlap-trace", "tp-sweep", "fp8-step"]

# Elements of a result that must fit their box at laptop width: a plot's picture its scroll box, a table its
# scroll box, the card the page's column.
TOO_WIDE = """() => {
  const out = [];
  for (const el of document.querySelectorAll('#job-list .result, #job-list .result .table-wrap, #job-list .scroll-box, #job-list article.job')) {
    if (el.scrollWidth > el.clientWidth + 1) out.push(`${el.className || el.tagName}: ${el.scrollWidth} > ${el.clientWidth}`);
  }
  for (const img of document.querySelectorAll('#job-list figure.plot img')) {
    const box = img.parentElement.getBoundingClientRect(), r = img.getBoundingClientRect();
    if (r.width > box.width + 1) out.push(`img ${img.alt}: ${r.width} > ${box.width}`);
  }
  return out;
}"""


def _box(page, selector: str) -> dict:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not on screen"
    return box


def _page_overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


@pytest.fixture(scope="module")
def runs(live_server) -> dict:
    """One learner with a finished run of each lab (the golden TINY bundles)."""
    s = Seeder(live_server.data)
    uid = s.user("result-first@example.org", name="Rafa")
    jobs = {lab: s.job(uid, lab) for lab in LABS}
    s.close()
    return {"email": "result-first@example.org", "jobs": jobs}


@pytest.mark.parametrize("size", ["laptop", "phone"])
@pytest.mark.parametrize("lab", LABS)
def test_the_result_comes_first_at_full_width(open_page, live_server, runs, lab, size):
    page = open_page(size, runs["email"])
    page.goto(f"{live_server.url}/labs/{lab}")
    card = page.locator(f"#job-{runs['jobs'][lab]}")
    expect(card.get_by_test_id("result-answer")).to_be_visible()
    fold = page.locator("#params-fold")
    expect(fold).not_to_have_attribute("open", "")
    expect(page.locator("#lab-run")).to_be_hidden()
    expect(page.get_by_test_id("latest-params")).to_contain_text(f"#{runs['jobs'][lab]}")

    result, params, main = _box(page, f"#job-{runs['jobs'][lab]}"), _box(page, "#lab-params"), _box(page, "main h1")
    assert result["y"] + result["height"] <= params["y"], (result, params)  # the result above the form
    assert abs(result["width"] - params["width"]) <= 1 and result["width"] >= main["width"] - 1, (result, main)
    if size == "phone":  # the answer is on the first screen, not 2,000 px down under the form
        assert _box(page, f"#job-{runs['jobs'][lab]} [data-testid=result-answer]")["y"] < 844
    assert _page_overflow(page) <= 1
    if size == "laptop":
        assert page.evaluate(TOO_WIDE) == []
        expect(page.locator("#job-list .scroll-hint:visible")).to_have_count(0)
    screenshot(page, f"lab-result-{lab}-{size}")
    screenshot(page, f"lab-result-{lab}-{size}-first-screen", full_page=False)
    if page.locator("#job-list figure.plot:visible").count():
        page.locator("#job-list figure.plot:visible").first.scroll_into_view_if_needed()
        screenshot(page, f"lab-result-{lab}-{size}-plot", full_page=False)
    assert serious_violations(page) == []


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_change_and_run_again_opens_the_form_with_the_runs_parameters(open_page, live_server, runs, size):
    page = open_page(size, runs["email"])
    page.goto(f"{live_server.url}/labs/tp-sweep")
    page.get_by_text("Change and run again").click()
    expect(page.locator("#lab-run")).to_be_visible()
    # the golden run's TINY parameters, not the lab's defaults
    expect(page.locator("#p-tokens")).to_have_value("16")
    expect(page.locator("#p-hidden")).to_have_value("32")
    expect(page.locator("#p-degrees")).to_have_value("1, 2")
    assert _page_overflow(page) <= 1
    screenshot(page, f"lab-result-change-{size}")


@pytest.mark.parametrize("js", [True, False], ids=["htmx", "no-js"])
@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_a_refused_form_says_so_at_run_and_focuses_the_first_field(open_page, live_server, runs, size, js):
    page = open_page(size, runs["email"], js=js)
    page.goto(f"{live_server.url}/labs/tp-sweep")
    if js:
        page.get_by_text("Change and run again").click()
    else:  # no JavaScript: <details> still opens by itself in the browser
        page.locator("#params-fold > summary").click()
    page.locator("#p-tokens").fill("0")
    page.locator("#p-hidden").fill("lots")
    page.locator("#lab-run").click()

    summary = page.locator("#lab-errors")
    expect(summary).to_be_visible()
    expect(summary).to_contain_text("Not run: 2 fields below to fix.")
    expect(summary.get_by_role("link")).to_have_count(2)
    expect(page.locator("#e-tokens")).to_be_visible()
    expect(page.locator("#e-hidden")).to_be_visible()
    expect(page.locator("#p-tokens")).to_be_focused()  # the first field to fix, in the page's order
    expect(page.locator("#p-tokens")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#p-hidden")).to_have_value("lots")  # what was typed stays

    # the summary sits right above Run: where the learner pressed
    box, run = _box(page, "#lab-errors"), _box(page, "#lab-run")
    assert 0 <= run["y"] - (box["y"] + box["height"]) < 40, (box, run)
    # and each message under its own field
    field, message = _box(page, "#p-hidden"), _box(page, "#e-hidden")
    assert 0 < message["y"] - (field["y"] + field["height"]) < 90, (field, message)
    # a link in the summary takes the learner to its field
    summary.get_by_role("link").nth(1).click()
    expect(page).to_have_url(f"{live_server.url}/labs/tp-sweep/jobs#p-hidden" if not js else page.url)
    assert _page_overflow(page) <= 1
    screenshot(page, f"lab-result-refused-{size}-{'js' if js else 'nojs'}", full_page=False)
    if js:
        assert serious_violations(page) == []
