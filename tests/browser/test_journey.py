"""The newcomer's journey in real Chromium against a real server with its embedded worker."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, register, screenshot

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

PARTS = [
    ("orient", "01", "5 min"),
    ("mental-model", "02", "8 min"),
    ("deep-dives", "03", "15 min"),
    ("code-trace", "04", "12 min"),
    ("history", "05", "8 min"),
    ("practice", "06", "12 min"),
]


def test_learner_journey_to_environment_report(page, live_server):
    base = live_server.url
    register(page, base, "learner@example.org", name="Lena")
    page.get_by_role("link", name="Transformer Scaling").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Transformer Scaling")
    nav = page.get_by_role("navigation", name="Lesson parts")
    for part_id, number, minutes in PARTS:
        link = nav.locator(f'a[href="/lessons/transformer-scaling/{part_id}"]')
        expect(link).to_contain_text(number)
        expect(link).to_contain_text(minutes)
        link.click()
        expect(page).to_have_url(re.compile(f"/lessons/transformer-scaling/{part_id}$"))
        expect(page.locator(".part .eyebrow").first).to_have_text(f"{number} · {minutes}")
    # Moving between parts happened without full reloads (htmx), and survives a reload (resume).
    page.reload()
    expect(page.locator(".part .eyebrow").first).to_have_text("06 · 12 min")

    nav.get_by_role("link", name="Hands-on lab").click()
    page.get_by_role("button", name="Check my lab environment").click()
    card = page.locator("#env-check-result article.job")
    expect(card).to_have_attribute("data-status", re.compile("queued|running|succeeded"))
    expect(card).to_have_attribute("data-status", "succeeded", timeout=60_000)
    expect(card.get_by_test_id("honesty-label")).to_contain_text("CPU emulation")
    expect(card.locator("table caption", has_text="FP8 recipes")).to_be_visible()
    expect(card).to_contain_text("no CUDA GPU")
    expect(card).to_contain_text("torch")
    screenshot(page, "env-check-report")

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile("/login$"))


def test_staff_created_from_the_command_line(page, live_server):
    base = live_server.url
    out = live_server.cli(
        "users",
        "create",
        "--email",
        "prof@example.org",
        "--password",
        "correct horse",
        "--role",
        "instructor",
        "--role",
        "grader",
    )
    assert "instructor" in out
    login(page, base, "prof@example.org")
    expect(page.get_by_role("link", name="Instructor")).to_be_visible()
    page.get_by_role("link", name="Instructor").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Instructor")
    expect(page.get_by_role("heading", name="Transformer Scaling")).to_be_visible()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Grading").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Grading")


def test_learner_is_refused_staff_pages(page, live_server):
    register(page, live_server.url, "nosy@example.org", name="Nosy")
    response = page.goto(live_server.url + "/instructor")
    assert response.status == 403
    expect(page.get_by_role("alert")).to_contain_text("This page is for instructors")
