"""In Chromium: private pages sent with Cache-Control: no-store still load, htmx still swaps, and
htmx runs no JavaScript written in attributes (static/htmx-noeval.js, htmx 4's stand-in for allowEval=false).
Back after logging out asks the server again instead of showing the learner's page from the cache."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SIZES, login, screenshot

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

WATCH = """
window.__csp = []; window.__htmxErrors = [];
document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective));
document.addEventListener('htmx:error', (e) => window.__htmxErrors.push(String(e.detail && e.detail.error)));
"""
# An attribute a stranger's text could carry if it slipped past escaping: htmx would build a function from it.
INJECT = """() => {
  const b = Object.assign(document.createElement('button'), {id: 'injected', type: 'button', textContent: 'x'});
  b.setAttribute('hx-on:click', 'window.__ran = 1');
  document.querySelector('main').append(b);
  htmx.process(b);
}"""


def test_private_pages_load_swap_and_run_no_attribute_code(browser, live_server):
    live_server.cli("users", "create", "--email", "nostore@example.org", "--password", "correct horse")
    width, height = SIZES["laptop"]
    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_init_script(WATCH)
    page = context.new_page()
    page.set_default_timeout(15_000)
    responses: dict[str, str | None] = {}
    page.on(
        "response", lambda r: responses.__setitem__(r.url.removeprefix(live_server.url), r.headers.get("cache-control"))
    )
    try:
        login(page, live_server.url, "nostore@example.org")
        page.goto(live_server.url + "/play")
        assert responses["/play"] == "no-store"
        assert responses["/static/vendor/htmx/htmx.min.js"] is None  # static files keep their validators
        assert responses["/static/htmx-noeval.js"] is None
        # htmx swaps the tool's output as the learner types (a GET with the CSRF header), no reload
        marker = page.evaluate("window.__marker = Math.random()")
        tool = page.locator("#tool-fp8-range")
        with page.expect_response(lambda r: "/play/fp8-range" in r.url) as swapped:
            tool.get_by_label("value arriving now").fill("120")
        assert swapped.value.status == 200 and swapped.value.headers["cache-control"] == "no-store"
        expect(tool).to_contain_text("224")
        assert page.evaluate("window.__marker") == marker
        screenshot(page, "no-store-play-swapped", full_page=False)
        # eval is off: the injected handler is refused by htmx itself, before the CSP would have to refuse it
        page.evaluate(INJECT)
        page.click("#injected")
        page.wait_for_function("window.__htmxErrors.length > 0")
        assert page.evaluate("window.__ran") is None
        errors = page.evaluate("window.__htmxErrors")
        assert any("htmx eval is off (static/htmx-noeval.js)" in e for e in errors), errors
        assert page.evaluate("window.__csp") == []  # no Function was even tried: no 'unsafe-eval' violation
        # Back after logging out asks the server, which sends a login page, not the learner's page from the cache
        page.get_by_role("button", name="Log out").click()
        expect(page).to_have_url(re.compile("/login$"))
        page.go_back()
        expect(page).to_have_url(re.compile(r"/login\?next=/play$"))
        expect(page.locator("#tool-fp8-range")).to_have_count(0)
        screenshot(page, "no-store-back-after-logout", full_page=False)
    finally:
        context.close()
