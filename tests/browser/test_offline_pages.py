"""Nothing is fetched from another host; the API docs render offline and follow the colour scheme."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.pages import (
    LESSON,
    STAFF,
    context_at,
)
from tests.browser.settle import goto_settled

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


def test_nothing_is_fetched_from_another_host_and_the_api_docs_render(browser, live_server, seeded):
    ctx = context_at(browser, 1280, 900)
    outside = []

    def guard(route):
        url = route.request.url
        if url.startswith(live_server.url) or url.startswith("data:"):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    ctx.route("**/*", guard)
    page = ctx.new_page()
    login(page, live_server.url, STAFF)
    for path in ["/", f"/lessons/{LESSON}/deep-dives", "/labs/tp-sweep", f"/jobs/{seeded['jobs']['tp-sweep']}"]:
        goto_settled(page, live_server.url + path)
    page.goto(f"{live_server.url}/docs")  # where people look first: it leads to the API's page
    expect(page).to_have_url(f"{live_server.url}/api/v1/docs")
    expect(page.get_by_role("heading", name=re.compile("Parallel Horizons"))).to_be_visible()
    ops = page.locator(".opblock-summary-path")
    expect(ops.first).to_be_visible()
    paths = ops.all_inner_texts()
    assert any("/api/v1/jobs" in p for p in paths) and len(paths) >= 8
    screenshot(page, "polish-api-docs-laptop")
    assert outside == []
    ctx.close()


@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_the_api_docs_follow_the_readers_colour_scheme(browser, live_server, scheme):
    """Swagger UI 5.35 has a dark theme under <html class="dark-mode">; the page turns it on when the system asks
    for dark (it stayed white before), and its line back to the course stays legible in both."""
    ctx = context_at(browser, 1280, 800, color_scheme=scheme)
    page = ctx.new_page()
    page.goto(f"{live_server.url}/api/v1/docs")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
    background = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert page.evaluate("document.documentElement.classList.contains('dark-mode')") == (scheme == "dark")
    assert background == ("rgb(28, 32, 34)" if scheme == "dark" else "rgba(0, 0, 0, 0)")
    link = page.get_by_role("link", name="Account", exact=True)  # Swagger UI has a section "account" too
    colour = link.evaluate("a => getComputedStyle(a).color")
    assert colour == ("rgb(140, 180, 255)" if scheme == "dark" else "rgb(0, 0, 238)")
    screenshot(page, f"polish-api-docs-{scheme}-laptop")
    ctx.close()
