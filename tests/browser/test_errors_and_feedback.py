"""Feedback in colour and errors where the learner looks: answers, the lab form, registration, a refused form
without JavaScript, an action that fails. Screenshots: test-artifacts/screenshots/polish-*.png."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.pages import (
    LEARNER,
    LESSON,
    WIDTHS,
    context_at,
    overflow,
    rgb,
)
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


@pytest.mark.parametrize("width,height,name", WIDTHS[:2])
def test_answer_feedback_is_compact_and_coloured_by_outcome(browser, live_server, width, height, name):
    ctx = context_at(browser, width, height)
    page = ctx.new_page()
    Seeder(live_server.data).user(f"fb-{name}@example.org")
    login(page, live_server.url, f"fb-{name}@example.org")
    page.goto(f"{live_server.url}/lessons/{LESSON}/practice")
    q = page.locator(".question").first
    q.get_by_label("B.", exact=False).check()
    q.get_by_role("button", name="Check").click()
    wrong = page.locator(".question").first.locator(".feedback")
    expect(wrong).to_contain_text("Not yet")
    style = wrong.evaluate("e => [getComputedStyle(e).whiteSpace, getComputedStyle(e).backgroundColor]")
    assert style[0] == "normal"  # the template's own line breaks do not become gaps
    assert _reddish(style[1]), style
    screenshot(page, f"polish-feedback-wrong-{name}")
    page.locator(".question").first.get_by_label("A.", exact=False).check()
    page.locator(".question").first.get_by_role("button", name="Check").click()
    right = page.locator(".question").first.locator(".feedback")
    expect(right).to_contain_text("Correct")
    assert _greenish(right.evaluate("e => getComputedStyle(e).backgroundColor"))
    # no gap taller than a line between the box's paragraphs
    gaps = right.evaluate(
        """e => [...e.children].slice(1).map((c, i) =>
             c.getBoundingClientRect().top - e.children[i].getBoundingClientRect().bottom)"""
    )
    assert max(gaps or [0]) < 30, gaps
    screenshot(page, f"polish-feedback-right-{name}")
    # a numeric answer may be a calculation
    numeric = page.locator(".question", has=page.locator("input[inputmode=decimal]")).first
    numeric.locator("input[name=answer]").fill("448/400")
    numeric.get_by_role("button", name="Check").click()
    expect(
        page.locator(".question", has=page.locator("input[inputmode=decimal]")).first.locator(".feedback")
    ).to_be_visible()
    ctx.close()


def _reddish(css: str) -> bool:
    r, g, b = rgb(css)
    return r > g + 10 and r > b + 10


def _greenish(css: str) -> bool:
    r, g, b = rgb(css)
    return g > r + 10 and g > b


@pytest.mark.parametrize("width,height,name", WIDTHS[:2])
def test_lab_form_shows_every_error_next_to_its_field(browser, live_server, width, height, name):
    ctx = context_at(browser, width, height)
    page = ctx.new_page()
    Seeder(live_server.data).user(f"form-{name}@example.org")
    login(page, live_server.url, f"form-{name}@example.org")
    page.goto(f"{live_server.url}/labs/tp-sweep")
    # a yes/no parameter: its box sits on its name's line and is described by its hint
    box, name_label = page.locator("#p-fp8"), page.locator("label[for=p-fp8]")
    b, lab = box.bounding_box(), name_label.bounding_box()
    assert b and lab and lab["y"] <= b["y"] + b["height"] / 2 <= lab["y"] + lab["height"], (b, lab)
    expect(box).to_have_attribute("aria-describedby", "h-fp8")
    page.locator("#p-degrees").fill("1, 2, 9")
    page.locator("#p-tokens").fill("1")
    page.locator("#p-steps").fill("many")
    page.get_by_role("button", name="Run tp-sweep").click()
    expect(page.locator("#lab-form-wrap [role=alert]").first).to_contain_text("3 fields below")
    expect(page.locator("#e-degrees")).to_have_text("degrees: each at most 8, got 9")
    expect(page.locator("#e-tokens")).to_have_text("tokens: at least 8, got 1")
    expect(page.locator("#e-steps")).to_have_text("steps: a whole number from 1 to 50, got 'many'")
    expect(page.locator("#p-tokens")).to_have_attribute("aria-invalid", "true")
    screenshot(page, f"polish-lab-form-errors-{name}")
    page.locator("#p-degrees").fill("1,3")
    page.locator("#p-tokens").fill("16")
    page.locator("#p-steps").fill("1")
    page.get_by_role("button", name="Run tp-sweep").click()
    expect(page.locator("#e-degrees")).to_contain_text("ffn(2048) % degree(3) = 2")  # at submit, not by the job
    expect(page.locator("#job-list article.job")).to_have_count(0)
    ctx.close()


@pytest.mark.parametrize("width,height,name", WIDTHS[:2])
def test_registration_shows_every_error_at_once(browser, live_server, seeded, width, height, name):
    ctx = context_at(browser, width, height)
    page = ctx.new_page()
    page.goto(f"{live_server.url}/register")
    page.locator("#email").fill("not an address")
    page.locator("#display_name").fill("   ")
    page.locator("#password").fill("short")
    page.get_by_role("button", name="Register").click()
    expect(page.locator("#email-error")).to_have_text("enter an address like name@example.org")
    expect(page.locator("#display_name-error")).to_contain_text("use 1 to 80 characters")
    expect(page.locator("#password-error")).to_contain_text("(you gave 5)")
    expect(page.locator("#email")).to_have_value("not an address")  # what was typed stays
    expect(page.locator("#password")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#email")).to_be_focused()  # the first field to fix, not the top of the reloaded page
    assert overflow(page) <= 0
    screenshot(page, f"polish-register-errors-{name}")
    page.locator("#email").fill(f"fixed-{name}@example.org")
    page.locator("#display_name").fill("Fay")
    page.locator("#password").fill("short")
    page.keyboard.press("Enter")
    expect(page.locator("#password-error")).to_be_visible()
    expect(page.locator("#password")).to_be_focused()
    # a refused login: the email stays, the focus is on the password to type again
    page.goto(f"{live_server.url}/login")
    page.locator("#email").fill(LEARNER)
    page.locator("#password").fill("not the password")
    page.keyboard.press("Enter")
    expect(page.locator("#login-error")).to_be_visible()
    expect(page.locator("#password")).to_be_focused()
    ctx.close()


def test_without_javascript_a_refused_form_comes_back_filled_in(browser, live_server):
    """No script renews a stale token on a plain form: the refusal page offers the form back with what was
    typed and the current token, and sending it from there saves the answer."""
    ctx = context_at(browser, 390, 844, java_script_enabled=False)
    page = ctx.new_page()
    email = "nojs@example.org"
    Seeder(live_server.data).user(email)
    login(page, live_server.url, email)
    page.goto(f"{live_server.url}/lessons/{LESSON}/deep-dives")
    other = ctx.new_page()  # logged out and in again in another tab: this page's token is out of date
    other.goto(live_server.url + "/")
    other.get_by_role("button", name="Log out").click()
    login(other, live_server.url, email)
    first = page.locator(".pause").first
    text = "One outlier sets a per-tensor scale,\nso the small values fall below FP8's range."
    first.get_by_label("Your answer").fill(text)
    first.get_by_role("button", name="Save my answer and reveal the reference").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Not sent: the page was out of date")
    resend = page.get_by_test_id("resend")
    expect(resend.get_by_label("answer")).to_have_value(text)
    screenshot(page, "polish-resend-nojs-phone390")
    assert overflow(page) <= 1
    resend.get_by_role("button", name="Send it again").click()
    # without JavaScript the answer comes back as a whole page, in the site's frame, with a way back
    saved = page.locator(".pause")
    expect(saved).to_contain_text("Reference answer")
    expect(saved.locator(".your-answer")).to_contain_text("so the small values fall below")
    expect(page.locator("header.site")).to_be_visible()
    screenshot(page, "polish-answered-nojs-phone390")
    assert overflow(page) <= 1
    page.get_by_role("link", name="Back to the part").click()
    expect(page).to_have_url(re.compile(f"/lessons/{LESSON}/deep-dives#pause-"))
    expect(page.locator(".pause").first).to_contain_text("so the small values fall below")
    ctx.close()


@pytest.mark.parametrize(("width", "height", "name"), WIDTHS[:2])
def test_a_failed_action_says_why_and_keeps_what_was_typed(browser, live_server, width, height, name):
    """An htmx action whose answer does not come back into the page says why in an alert at the foot of the screen
    (static/requests.js) instead of doing nothing, and what the learner typed stays: a server that cannot be
    reached; a form token gone out of date (a login in another tab), which the page renews so the next press
    works without a reload; being logged out, which keeps the page (no redirect) and links to a login in a new
    tab. Background requests stay quiet."""
    ctx = context_at(browser, width, height)
    page = ctx.new_page()
    email = f"fail-{name}@example.org"
    Seeder(live_server.data).user(email)
    login(page, live_server.url, email)
    page.clock.install()  # time runs as usual; run_for below brings the reading-time report forward
    url = f"{live_server.url}/lessons/{LESSON}/deep-dives"
    page.goto(url)
    alert = page.locator("#request-error")
    expect(alert).to_be_hidden()
    first, second = page.locator(".pause").nth(0), page.locator(".pause").nth(1)
    text = "A fixed scale either clips the outliers or leaves most of the range unused."
    first.get_by_label("Your answer").fill(text)
    save = first.get_by_role("button", name="Save my answer and reveal the reference")

    # no answer at all
    page.route("**/pauses/**", lambda route: route.abort())
    save.click()
    expect(alert).to_contain_text("could not be reached")
    expect(first.get_by_label("Your answer")).to_have_value(text)
    alert.get_by_role("button", name="Dismiss").click()
    expect(alert).to_be_hidden()
    page.unroute("**/pauses/**")

    # logged out and in again in another tab: a new session, so this page's form token is out of date
    other = ctx.new_page()
    other.goto(live_server.url + "/")
    other.get_by_role("button", name="Log out").click()
    login(other, live_server.url, email)
    with page.expect_response(lambda r: "/pauses/" in r.url and r.status == 403):
        save.click()  # refused; the page takes the token the 403 brought and sends the form again by itself
    expect(first).to_contain_text("Reference answer")
    expect(first).to_contain_text(text)
    expect(alert).to_be_hidden()

    # logged out (everywhere, from another tab): the page stays, with what was typed, and offers a login
    other.get_by_role("button", name="Log out").click()
    second.get_by_label("Your answer").fill("Each axis splits a different dimension.")
    second.get_by_role("button", name="Save my answer and reveal the reference").click()
    expect(alert).to_contain_text("You are logged out")
    expect(alert.get_by_role("link", name="log in again in a new tab")).to_have_attribute("target", "_blank")
    expect(page).to_have_url(url)
    expect(second.get_by_label("Your answer")).to_have_value("Each axis splits a different dimension.")
    box = alert.bounding_box()
    assert box and box["y"] + box["height"] <= height and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    screenshot(page, f"polish-request-error-{name}", full_page=False)  # the alert is fixed to the screen
    login(other, live_server.url, email)  # ...in the new tab; then the same button saves
    second.get_by_role("button", name="Save my answer and reveal the reference").click()
    expect(second).to_contain_text("Reference answer")
    expect(alert).to_be_hidden()

    # the reading time (static/reading.js, a beacon: nothing reads its answer) goes quietly, failed or not, and
    # carries the token the page renewed after the login in the other tab
    page.route("**/progress/**", lambda route: route.abort())
    with page.expect_event("requestfailed", lambda r: r.url.endswith("/progress/deep-dives/time")):
        page.clock.run_for(61_000)
    page.unroute("**/progress/**")
    with page.expect_response(lambda r: r.url.endswith("/progress/deep-dives/time")) as beat:
        page.clock.run_for(61_000)
    assert beat.value.status == 204
    other.get_by_role("button", name="Log out").click()
    with page.expect_response(lambda r: r.url.endswith("/progress/deep-dives/time")) as beat:
        page.clock.run_for(61_000)
    assert beat.value.status == 403  # logged out: refused before the login check; quiet all the same
    expect(alert).to_be_hidden()
    expect(page).to_have_url(url)
    ctx.close()
