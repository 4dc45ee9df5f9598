"""In a real browser: guesses from elsewhere lock an account for clients it has not seen, but the
browser that logged in before (its device cookie, HttpOnly and Lax, kept by Chromium over plain HTTP) still
gets in; the refusal says when to try again and fits a phone. And the account page says what ends a token."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SIZES, login, register, screenshot
from tests.browser.pages import context_at, overflow

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


def _hold_lock(live_server, email: str) -> None:
    """Stretch the account's lock to the 15-minute cap that repeated guessing reaches, so the checks below run
    inside it however slow the machine is."""
    from sqlalchemy import update

    from app.core.db import make_engine
    from app.core.models import LoginThrottle, utcnow
    from app.services.accounts import throttle

    engine = make_engine(f"sqlite:///{live_server.data / 'course.db'}")
    try:
        with engine.begin() as conn:
            held = utcnow() + timedelta(seconds=throttle.ACCOUNT.cap_s)
            conn.execute(update(LoginThrottle).where(LoginThrottle.key == f"account:{email}").values(locked_until=held))
    finally:
        engine.dispose()


def test_a_browser_that_logged_in_before_gets_in_while_strangers_are_locked_out(browser, live_server):
    base, email = live_server.url, "lockout-owner@example.org"
    own = context_at(browser, *SIZES["laptop"])
    guesser = context_at(browser, *SIZES["laptop"])
    stranger = context_at(browser, *SIZES["phone"])
    try:
        laptop = own.new_page()
        register(laptop, base, email, name="Lena")
        device = [c for c in own.cookies() if c["name"] == "course_device"]
        assert len(device) == 1 and device[0]["httpOnly"] and device[0]["sameSite"] == "Lax"
        laptop.get_by_role("button", name="Log out").click()
        laptop.wait_for_url(base + "/login")

        guesses = guesser.new_page()
        for _ in range(6):
            login(guesses, base, email, password="not the password")
        expect(guesses.locator("#login-error")).to_contain_text("Wait 2 seconds before the next try")
        _hold_lock(live_server, email)

        phone = stranger.new_page()
        login(phone, base, email)  # the right password, from a browser the account has not seen
        expect(phone.locator("#login-error")).to_contain_text("Too many failed attempts. Try again in 15 minutes.")
        assert overflow(phone) <= 1
        error = phone.locator("#login-error").bounding_box()
        assert error is not None and error["x"] >= 0 and error["x"] + error["width"] <= SIZES["phone"][0]
        screenshot(phone, "lockout-stranger-phone")

        login(laptop, base, email)  # its owner's laptop, same password, at once
        laptop.wait_for_url(base + "/")
        expect(laptop.get_by_role("button", name="Log out")).to_be_visible()
        screenshot(laptop, "lockout-owner-laptop-in", full_page=False)
    finally:
        for ctx in (own, guesser, stranger):
            ctx.close()


def test_the_account_page_says_what_ends_a_token(browser, live_server):
    ctx = context_at(browser, *SIZES["phone"])
    try:
        page = ctx.new_page()
        register(page, live_server.url, "token-words@example.org")
        page.goto(live_server.url + "/account#tok-h")
        said = page.locator("#tok-ends")
        expect(said).to_contain_text(
            "change your password, log out everywhere, or set a new password from a reset link"
        )
        box = said.bounding_box()
        assert box is not None and box["x"] + box["width"] <= SIZES["phone"][0]
        assert overflow(page) <= 1
        said.scroll_into_view_if_needed()
        screenshot(page, "account-token-ends-phone", full_page=False)
    finally:
        ctx.close()
