"""LTI 1.3 in a real browser: a site admin registers the LMS on /lti at phone width, a learner launches from
the LMS (tests/lti_platform) and opens the lesson in a new window, and a forged launch is refused by name.

The LMS's users get their own addresses (students.example.edu), so pages of the shared server that count
learners by a prefix of their own are untouched."""

from __future__ import annotations

import pytest
import requests

from tests.browser.conftest import SIZES, login, screenshot
from tests.lti_platform.platform import INSTRUCTOR, LEARNER, Platform, new_key

LESSON = "transformer-scaling"
STAFF = "lti-ines@example.org"


@pytest.fixture(scope="module")
def server(live_server):
    live_server.cli("users", "create", "--email", STAFF, "--role", "admin", "--password", "correct horse")
    return live_server.url


@pytest.fixture(scope="module")
def platform():
    p = Platform.start()
    p.add_member("u-ann", "Ann Learner", [LEARNER])
    p.add_member("u-ivy", "Ivy Instructor", [INSTRUCTOR])
    yield p
    p.stop()


def _context(browser, size: str):
    width, height = SIZES[size]
    ctx = browser.new_context(viewport={"width": width, "height": height})
    ctx.set_default_timeout(15_000)
    return ctx


def _fits(page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"the page is {width} px wide at {page.viewport_size['width']}"


def _launch(page, server: str, platform: Platform, sub: str, *, forge=None, kind: str = "resource") -> None:
    """What the LMS does: the login initiation, its authorization page, and its form posted to the tool."""
    params = platform.login_params(sub, kind=kind, custom={"target": f"lesson:{LESSON}"})
    page.goto(server + "/lti/login?" + "&".join(f"{k}={requests.utils.quote(v)}" for k, v in params.items()))
    page.wait_for_url(platform.base + "/auth*")
    if forge:
        token = page.locator("input[name=id_token]").get_attribute("value")
        page.locator("input[name=id_token]").evaluate("(el, v) => el.value = v", forge(token))
    with page.expect_navigation(url=server + "/lti/launch"):
        page.evaluate("document.forms[0].submit()")


def test_register_launch_open_and_refuse(browser, server, platform):
    phone = _context(browser, "phone")
    page = phone.new_page()
    login(page, server, STAFF)
    page.goto(server + "/lti")
    for name, value in platform.registration().items():
        page.locator(f"#f-{name}").fill(value)
    page.get_by_role("button", name="Register").click()
    page.wait_for_load_state()
    assert page.locator("#lti-status").inner_text().startswith("Registered Test LMS")
    _fits(page)
    url_box = page.locator("#url-jwks").bounding_box()
    assert url_box["x"] + url_box["width"] <= 390  # long URLs wrap inside the phone's width
    screenshot(page, "lti-platforms-phone")
    phone.close()
    platform.tool_jwks = requests.get(server + "/lti/jwks.json", timeout=10).json()

    laptop = _context(browser, "laptop")
    page = laptop.new_page()
    _launch(page, server, platform, "u-ann")
    button = page.get_by_role("link", name="Open Transformer")
    box = button.bounding_box()
    assert box["y"] + box["height"] <= 800, "the launch's one button is above the fold"
    screenshot(page, "lti-launch-laptop")
    with laptop.expect_page() as opened:
        button.click()
    lesson = opened.value
    lesson.wait_for_url(f"{server}/lessons/{LESSON}/**")  # the lesson opens at its first part
    assert "Ann Learner" in lesson.locator("header.site .who").inner_text()  # logged in as the LMS's user
    screenshot(lesson, "lti-lesson-opened-laptop", full_page=False)

    _launch(page, server, platform, "u-ann", forge=lambda t: platform.resign(t, key=new_key()))
    assert page.locator("[data-check]").inner_text() == "signature"
    screenshot(page, "lti-refused-laptop")

    staff = laptop.new_page()
    _launch(staff, server, platform, "u-ivy")
    with laptop.expect_page() as opened:
        staff.get_by_role("link", name="Open Transformer").click()
    ivy = opened.value
    ivy.wait_for_url(f"{server}/lessons/{LESSON}/**")
    # the LMS course's class, where its instructor finds the link's services (the class switcher's page)
    ivy.goto(server + "/classes")
    ivy.get_by_role("link", name="GPU Systems, fall term").click()
    ivy.get_by_role("navigation", name="This class").get_by_role("link", name="LMS").click()
    assert ivy.get_by_role("button", name="Sync roster").count() == 1
    _fits(ivy)
    screenshot(ivy, "lti-class-links-laptop")

    # deep linking: the picker, then the signed answer posted to the LMS (the page's CSP admits that one form)
    picker = laptop.new_page()
    _launch(picker, server, platform, "u-ivy", kind="deep")
    picker.get_by_label("Lab report: Transformer Scaling").check()
    screenshot(picker, "lti-deep-link-laptop")
    picker.get_by_role("button", name="Add to the LMS course").click()
    picker.wait_for_url(server + "/lti/deep-link")
    with picker.expect_navigation(url=platform.base + "/deep_link_return"):
        picker.get_by_role("button", name="Return to the LMS").click()
    assert picker.locator("p").inner_text() == "Link added"
    assert platform.deep_link_items[-1]["custom"] == {"target": f"lab:{LESSON}"}
    laptop.close()
