"""The newcomer's journey in real Chromium against a real server with its embedded worker."""

import re

import pytest
from playwright.sync_api import expect

from app.content.loader import load_lesson_dir
from tests.browser.conftest import login, register, screenshot
from tests.conftest import ROOT

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


def _parts() -> list[tuple[str, str, str]]:
    """(part id, its number, the eyebrow's time) as the loader computes them (app/content/timing.py)."""
    lesson, errors = load_lesson_dir(ROOT / "lessons" / "transformer-scaling")
    assert lesson is not None, errors
    return [
        (
            p.id,
            f"{p.number:02d}",
            f"{p.minutes} min" + (f" · {p.optional_minutes} min more in optional depth" if p.optional_minutes else ""),
        )
        for p in lesson.parts
    ]


PARTS = _parts()
EYEBROW = {part: f"{number} · {minutes}" for part, number, minutes in PARTS}


def test_learner_journey_to_environment_report(page, live_server):
    base = live_server.url
    register(page, base, "learner@example.org", name="Lena")
    page.get_by_role("link", name="Transformer Scaling").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Transformer Scaling")
    nav = page.get_by_role("navigation", name="Lesson parts")
    for part_id, number, minutes in PARTS:
        link = nav.locator(f'a[href="/lessons/transformer-scaling/{part_id}"]')
        expect(link).to_contain_text(number)
        expect(link).to_contain_text(minutes.split(" · ")[0])
        link.click()
        expect(page).to_have_url(re.compile(f"/lessons/transformer-scaling/{part_id}$"))
        expect(page.locator(".part .eyebrow").first).to_have_text(f"{number} · {minutes}")
    # Moving between parts happened without full reloads (htmx), and survives a reload (resume).
    page.reload()
    expect(page.locator(".part .eyebrow").first).to_have_text(f"{PARTS[-1][1]} · {PARTS[-1][2]}")

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
        "author",
        "--role",
        "instructor",
        "--class",
        "default",
    )
    assert "site roles author; instructor of default" in out
    login(page, base, "prof@example.org")
    expect(page.get_by_role("link", name="Authoring")).to_be_visible()
    page.get_by_role("link", name="Authoring").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Authoring")
    expect(page.get_by_role("heading", name="Transformer Scaling")).to_be_visible()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Classes").click()
    page.locator("li[data-class='default']").get_by_role("link", name="Grading").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Grading")


def test_learner_is_refused_staff_pages(page, live_server):
    register(page, live_server.url, "nosy@example.org", name="Nosy")
    response = page.goto(live_server.url + "/instructor")
    assert response.status == 403
    expect(page.get_by_role("alert")).to_contain_text("This page is for authors")


def test_marking_a_part_done_ticks_it_and_the_toggle_follows(page, live_server):
    """The done toggle at a part's end: the pacing list ticks the part and the toggle offers to undo, without
    a reload; undoing clears both. Screenshots at laptop and phone width."""
    base = live_server.url
    register(page, base, "toggler@example.org", name="Tove")
    page.goto(base + "/lessons/transformer-scaling/orient")
    item = page.locator("#pacing li", has=page.locator('a[href="/lessons/transformer-scaling/orient"]'))
    foot = page.locator("footer.part-foot")
    expect(item.locator(".tick")).to_have_count(0)
    foot.get_by_role("button", name="Mark this part as done").click()
    expect(item.locator(".tick")).to_have_count(1)
    expect(foot.get_by_role("button", name="Mark as not done")).to_be_visible()
    expect(foot).to_contain_text("Done ✓")
    foot.scroll_into_view_if_needed()
    screenshot(page, "done-toggle-laptop")
    page.set_viewport_size({"width": 390, "height": 844})
    foot.scroll_into_view_if_needed()
    screenshot(page, "done-toggle-phone")
    foot.get_by_role("button", name="Mark as not done").click()
    expect(item.locator(".tick")).to_have_count(0)
    expect(foot.get_by_role("button", name="Mark this part as done")).to_be_visible()
    page.reload()
    expect(foot.get_by_role("button", name="Mark this part as done")).to_be_visible()


def test_back_and_forward_between_parts_bring_back_whole_pages(page, live_server):
    """Parts open through htmx (no reload) and push their address; the browser's back and forward buttons then
    bring back the whole page of that part (htmx 4 fetches it again and swaps the <body>: app/web/templates.py is_htmx),
    with its header, pacing list, rendered maths and working forms, and the answer saved meanwhile."""
    base = live_server.url
    register(page, base, "walker@example.org", name="Walt")
    page.goto(base + "/lessons/transformer-scaling/orient")
    page.evaluate("window.stillThisPage = true")  # gone if anything reloads the document
    eyebrow = page.locator(".part .eyebrow").first
    page.locator('#pacing a[href="/lessons/transformer-scaling/deep-dives"]').click()
    expect(eyebrow).to_have_text(EYEBROW["deep-dives"])
    page.locator("footer.part-foot a.next").click()
    expect(page).to_have_url(re.compile("/code-trace$"))
    expect(eyebrow).to_have_text(EYEBROW["code-trace"])

    page.go_back()
    expect(page).to_have_url(re.compile("/deep-dives$"))
    expect(eyebrow).to_have_text(EYEBROW["deep-dives"])
    expect(page.locator("header.site")).to_have_count(1)
    expect(page.locator("#pacing")).to_have_count(1)
    expect(page.locator('#pacing a[aria-current="page"]')).to_contain_text("Deep dives")
    expect(page.locator(".math-inline[data-rendered]").first).to_be_attached()  # lesson.js ran on the new body
    # a form on the page brought back still sends the CSRF header (hx-headers:inherited on the new <body>)
    pause = page.locator(".pause").first
    pause.get_by_label("Your answer").fill("The scale goes stale when the distribution moves.")
    pause.get_by_role("button", name="Save my answer and reveal the reference").click()
    expect(pause).to_contain_text("Reference")

    page.go_back()
    expect(page).to_have_url(re.compile("/orient$"))
    expect(eyebrow).to_have_text(EYEBROW["orient"])
    page.go_forward()
    expect(page).to_have_url(re.compile("/deep-dives$"))
    expect(page.locator(".pause").first).to_contain_text("The scale goes stale")  # the saved answer, from the server
    assert page.evaluate("window.stillThisPage === true")  # all of it without a reload


def test_reading_time_is_counted_with_the_pages_csrf_header(page, live_server):
    """The reading-time beat (templates/lessons/_part_foot.html) is the one htmx POST with no form around it:
    its CSRF token comes from hx-headers on <body>, which htmx 4 passes down only when it is marked :inherited."""
    base = live_server.url
    register(page, base, "reader@example.org", name="Rea")
    page.clock.install()
    page.goto(base + "/lessons/transformer-scaling/orient")
    with page.expect_response(lambda r: r.url.endswith("/progress/orient/time")) as beat:
        page.clock.run_for(21_000)
    assert beat.value.status == 204
    assert beat.value.request.headers.get("x-csrf-token")
