"""Lesson 06 at laptop and phone width: the header leaves room for the part, figures fit the screen whole."""

import pytest

from tests.browser.conftest import SIZES, register, screenshot

pytestmark = pytest.mark.browser

BASE = "/lessons/transformer-scaling"


@pytest.fixture(scope="module")
def pages(browser, live_server):
    """One registered learner, one page per width, reused by every test here."""
    out, contexts = {}, []
    for name, (w, h) in SIZES.items():
        ctx = browser.new_context(viewport={"width": w, "height": h})
        contexts.append(ctx)
        pg = ctx.new_page()
        pg.set_default_timeout(15_000)
        register(pg, live_server.url, f"phone06-{name}@example.org")
        out[name] = pg
    yield out
    for ctx in contexts:
        ctx.close()


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_the_first_part_starts_on_the_first_screen(pages, live_server, size):
    page = pages[size]
    page.goto(f"{live_server.url}{BASE}/orient")
    height = SIZES[size][1]
    head = page.locator("header.lesson-head").bounding_box()
    title = page.locator("#part-title").bounding_box()
    screenshot(page, f"lesson06-orient-{size}", full_page=False)
    assert head["y"] + head["height"] < 0.75 * height, head  # the header leaves a quarter of the screen at least
    assert title["y"] + title["height"] < height, title  # and the part's title is on it


# figure id -> the width it is drawn at on (laptop, phone): the roofline swaps to its phone layout, the mesh is
# likewise (nodes side by side on a laptop, one under the other on a phone)
FITS = {"tp-roof": (780, 340), "mesh-right": (700, 340), "mesh-wrong": (700, 340)}


@pytest.mark.parametrize("size", ["laptop", "phone"])
@pytest.mark.parametrize("fig_id", sorted(FITS))
def test_figures_fit_the_screen_whole(pages, live_server, size, fig_id):
    page = pages[size]
    if not page.url.endswith(f"{BASE}/deep-dives"):
        page.goto(f"{live_server.url}{BASE}/deep-dives")
    fig = page.locator(f"#fig-{fig_id}")
    box = fig.locator(".figure-scroll")
    svg = box.locator("svg:visible")
    assert svg.count() == 1
    drawn = int(svg.get_attribute("viewBox").split()[2])
    fig.scroll_into_view_if_needed()
    shown = svg.bounding_box()
    screenshot(page, f"lesson06-{fig_id}-{size}", full_page=False)
    assert drawn == FITS[fig_id][size == "phone"]
    assert box.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "no sideways swipe inside the box"
    assert not fig.locator(".scroll-hint").is_visible()
    assert shown["x"] >= 0 and shown["x"] + shown["width"] <= SIZES[size][0] + 1
    assert shown["width"] >= 0.9 * min(drawn, SIZES[size][0] - 60)  # drawn at about its own size: legible


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_the_dashboard_explains_the_order(pages, live_server, size):
    page = pages[size]
    page.goto(f"{live_server.url}/")
    note = page.locator("#path-note")
    box = note.bounding_box()
    screenshot(page, f"lesson06-dashboard-{size}", full_page=False)
    assert "Take them in order." in note.inner_text()
    assert box["x"] >= 0 and box["x"] + box["width"] <= SIZES[size][0]
    first = page.locator(".lesson-card").first
    assert "Anchor 2022" in first.inner_text() and first.bounding_box()["y"] < SIZES[size][1]  # a card on screen
