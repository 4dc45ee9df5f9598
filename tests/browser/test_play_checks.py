"""/play at laptop and phone width, "predict, then check" from a lesson pause into /play, and a learner's own
lab run (run for real by the live server's worker) beside the worked example. Screenshots land in
test-artifacts/screenshots/ (play-*, check-*, own-run-*)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from labs.api import number
from tests.browser.conftest import SHOTS, register, screenshot
from tests.browser.test_lesson_quality import serious_violations

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

WIDTHS = [(1280, 900, "laptop"), (390, 844, "phone")]
PART = "/lessons/transformer-scaling/deep-dives"


def _sideways(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


@pytest.mark.parametrize("width,height,name", WIDTHS + [(360, 780, "phone-360")])
def test_play_fits_and_reports_field_errors(browser, live_server, width, height, name):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(15_000)
    register(page, live_server.url, f"play-{name}@example.org")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Play").click()
    page.wait_for_url(live_server.url + "/play")
    expect(page.locator("#tool-parallel-axis")).to_contain_text("Over-sharding begins at TP = 8")
    expect(page.locator("#tool-memory")).to_contain_text("Fits on one H100-SXM")
    assert _sideways(page) <= 0, f"/play scrolls sideways by {_sideways(page)}px at {width}px"
    screenshot(page, f"play-{name}")

    # Two bad inputs at once: each gets its message under its own field, in words, and is marked invalid.
    memory = page.locator("#tool-memory")
    memory.get_by_label("tensor-parallel degree (TP)").fill("3")
    memory.get_by_label("sequence length (tokens)").fill("lots")
    expect(memory.locator("#err-memory-tp")).to_have_text("3 does not divide the number of heads (32)")
    expect(memory.locator("#err-memory-seq")).to_contain_text("a whole number from 1 to 1,048,576")
    expect(memory.get_by_role("alert")).to_contain_text("2 inputs to fix")
    expect(memory.get_by_label("tensor-parallel degree (TP)")).to_have_attribute("aria-invalid", "true")
    assert _sideways(page) <= 0
    memory.scroll_into_view_if_needed()
    screenshot(page, f"play-errors-{name}")
    assert serious_violations(page) == []
    memory.get_by_label("tensor-parallel degree (TP)").fill("8")
    memory.get_by_label("sequence length (tokens)").fill("4096")
    expect(memory.locator("#err-memory-tp")).to_be_empty()
    expect(memory.get_by_label("tensor-parallel degree (TP)")).not_to_have_attribute("aria-invalid", "true")
    expect(memory).to_contain_text("total per GPU")
    context.close()


@pytest.mark.parametrize("width,height,name", WIDTHS)
def test_a_pause_prediction_is_checked_on_play(browser, live_server, width, height, name):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(15_000)
    register(page, live_server.url, f"check-{name}@example.org")
    page.goto(live_server.url + PART)
    pause = page.locator("#pause-async-then-wait")
    expect(pause.locator(".check-link")).to_contain_text("Write your prediction first")
    pause.get_by_label("Your answer").fill("Barely at all: nothing overlaps, so 12 + 5 = 17 ms.")
    pause.get_by_role("button", name="Save my answer and reveal the reference").click()
    link = page.locator("#pause-async-then-wait .check-link")
    expect(link).to_contain_text("Your answer predicts the step time: 17 ms")
    page.locator("#pause-async-then-wait").scroll_into_view_if_needed()
    assert _sideways(page) <= 0
    screenshot(page, f"check-part-{name}")
    page.locator("#pause-async-then-wait").screenshot(path=str(SHOTS / f"check-pause-{name}.png"))
    link.get_by_role("link").click()
    page.wait_for_url("**/play/overlap-window?**")
    tool = page.locator("#tool-overlap-window")
    expect(tool.locator(".prediction")).to_contain_text("You predicted the step time: 17 ms")
    expect(tool.locator(".prediction")).to_contain_text("right (within 5%)")
    expect(tool.get_by_label("Your prediction: the step time (ms)")).to_have_value("17")
    assert _sideways(page) <= 0
    screenshot(page, f"check-play-{name}")
    # the learner can revise it on /play: the comparison follows
    tool.get_by_label("Your prediction: the step time (ms)").fill("14")
    expect(tool.locator(".prediction")).to_contain_text("off by 3 ms, 18% too low")
    context.close()


def _run_lab(page, base: str, lab: str, params: dict) -> tuple[int, dict]:
    """Submit a run through the API, watch its card on its page until the page's one job-status poll brings it back
    finished, and return its id and result.json."""
    token = page.request.get(base + "/api/v1/me").json()["csrf_token"]
    r = page.request.post(
        base + "/api/v1/jobs",
        data={"lab": lab, "params": params, "backend": "cpu"},
        headers={"X-CSRF-Token": token},
    )
    assert r.status == 201, r.text()
    job_id = r.json()["id"]
    page.goto(f"{base}/jobs/{job_id}")
    card = page.locator(f"#job-{job_id}")
    expect(card).to_have_attribute("data-status", re.compile("succeeded|failed"), timeout=60_000)
    expect(card).to_have_attribute("data-status", "succeeded")
    result = page.request.get(f"{base}/api/v1/jobs/{job_id}/result")
    assert result.ok, result.text()
    return job_id, result.json()


def test_own_run_beside_the_worked_example(browser, live_server):
    """A real fp8-step run with a spike at step 20, run by the server's worker, then shown in the part in the run's
    own numbers."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    register(page, live_server.url, "own-run@example.org")
    page.goto(live_server.url + PART)
    expect(page.locator("#your-run-fp8-step")).to_contain_text("See your own numbers here")
    tiny = {"batch": 2, "seq": 8, "d_model": 16, "n_heads": 2, "ffn": 32, "n_layers": 1}
    params = {**tiny, "steps": 30, "outlier_step": 20, "outlier_scale": 50}
    job_id, result = _run_lab(page, live_server.url, "fp8-step", params)
    spike = result["results"]["outlier"]
    for width, height, name in WIDTHS:
        page.set_viewport_size({"width": width, "height": height})
        page.goto(live_server.url + PART)
        aside = page.locator("#your-run-fp8-step")
        expect(aside).to_contain_text(
            "The 50× spike at step 20 met a scale set from earlier steps' amaxes and clipped "
            f"{number(spike['clipped_at_spike'])} values"
        )
        expect(aside).to_contain_text(
            f"at step 21 the scale fell {number(spike['scale_at_spike'])} → {number(spike['scale_after'])}"
        )
        expect(aside).to_contain_text("CPU emulation")
        expect(aside.get_by_role("link", name=f"Job #{job_id}")).to_have_attribute("href", f"/jobs/{job_id}")
        aside.scroll_into_view_if_needed()
        assert _sideways(page) <= 0
        screenshot(page, f"own-run-part-{name}")
        page.locator("#sec-range-management").screenshot(path=str(SHOTS / f"own-run-{name}.png"))
    expect(page.locator("#your-run-overlap-trace")).to_contain_text("See your own numbers here")
    context.close()


@pytest.mark.parametrize("width,height,name", [(1280, 900, "laptop"), (360, 780, "phone-360")])
def test_fp8_range_value_label_stays_inside_its_drawing(browser, live_server, width, height, name):
    """E5M2 with no margin clips 300 (scaled 71,680) near the line's right end: its label, once centred on the
    dot, ran past the drawing's edge and read "|scaled| 7.168e+0"."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(15_000)
    register(page, live_server.url, f"fp8-label-{name}@example.org")
    page.goto(live_server.url + "/play/fp8-range?amax=240&value=300&fmt=E5M2&margin=0")
    tool = page.locator("#tool-fp8-range")
    label = tool.locator('svg.numberline text[y="68"]')  # the value's label, under the line
    left, right, edge = label.evaluate(
        "t => { const b = t.getBBox(); return [b.x, b.x + b.width, t.ownerSVGElement.viewBox.baseVal.width]; }"
    )
    assert 0 <= left and right <= edge, f"label spans {left:.0f}..{right:.0f} of a {edge:.0f}-unit drawing"
    expect(label).to_have_text("|scaled| 71,680")
    tool.scroll_into_view_if_needed()
    tool.screenshot(path=str(SHOTS / f"play-fp8-range-clipped-{name}.png"))
    context.close()
