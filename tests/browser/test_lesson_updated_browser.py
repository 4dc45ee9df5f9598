"""A learner who read a lesson, then comes back after the instructor published a new version from the editor with
a note, is told once, above the part they open: "This lesson was updated since you last read it: version N → M,
published DAY. Author's note: ...". Real Chromium at laptop and phone widths; screenshots under
test-artifacts/screenshots/lesson-updated-*.png: look at them.

It publishes to planning-at-scale, a lesson no browser test after this file reads, so their pages stay as they
expect them (the live server is shared by the whole session)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, register, screenshot
from tests.browser.seed import Seeder
from tests.browser.test_lesson_quality import serious_violations

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

LESSON = "planning-at-scale"
WIDTHS = [(1280, 900, "laptop"), (390, 844, "phone390")]
AUTHOR = "updates-author@example.org"
NOTE = "The memory table now counts activations per micro-batch; the MoE example uses 64 experts."


def _publish_with_note(browser, live_server) -> int:
    """The instructor publishes a new version in the browser editor with a note; returns its number."""
    Seeder(live_server.data).user(AUTHOR, roles=("learner", "instructor"), name="Iris")
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    page.set_default_timeout(15_000)
    login(page, live_server.url, AUTHOR)
    page.goto(f"{live_server.url}/instructor/lessons/{LESSON}/edit?file=parts/memory-anatomy.yaml")
    page.get_by_label("Note for the version history (optional)").fill(NOTE)
    page.get_by_role("button", name="Validate and publish a new version").click()
    published = page.locator("#published")
    expect(published).to_contain_text("Published version")
    version = int(re.search(r"Published version (\d+)", published.inner_text()).group(1))
    ctx.close()
    return version


@pytest.mark.parametrize(("width", "height", "name"), WIDTHS)
def test_a_returning_learner_is_told_once_what_changed(browser, live_server, width, height, name):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    page.set_default_timeout(15_000)
    register(page, live_server.url, f"updated-{name}@example.org")
    first = f"{live_server.url}/lessons/{LESSON}/compute-budget"
    page.goto(first)
    expect(page.locator("#part-compute-budget")).to_be_visible()
    expect(page.locator("#lesson-updated")).to_have_count(0)  # a first read: nothing to tell

    version = _publish_with_note(browser, live_server)
    notice = page.locator("#lesson-updated")
    if name == "laptop":
        # the learner, whose page is still open, goes on to the next part from the pacing list (an htmx swap of
        # the lesson body, which holds the notice)
        with page.expect_response(lambda r: r.url.endswith("/memory-anatomy") and r.status == 200):
            page.locator("#pacing").get_by_role("link", name=re.compile("Memory anatomy")).click()
        expect(page.locator("#part-memory-anatomy")).to_be_visible()
        assert page.url.endswith(f"/lessons/{LESSON}/memory-anatomy")
        # the header drawn with the old page is swapped too: it says the version the notice names, once
        expect(page.locator("header.lesson-head .meta")).to_contain_text(f"Version {version}")
        expect(page.locator("header.lesson-head")).to_have_count(1)
    else:  # the learner comes back later and opens the next part afresh (a whole page)
        page.goto(f"{live_server.url}/lessons/{LESSON}/memory-anatomy")
    expect(notice).to_be_visible()
    expect(notice).to_have_attribute("role", "status")
    text = " ".join(notice.inner_text().split())
    assert text.startswith("This lesson was updated since you last read it: ")
    assert f"version {version - 1} → {version}, published " in text
    assert f"Author’s note: “{NOTE}”" in text
    box, part = notice.bounding_box(), page.locator("#part-memory-anatomy").bounding_box()
    assert box and part and box["y"] + box["height"] <= part["y"]  # above the part it introduces
    assert box["x"] >= 0 and box["x"] + box["width"] <= width  # inside the screen, nothing cut off
    notice.scroll_into_view_if_needed()
    screenshot(page, f"lesson-updated-{name}", full_page=False)
    assert serious_violations(page) == []

    page.reload()  # seen: gone on the next view of this part
    expect(page.locator("#part-memory-anatomy")).to_be_visible()
    expect(page.locator("#lesson-updated")).to_have_count(0)
    page.goto(first)  # and on the part read under the old version
    expect(page.locator("#part-compute-budget")).to_be_visible()
    expect(page.locator("#lesson-updated")).to_have_count(0)
    page.goto(f"{first}?v={version - 1}")  # an old version's page says which version it is, never this notice
    expect(page.get_by_text(f"You are reading version {version - 1} of this lesson")).to_be_visible()
    expect(page.locator("#lesson-updated")).to_have_count(0)
    ctx.close()
