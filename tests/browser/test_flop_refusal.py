"""A run refused for the CPU's FLOP budget reads as a sentence and a sum, in real Chromium at 1280x800 and 390x844:
one short sentence at the field it belongs to (steps), and the arithmetic in a block of its own across the form,
one step a line, in plain type, not a formula squeezed into a bold red column under one field.

Screenshots: test-artifacts/screenshots/refusal-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SIZES, screenshot
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def learners(live_server):
    s = Seeder(live_server.data)
    for size in SIZES:  # no runs yet: the form shows the lab's defaults
        s.user(f"flops-{size}@example.org", name="Flo")
    yield
    s.close()


@pytest.mark.parametrize("size", list(SIZES))
def test_the_flop_budget_refusal_is_a_sentence_at_the_field_and_the_sum_below(live_server, learners, open_page, size):
    pg = open_page(size, f"flops-{size}@example.org")
    pg.goto(f"{live_server.url}/labs/fp8-step")
    pg.evaluate("document.querySelectorAll('#lab-form details').forEach(d => { d.open = true; })")
    pg.locator("#p-steps").fill("5000")
    pg.locator("#p-batch").fill("64")  # 6 × 103,424 parameters × 64 × 16 tokens × 5,000 steps ≈ 3.2 × 10¹² FLOPs
    pg.get_by_role("button", name="Run fp8-step").click()

    sentence = pg.locator("#e-steps")
    block = pg.get_by_test_id("error-detail")
    expect(block).to_be_visible()
    sentence.evaluate("e => window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 220)")
    screenshot(pg, f"refusal-flops-{size}", full_page=False)
    expect(sentence).to_have_text(
        "steps: about 3.2 × 10¹² FLOPs, over the cpu backend's budget of 2 × 10¹² (why, below)"
    )
    lines = sentence.evaluate("e => e.getBoundingClientRect().height / parseFloat(getComputedStyle(e).lineHeight)")
    assert lines <= 4.2, lines  # a short sentence, not a column of formula

    expect(block).to_contain_text("Take fewer steps, a smaller batch, seq or model, or a GPU backend.")
    expect(block).to_contain_text("6 × 103,424 parameters × batch 64 × seq 16 × 5,000 steps")
    expect(block).to_contain_text("≈ 3.2 × 10¹² FLOPs per run")
    expect(block).to_contain_text("> 2 × 10¹², the cpu backend's budget")
    form = pg.locator("#lab-form").bounding_box()
    box = block.bounding_box()
    field = pg.locator("#p-steps").bounding_box()
    assert form and box and field
    assert box["width"] >= 0.8 * form["width"] - 40, (box, form)  # across the form, not one field's column
    assert box["x"] >= 0 and box["x"] + box["width"] <= SIZES[size][0], box
    assert box["y"] > field["y"], (box, field)  # under the field it explains
    pre = block.locator("pre")
    assert pre.evaluate("e => parseInt(getComputedStyle(e).fontWeight)") < 600  # plain type, not bold
    rows = pre.evaluate("e => e.textContent.trim().split('\\n').length")
    assert rows == 3, rows  # one step a line
    assert pre.evaluate("e => e.scrollWidth <= e.clientWidth + 1")  # every line whole, none cut at the edge
