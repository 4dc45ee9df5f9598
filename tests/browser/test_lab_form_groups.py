"""In real Chromium against a live server: fp8-step's parameter form in named groups, rarely changed knobs folded
under "More settings", fields two to a row in a laptop's form column and one on a phone, so Run is not a long
scroll away. A refused run opens the fold that holds its error, with every typed value kept.

Screenshots: test-artifacts/screenshots/lab-form-groups-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser

# How far below the form's top the Run button may sit. Before the groups, fp8-step's 19 fields and the backend
# stood in one column: Run was 2,591 px below the form's top at 1280 x 800 and 2,766 px at 390 x 844. Grouped,
# folded and two to a row it is about 1,310 px at 1280 and 1,780 px at 390; each bound leaves a line or two of
# hint text for other fonts, and fails if a fold stops folding (those eight fields add 500+ px) or the laptop
# grid falls back to one column (+450 px).
WIDTHS = [(1280, 800, "laptop", 1450), (390, 844, "phone390", 1950)]


def _overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def _box(page, selector: str) -> dict:
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    return box


# Inputs, selects and hints whose right edge passes the form's (the card would clip or overlap them).
STICKING_OUT = """(() => {
  const right = document.querySelector('#lab-form').getBoundingClientRect().right + 0.5;
  return [...document.querySelectorAll('#lab-form :is(input, select, .hint, .error, summary)')]
    .filter(e => e.getClientRects().length && e.getBoundingClientRect().right > right)
    .map(e => e.id || e.textContent.trim().slice(0, 40));
})()"""


def _sticking_out(page) -> list[str]:
    return page.evaluate(STICKING_OUT)


def _learner_page(browser, live_server, email: str, width: int, height: int):
    """A new learner, logged in, in a browser context of this size: (context, page)."""
    Seeder(live_server.data).user(email)
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    page.set_default_timeout(15_000)
    login(page, live_server.url, email)
    return ctx, page


@pytest.mark.parametrize("width,height,name,bound", WIDTHS)
def test_fp8_step_form_is_grouped_and_run_is_near_its_top(browser, live_server, width, height, name, bound):
    ctx, page = _learner_page(browser, live_server, f"groups-{name}@example.org", width, height)
    page.goto(f"{live_server.url}/labs/fp8-step")

    legends = page.locator("#lab-form fieldset.param-group > legend")
    expect(legends).to_have_text(["Run", "Model and data", "FP8 recipe", "Outlier experiment"])
    run = page.get_by_role("button", name="Run fp8-step")
    below = _box(page, "#lab-form")
    y = _box(page, "#lab-form button[type=submit]:not([name])")["y"] - below["y"]
    print(f"\n{name}: Run button {y:.0f} px below the form's top (page y {below['y'] + y:.0f})")
    assert y < bound, y

    steps, backend = _box(page, "#p-steps"), _box(page, "#p-backend")
    if width >= 1000:  # several to a row across the page, inputs level with each other
        assert steps["y"] == backend["y"] and backend["x"] > steps["x"] + steps["width"], (steps, backend)
        # a field whose label wraps ("Attention heads n_heads") keeps its input level with its row's others
        rows: dict[int, set[float]] = {}
        for field in page.locator("#lab-form fieldset.param-group > .fields > .field").all():
            box, control = field.bounding_box(), field.locator("input, select").first
            if box and control.count() and control.is_visible():
                rows.setdefault(round(box["y"]), set()).add(round(control.bounding_box()["y"], 1))
        assert len(rows) > 1 and all(len(ys) == 1 for ys in rows.values()), rows
    else:  # one column on a phone
        assert backend["y"] > steps["y"] + steps["height"] and backend["x"] == steps["x"], (steps, backend)
    assert _overflow(page) == 0 and _sticking_out(page) == []
    screenshot(page, f"lab-form-groups-{name}")

    # the rare knobs are folded, each fold naming what it holds; a click opens it
    fold = page.locator("#lab-form details.more-settings", has=page.locator("#p-amax_compute_algo"))
    expect(fold.locator("summary")).to_contain_text("Scale margin, amax history length")
    expect(fold.locator("summary")).to_contain_text("5 settings")
    expect(page.locator("#p-delayed_update")).to_be_hidden()
    fold.locator("summary").click()
    expect(page.locator("#p-delayed_update")).to_be_visible()
    expect(fold).to_have_attribute("open", "")
    assert _overflow(page) == 0 and _sticking_out(page) == []  # a long hint (NVTE_UNFUSED_...) wraps in its column
    screenshot(page, f"lab-form-groups-open-{name}")
    fold.locator("summary").click()
    expect(page.locator("#p-delayed_update")).to_be_hidden()

    # a refused run: the fold holding the error opens by itself, the error under its field, typed values kept
    lr_fold = page.locator("#lab-form details.more-settings", has=page.locator("#p-lr"))
    lr_fold.locator("summary").click()
    page.locator("#p-lr").fill("0.5")
    lr_fold.locator("summary").click()  # closed again before Run: the server reopens it
    page.locator("#p-steps").fill("1")
    run.click()
    expect(page.locator("#lab-form-wrap p.error[role=alert]").first).to_contain_text("2 fields below")
    lr_fold = page.locator("#lab-form details.more-settings", has=page.locator("#p-lr"))
    expect(lr_fold).to_have_attribute("open", "")
    expect(page.locator("#e-lr")).to_have_text("lr: at most 0.1, got 0.5")
    expect(page.locator("#p-lr")).to_have_value("0.5")
    expect(page.locator("#p-lr")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#p-lr")).to_have_attribute("aria-describedby", "h-lr e-lr")
    expect(page.locator("#p-steps")).to_have_value("1")
    lr, err = _box(page, "#p-lr"), _box(page, "#e-lr")
    assert 0 < err["y"] - (lr["y"] + lr["height"]) < 90 and abs(err["x"] - lr["x"]) < 2, (lr, err)  # next to it
    expect(page.locator("#lab-form details.more-settings", has=page.locator("#p-margin"))).not_to_have_attribute(
        "open", ""
    )  # nothing changed in the FP8 fold: it stays folded
    assert _overflow(page) == 0 and _sticking_out(page) == []
    screenshot(page, f"lab-form-groups-refused-{name}")

    # corrected and run from the keyboard: the run starts, and the form drops the refused try's errors (they stayed,
    # aria-invalid and all, beside a running job) while the values typed and the focus on Run stay
    page.locator("#p-lr").fill("0.01")
    page.locator("#p-steps").fill("40")  # past the default spike at step 20
    page.locator("#lab-run").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#job-list article.job")).to_have_count(1)
    expect(page.locator("#lab-form-wrap .error")).to_have_count(0)
    expect(page.locator("#lab-form [aria-invalid]")).to_have_count(0)
    expect(page.locator("#p-lr")).to_have_attribute("aria-describedby", "h-lr")
    expect(page.locator("#p-lr")).to_have_value("0.01")
    expect(page.locator("#p-steps")).to_have_value("40")
    expect(page.locator("#lab-run")).to_be_focused()
    ctx.close()


@pytest.mark.parametrize("width,height,name", [(w, h, n) for w, h, n, _ in WIDTHS])
def test_every_lab_form_fits_with_its_folds_open(browser, live_server, width, height, name):
    """tp-sweep's and overlap-trace's groups too: nothing passes the form's edge, folded or open (a set of
    checkboxes takes a whole row)."""
    ctx, page = _learner_page(browser, live_server, f"groups-all-{name}@example.org", width, height)
    for lab, legends in (
        ("tp-sweep", ["Run", "Block shape", "FP8 and the te backend", "Cost-model prediction"]),
        ("overlap-trace", ["Run", "Tensor sizes"]),
    ):
        page.goto(f"{live_server.url}/labs/{lab}")
        expect(page.locator("#lab-form fieldset.param-group > legend")).to_have_text(legends)
        assert _overflow(page) == 0 and _sticking_out(page) == []
        for summary in page.locator("#lab-form details.more-settings > summary").all():
            summary.click()
        expect(page.locator("#lab-form details.more-settings:not([open])")).to_have_count(0)
        expect(page.locator("#p-rank_timeout_s")).to_be_visible()
        assert _overflow(page) == 0 and _sticking_out(page) == []
        screenshot(page, f"lab-form-groups-{lab}-open-{name}")
    ctx.close()
