"""Result tables read whole on a phone, in real Chromium at 1280x800 and 390x844: every table cell's text is
measured against its cell, its table's scroll box and the screen (at 390 nothing may be cut, not "0.1" of 0.1729
nor "visib" of visible; at 1280 a table that must scroll says so under it), table headings are short (a long
title's rest is the description under it), no greedy-generation row is taller than what it holds, and a lesson's
row of part chips that runs past the screen's edge says so.

Screenshots: test-artifacts/screenshots/tables-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SHOTS, SIZES, screenshot
from tests.browser.pages import LEARNER, LESSON
from tests.browser.settle import goto_settled

pytestmark = pytest.mark.browser

JOBS = ("fp8-delayed", "tp-sweep", "overlap-trace", "env-check")

# Every cell of every result table, folded rows opened: whether its text is whole (inside the cell, inside its
# table's scroll box, on the screen) and whether a table that scrolls sideways is followed by its visible hint.
MEASURE = """() => {
  document.querySelectorAll('.result details').forEach(d => { d.open = true; });
  const seen = el => el && el.getClientRects().length > 0 && getComputedStyle(el).display !== 'none'
    && getComputedStyle(el).visibility !== 'hidden';
  const out = {cut: [], unhinted: [], cells: 0, titles: [], rows: []};
  for (const wrap of document.querySelectorAll('.result .table-wrap')) {
    if (!seen(wrap)) continue;
    const box = wrap.getBoundingClientRect();
    const scrolls = wrap.scrollWidth > wrap.clientWidth + 1;
    const hint = wrap.nextElementSibling;
    const hinted = !!hint && hint.matches('[data-scroll-hint]') && seen(hint);
    if (scrolls && !hinted) out.unhinted.push(wrap.getAttribute('aria-labelledby'));
    for (const cell of wrap.querySelectorAll('th, td')) {
      const head = cell.closest('thead');
      if (head && head.getBoundingClientRect().width <= 1) continue;  // a stacked table's header, for screen readers
      const text = cell.textContent.trim();
      if (!text || !seen(cell)) continue;
      out.cells += 1;
      const range = document.createRange();
      range.selectNodeContents(cell);
      const t = range.getBoundingClientRect();
      const whole = cell.scrollWidth <= cell.clientWidth + 1 && t.left >= box.left - 1 && t.right <= box.right + 1
        && t.left >= -1 && t.right <= innerWidth + 1;
      if (!whole) out.cut.push({text: text.slice(0, 30), scrolls, hinted});
    }
  }
  for (const title of document.querySelectorAll('.result .table-title')) {
    const style = getComputedStyle(title);
    const lines = title.getBoundingClientRect().height / (parseFloat(style.fontSize) * 1.5);
    out.titles.push({text: title.textContent.trim(), lines});
  }
  for (const title of document.querySelectorAll('.result .table-title')) {
    if (title.textContent.trim() !== 'Greedy generation') continue;
    const table = title.parentElement.querySelector('table');
    for (const tr of table.querySelectorAll('tbody tr')) {
      const cells = [...tr.children].filter(seen);
      const stacked = getComputedStyle(tr).display !== 'table-row';
      const heights = cells.map(c => c.getBoundingClientRect().height);
      const texts = cells.map(c => { const r = document.createRange(); r.selectNodeContents(c); return r.getBoundingClientRect().height; });
      const need = stacked ? heights.reduce((a, b) => a + b, 0) : Math.max(...texts);
      out.rows.push({height: tr.getBoundingClientRect().height, need});
    }
  }
  return out;
}"""

PARTS = """() => [...document.querySelectorAll('.pacing ol, .pacing ul')].map(list => {
  const hint = list.nextElementSibling;
  return {overflows: list.scrollWidth > list.clientWidth + 1,
          hinted: !!hint && hint.matches('[data-scroll-hint]') && hint.getClientRects().length > 0
            && getComputedStyle(hint).display !== 'none',
          hint: hint && hint.matches('[data-scroll-hint]') ? hint.textContent.trim() : ''};
})"""


@pytest.mark.parametrize("size", list(SIZES))
def test_every_result_table_cell_is_whole_on_the_screen(live_server, seeded, open_page, size):
    pg = open_page(size, LEARNER)
    for name in JOBS:
        goto_settled(pg, f"{live_server.url}/jobs/{seeded['jobs'][name]}")
        expect(pg.get_by_test_id("result")).to_be_visible()
        m = pg.evaluate(MEASURE)
        assert m["cells"] > 10, (name, m)
        if size == "phone":  # nothing cut at all: a phone shows every row's values whole
            assert m["cut"] == [], (name, m["cut"])
        else:  # a table wider than the column may scroll, but only with its hint under it
            assert [c for c in m["cut"] if not c["hinted"]] == [], (name, m["cut"])
        assert m["unhinted"] == [], (name, m["unhinted"])
        long = [t for t in m["titles"] if len(t["text"]) > 56 or t["lines"] > 2.2]
        assert long == [], (name, long)  # a heading, not a paragraph
        for row in m["rows"]:  # greedy generation: no row taller than what it holds
            assert row["height"] <= row["need"] + 24, (name, row)
        if name == "fp8-delayed":
            assert m["rows"], "the greedy-generation table was measured"
            desc = pg.locator(".result .table-desc").first
            expect(desc).to_contain_text("Delayed scaling starts from scale 1")
        screenshot(pg, f"tables-{name}-{size}")
    pg.goto(f"{live_server.url}/jobs/{seeded['jobs']['fp8-delayed']}")
    pg.locator(".table-block", has_text="FP8 tensors").screenshot(path=str(SHOTS / f"tables-fp8-tensors-{size}.png"))
    pg.locator(".table-block", has_text="Greedy generation").screenshot(path=str(SHOTS / f"tables-greedy-{size}.png"))


@pytest.mark.parametrize("size", list(SIZES))
def test_a_row_of_part_chips_past_the_screen_says_so(live_server, seeded, open_page, size):
    pg = open_page(size, LEARNER)
    pg.goto(f"{live_server.url}/lessons/{LESSON}")
    lists = pg.evaluate(PARTS)
    assert lists and all(x["hinted"] == x["overflows"] for x in lists), lists
    if size == "phone":  # six parts do not fit 390 px: the row scrolls, and says how many there are
        assert lists[0]["overflows"] and lists[0]["hint"].startswith("6 parts in this lesson"), lists
        expect(pg.get_by_test_id("parts-hint")).to_be_in_viewport()
    else:  # a laptop lists the parts down the side: nothing to swipe
        assert not any(x["overflows"] for x in lists), lists
    screenshot(pg, f"tables-lesson-parts-{size}", full_page=False)
