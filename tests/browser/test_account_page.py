"""The account page in a browser: each action ends on /account with its confirmation (Post/Redirect/Get), a new
token is shown once with a way back, the form errors sit under their fields, and the tokens table fits a phone."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import register, screenshot

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

LONG_NAME = "the shared lab workstation in room 4.12 that runs the nightly FP8 sweeps"  # 72 characters


def _no_sideways_scroll(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 1
    wrap = page.locator('.table-wrap[aria-labelledby="tokens-cap"]')
    assert wrap.evaluate("e => e.scrollWidth - e.clientWidth") <= 1, "the tokens table scrolls sideways"


def test_account_actions_end_on_the_account_page(page, live_server):
    base = live_server.url
    register(page, base, "accountpage@example.org")
    page.goto(base + "/account")

    page.get_by_label("Display name").fill("Ada Lovelace")
    page.get_by_role("button", name="Save the name").click()
    page.wait_for_url(base + "/account?done=name#profile-h")
    expect(page.get_by_role("status").filter(has_text="Your display name is now “Ada Lovelace”.")).to_be_visible()

    page.get_by_label("Token name").fill(LONG_NAME)
    page.get_by_role("button", name="Create a token").click()
    expect(page.locator("#new-token")).to_have_text(re.compile(r"cst_[A-Za-z0-9_-]{20,}"))
    expect(page.locator(".callout")).to_contain_text("copy it now, it is not shown again")
    page.get_by_role("link", name="I have copied it: back to my account").click()
    page.wait_for_url(base + "/account#tok-h")
    expect(page.locator("#new-token")).to_have_count(0)

    page.get_by_label("Token name").fill("lab laptop")
    page.get_by_role("button", name="Create a token").click()
    page.get_by_role("link", name="I have copied it: back to my account").click()
    page.get_by_role("button", name="Revoke token lab laptop").click()
    page.wait_for_url(base + "/account?done=token-revoked#tok-h")
    expect(page.get_by_role("status").filter(has_text="Token revoked")).to_be_visible()
    table = page.get_by_role("table", name="Your tokens")
    expect(table).to_contain_text("revoked")
    expect(table).to_contain_text(LONG_NAME)
    screenshot(page, "account-tokens-1280")

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    _no_sideways_scroll(page)
    revoke = page.get_by_role("button", name=f"Revoke token {LONG_NAME}")
    box = revoke.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    name_cell = table.locator("td", has_text=LONG_NAME)
    line = float(name_cell.evaluate("e => parseFloat(getComputedStyle(e).lineHeight) || 24"))
    assert name_cell.bounding_box()["height"] <= 3 * line, "the token name wraps into a tall column"
    revoked = table.locator("td", has_text="revoked").bounding_box()
    assert revoked["x"] + revoked["width"] <= 390, revoked
    revoke.scroll_into_view_if_needed()
    screenshot(page, "account-tokens-390")


def test_every_password_problem_shows_under_its_field_on_a_phone(page, live_server):
    base = live_server.url
    register(page, base, "accountpw@example.org")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(base + "/account")
    page.get_by_label("Current password").fill("wrong one!")
    page.get_by_label("New password (at least 8 characters)").fill("short")
    page.get_by_label("The new password again").fill("shirt")
    page.get_by_role("button", name="Change the password").click()
    expect(page.locator("#current_password-error")).to_have_text("Current password: this is not your current password")
    expect(page.locator("#new_password-error")).to_have_text("New password: use 8 to 256 characters (you gave 5)")
    expect(page.locator("#confirm_password-error")).to_contain_text("the two new passwords differ")
    expect(page.get_by_label("Current password")).to_have_attribute("aria-invalid", "true")
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 1
    screenshot(page, "account-password-errors-390")
