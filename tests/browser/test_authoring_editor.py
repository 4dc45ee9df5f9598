"""The lesson editor: YAML highlighted with line numbers, the broken line marked, a stale token renewed without
publishing. Screenshots: test-artifacts/screenshots/polish-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.pages import (
    LESSON,
    STAFF,
    context_at,
)

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


def test_the_editor_highlights_yaml_numbers_lines_and_marks_the_broken_one(browser, live_server, seeded):
    ctx = context_at(browser, 1280, 900)
    page = ctx.new_page()
    login(page, live_server.url, STAFF)
    page.goto(f"{live_server.url}/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml")
    editor = page.locator(".cm-editor")
    expect(editor).to_be_visible()
    expect(page.locator("#text")).to_be_hidden()  # the textarea stays the form field, under the editor
    expect(editor.locator(".cm-lineNumbers .cm-gutterElement", has_text="12")).to_have_count(1)
    assert editor.locator(".cm-content span[class]").count() > 10  # highlighted tokens
    line2 = editor.locator(".cm-line").nth(1)
    line2.click()
    page.keyboard.press("End")
    page.keyboard.type(": broken")
    preview = page.locator("#preview")
    expect(preview).to_contain_text("Put the whole text in double quotes", timeout=10_000)
    expect(preview).to_contain_text("1 problem")
    expect(editor.locator(".cm-error-line")).to_have_count(1)
    assert "broken" in page.locator("#text").input_value()  # what is typed reaches the form
    screenshot(page, "polish-editor-error-laptop")
    ctx.close()
    # without JavaScript the page is a plain textarea form
    ctx = context_at(browser, 1280, 900, java_script_enabled=False)
    page = ctx.new_page()
    login(page, live_server.url, STAFF)
    page.goto(f"{live_server.url}/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml")
    expect(page.locator("textarea#text")).to_be_visible()
    expect(page.locator(".cm-editor")).to_have_count(0)
    ctx.close()


def test_a_stale_token_in_the_editor_renews_it_and_never_publishes(browser, live_server, seeded):
    """The editor's form previews on input (hx-post .../preview) but its action publishes: when its token went
    stale, the page takes the fresh one and says the next try goes through; it must not send the form again
    (static/requests.js resends only a form htmx sends on submit to its own action)."""
    ctx = context_at(browser, 1280, 900)
    page = ctx.new_page()
    login(page, live_server.url, STAFF)
    url = f"{live_server.url}/instructor/lessons/{LESSON}/edit?file=parts/orient.yaml"
    page.goto(url)
    sent = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    page.evaluate(
        """() => {
          document.body.setAttribute('hx-headers:inherited', '{"X-CSRF-Token": "stale"}');
          document.querySelectorAll('input[name=csrf_token]').forEach(i => { i.value = 'stale'; });
        }"""
    )
    editor = page.locator(".cm-editor")
    editor.locator(".cm-line").nth(1).click()
    page.keyboard.press("End")
    page.keyboard.type(" x")
    alert = page.locator("#request-error")
    expect(alert).to_contain_text("the next try goes through", timeout=10_000)
    with page.expect_response(lambda r: r.url.endswith("/preview") and r.status == 200, timeout=10_000):
        page.keyboard.type("y")  # the next preview carries the fresh token
    expect(alert).to_be_hidden()
    assert page.url == url and not [u for u in sent if "/publish" in u], sent
    assert len([u for u in sent if u.endswith("/preview")]) == 2, sent
    ctx.close()
