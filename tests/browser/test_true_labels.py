"""Headers, cards and links say true things, in real Chromium at 1280x800 and 390x844: each lesson's header names
its own number (not the course path's "06" on every lesson), a home card's eyebrow is its lesson's number (not
"LESSON 06 · 2022", which read as a date), a Chrome trace's download link says it downloads (the timeline viewer's
button is what opens Perfetto UI, and only it says so), the API docs are titled with the course's name, and a script
author finds them from a lab's page and the footer, not only from Account.

Screenshots: test-artifacts/screenshots/labels-*.png."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SHOTS, SIZES, screenshot
from tests.browser.pages import LEARNER
from tests.browser.settle import goto_settled

pytestmark = pytest.mark.browser

LESSONS = {"transformer-scaling": 6, "precision-by-numbers": 7, "planning-at-scale": 8, "parallelism-measured": 9}


@pytest.mark.parametrize("size", list(SIZES))
def test_lesson_headers_and_home_cards_name_each_lessons_own_number(live_server, seeded, open_page, size):
    pg = open_page(size, LEARNER)
    for lesson_id, number in LESSONS.items():
        pg.goto(f"{live_server.url}/lessons/{lesson_id}")
        eyebrow = pg.locator(".lesson-head .eyebrow").first.inner_text()
        assert eyebrow.upper().startswith(f"LESSON {number:02}"), eyebrow
        assert "PATH" not in eyebrow.upper(), eyebrow
        if number == 8:
            pg.locator(".lesson-head").screenshot(path=str(SHOTS / f"labels-lesson-head-{size}.png"))
    pg.goto(f"{live_server.url}/")
    cards = pg.locator(".lesson-card")
    expect(cards.first).to_be_visible()
    for i in range(cards.count()):
        text = cards.nth(i).locator(".eyebrow").inner_text()
        title = cards.nth(i).locator("h2").inner_text()
        assert re.fullmatch(r"LESSON \d\d", text.upper()), (text, title)  # no year beside it to read as a date
        assert "1 parts" not in cards.nth(i).inner_text()
    first = cards.first
    expect(first).to_contain_text("Anchor 2022: Hopper FP8 / Transformer Engine")  # the year, said what it is
    first.screenshot(path=str(SHOTS / f"labels-home-card-{size}.png"))


@pytest.mark.parametrize("size", list(SIZES))
def test_only_what_opens_perfetto_says_so(live_server, seeded, open_page, size):
    pg = open_page(size, LEARNER)
    goto_settled(pg, f"{live_server.url}/jobs/{seeded['jobs']['overlap-trace']}")
    downloads = pg.locator(".result p.small", has_text="Downloads:")
    traces = downloads.locator("a[href*='trace_']")
    assert traces.count() >= 2
    for i in range(traces.count()):
        text = traces.nth(i).inner_text()
        assert "open in perfetto" not in text.lower(), text
        assert "JSON for Perfetto UI" in text, text
    claims = pg.locator("main").get_by_text(re.compile("open in perfetto", re.I))
    for i in range(claims.count()):  # whatever says it opens Perfetto is the viewer's button, which does
        assert claims.nth(i).evaluate("e => !!e.closest('button')"), claims.nth(i).evaluate("e => e.outerHTML")
    button = pg.get_by_role("button", name=re.compile("Open in Perfetto UI"))
    expect(button).to_be_visible()
    downloads.scroll_into_view_if_needed()
    downloads.screenshot(path=str(SHOTS / f"labels-downloads-{size}.png"))
    button.scroll_into_view_if_needed()
    screenshot(pg, f"labels-perfetto-button-{size}", full_page=False)


@pytest.mark.parametrize("size", list(SIZES))
def test_the_api_docs_are_titled_with_the_course_and_linked_where_scripts_start(live_server, seeded, open_page, size):
    pg = open_page(size, LEARNER)
    pg.goto(f"{live_server.url}/labs/fp8-step")
    link = pg.locator("main a[href='/api/v1/docs']").first
    expect(link).to_be_visible()
    box = link.bounding_box()
    assert box and box["x"] + box["width"] <= SIZES[size][0], box
    link.scroll_into_view_if_needed()
    screenshot(pg, f"labels-lab-api-link-{size}", full_page=False)
    expect(pg.locator("footer a[href='/api/v1/docs']")).to_have_count(1)
    link.click()
    pg.wait_for_url("**/api/v1/docs")
    expect(pg.locator(".swagger-ui .title").first).to_contain_text("Parallel Horizons")
    assert "Parallel Horizons" in pg.title() and "GPU" not in pg.title(), pg.title()
    screenshot(pg, f"labels-api-docs-{size}", full_page=False)
