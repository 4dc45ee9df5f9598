"""Every kind of page loads under the Content-Security-Policy with no violation (each one is
caught by a `securitypolicyviolation` listener installed before any page script, and by the console), and what
the policy could break still works: htmx swaps (a tool's output, part navigation, the page's job-status poll),
KaTeX renders with its vendored fonts, the vendored Swagger UI lists the API, the account pages' forms post."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.settle import goto_settled

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

WATCH = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline') + ' at ' + e.sourceFile + ':' + e.lineNumber);
});
"""

PAGES = [
    "/",
    "/lessons/transformer-scaling/orient",
    "/lessons/transformer-scaling/mental-model",
    "/lessons/transformer-scaling/code-trace",
    "/lessons/transformer-scaling/history",
    "/lessons/transformer-scaling/deep-dives",
    "/lessons/transformer-scaling/practice",
    "/play",
    "/labs",
    "/labs/fp8-step",
    "/jobs",
    "/reports",
    "/lessons/transformer-scaling/report",
    "/account",
    "/account/reset-links",
    "/instructor",
    "/instructor/lessons/transformer-scaling/edit?file=parts/orient.yaml",
    "/classes/default/grader",
    "/api/v1/docs",
    "/jobs/999999",  # an HTML error page
]


@pytest.fixture
def watched(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(WATCH)
    page = context.new_page()
    page.set_default_timeout(15_000)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.console_errors = console  # type: ignore[attr-defined]
    yield page
    context.close()


def _violations(page) -> list[str]:
    csp_console = [t for t in page.console_errors if "Content Security Policy" in t or "Refused to" in t]
    return page.evaluate("window.__csp || []") + csp_console


def test_every_page_kind_loads_without_a_csp_violation(watched, live_server):
    page = watched
    live_server.cli(
        "users", "create", "--email", "csp@example.org", "--password", "correct horse",
        "--role", "admin", "--role", "author", "--role", "instructor", "--class", "default",
    )  # fmt: skip
    for path in ("/login", "/register"):
        response = page.goto(live_server.url + path)
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    login(page, live_server.url, "csp@example.org")
    found = {}
    for path in PAGES:
        response = goto_settled(page, live_server.url + path)
        assert "content-security-policy" in response.headers, path
        if v := _violations(page):
            found[path] = v
        page.console_errors.clear()
    assert found == {}, found
    # the policy is enforced and the listener hears it: an injected inline script is refused and reported
    page.goto(live_server.url + "/")
    page.evaluate(
        "document.body.append(Object.assign(document.createElement('script'), {textContent: 'window.__ran = 1'}))"
    )
    assert page.evaluate("window.__ran") is None
    assert any(v.startswith("script-src") for v in page.evaluate("window.__csp")), page.evaluate("window.__csp")


def test_htmx_katex_and_the_docs_ui_work_under_the_policy(watched, live_server):
    page = watched
    live_server.cli("users", "create", "--email", "csp2@example.org", "--password", "correct horse")
    login(page, live_server.url, "csp2@example.org")

    # KaTeX: math is typeset and its vendored fonts load
    page.goto(live_server.url + "/lessons/transformer-scaling/deep-dives")
    expect(page.locator(".katex").first).to_be_visible()
    assert page.evaluate("document.fonts.check('16px KaTeX_Main')")
    # htmx: part navigation swaps the part without a reload
    marker = page.evaluate("window.__marker = Math.random()")
    page.get_by_role("navigation", name="Lesson parts").locator('a[href$="/history"]').click()
    expect(page).to_have_url(re.compile("/history$"))
    assert page.evaluate("window.__marker") == marker
    # htmx with the CSRF header from hx-headers on <body>: the interactive tool recomputes as you type
    page.goto(live_server.url + "/play")
    tool = page.locator("#tool-fp8-range")
    tool.get_by_label("value arriving now").fill("120")
    expect(tool).not_to_contain_text("clipped", timeout=5000)
    expect(tool).to_contain_text("224")
    # an htmx POST (CSRF header) and the page's one job-status poll (its ETag in hx-headers): the environment check
    # runs, a few seconds on the server's one worker, and its card comes back finished
    page.goto(live_server.url + "/lessons/transformer-scaling/lab")
    polls: list = []
    page.on("request", lambda r: polls.append(r) if urlparse(r.url).path == "/jobs/live" else None)
    page.get_by_role("button", name="Check my lab environment").click()
    card = page.locator("#env-check-result article.job")
    expect(card).to_have_attribute("data-status", re.compile("succeeded|failed"), timeout=60_000)
    expect(card).to_have_attribute("data-status", "succeeded")
    assert polls and all(re.fullmatch(r'"[0-9a-f]+"', r.headers.get("if-none-match", "")) for r in polls), [
        (r.url, r.headers) for r in polls
    ]
    screenshot(page, "csp-lab-job")
    # the vendored Swagger UI renders the API's operations offline, reached from /docs
    page.goto(live_server.url + "/docs")
    expect(page).to_have_url(live_server.url + "/api/v1/docs")
    expect(page.locator(".opblock").first).to_be_visible(timeout=15_000)
    expect(page.locator("body")).to_contain_text("/api/v1/jobs")
    screenshot(page, "csp-api-docs")
    assert _violations(page) == []


def test_account_forms_work_and_a_reset_link_sets_a_password(watched, live_server, browser):
    page = watched
    live_server.cli("users", "create", "--email", "csp3@example.org", "--password", "correct horse")
    login(page, live_server.url, "csp3@example.org")
    page.goto(live_server.url + "/account")
    page.get_by_label("Display name").fill("Cee Ess Pee")
    page.get_by_role("button", name="Save the name").click()
    # the Profile section's own status line (the page's first status is the site-wide notices region)
    expect(page.get_by_role("region", name="Profile").get_by_role("status")).to_contain_text("Cee Ess Pee")
    page.get_by_label("Current password").fill("wrong password")
    page.get_by_label("New password (at least 8 characters)").fill("battery staple")
    page.get_by_label("The new password again").fill("battery staple")
    page.get_by_role("button", name="Change the password").click()
    expect(page.locator("#current_password-error")).to_contain_text("not your current password")
    screenshot(page, "account-password-error")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "account-phone")
    out = live_server.cli("users", "reset-link", "--email", "csp3@example.org")
    path = re.search(r"/reset/\S+", out).group(0)
    page.goto(live_server.url + path)
    page.get_by_label("New password (at least 8 characters)").fill("battery staple")
    page.get_by_label("The same password again").fill("battery staple")
    page.get_by_role("button", name="Set the password").click()
    expect(page.locator("#login-notice")).to_contain_text("Your new password is set")
    login(page, live_server.url, "csp3@example.org", password="battery staple")
    expect(page.get_by_role("link", name="Account")).to_be_visible()
    assert _violations(page) == []
