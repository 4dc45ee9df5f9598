"""The interactive lesson reacts as the learner types; API tokens are created and shown once."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import register

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


def test_fp8_range_reacts_to_input(page, live_server):
    register(page, live_server.url, "player@example.org")
    page.goto(live_server.url + "/lessons/transformer-scaling/orient")
    page.get_by_role("link", name="Play the interactive lesson").click()
    tool = page.locator("#tool-fp8-range")
    expect(tool).to_contain_text("clipped at ±448")  # the default is the seed's spike: 300 under amax 240
    tool.get_by_label("value arriving now").fill("120")
    expect(page.locator("#tool-fp8-range")).not_to_contain_text("clipped", timeout=5000)
    expect(page.locator("#tool-fp8-range")).to_contain_text("224")
    window = page.locator("#tool-overlap-window")
    window.get_by_label("the work in the window reads the gathered result").check()
    expect(page.locator("#tool-overlap-window").get_by_role("alert")).to_contain_text("Unsafe")
    page.locator("#tool-overlap-window").get_by_label("collective (ms)").fill("-1")
    expect(page.locator("#tool-overlap-window [role=alert]").first).to_contain_text("collective (ms): a number from 0")
    expect(page.locator("#err-overlap-window-comm_ms")).to_contain_text("a number from 0 to 1,000,000")


def test_token_is_shown_once(page, live_server):
    register(page, live_server.url, "scripter@example.org")
    page.get_by_role("link", name="Account").click()
    page.get_by_label("Token name").fill("lab laptop")
    page.get_by_role("button", name="Create a token").click()
    token = page.locator("#new-token").inner_text()
    assert re.fullmatch(r"cst_[A-Za-z0-9_-]{20,}", token)
    page.goto(live_server.url + "/account")
    expect(page.locator("body")).not_to_contain_text(token)
    expect(page.get_by_role("table", name="Your tokens")).to_contain_text("lab laptop")
