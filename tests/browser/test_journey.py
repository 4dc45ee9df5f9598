"""The newcomer's journey in real Chromium against a real server with its embedded worker."""

import re
import sqlite3
import time

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


def _seconds_read(live_server, email: str, part: str) -> int:
    with sqlite3.connect(live_server.data / "course.db") as conn:
        row = conn.execute(
            "SELECT seconds_spent FROM part_progress JOIN users ON users.id = part_progress.user_id"
            " WHERE users.email = ? AND part_id = ?",
            (email, part),
        ).fetchone()
    return row[0] if row else 0


def test_reading_time_is_reported_once_a_minute_with_the_pages_token(page, live_server):
    """static/reading.js counts the seconds a part is on screen and reports them at most once a minute, by
    navigator.sendBeacon: a form body carrying the page's CSRF token (a beacon cannot set a header). A part left
    for another (htmx swaps it) hands in its time at once."""
    base = live_server.url
    register(page, base, "reader@example.org", name="Rea")
    page.clock.install()
    page.goto(base + "/lessons/transformer-scaling/orient")
    sent: list = []
    page.on("request", lambda r: sent.append(r) if "/progress/" in r.url and r.url.endswith("/time") else None)
    page.clock.run_for(45_000)
    assert sent == []  # nothing before the minute
    with page.expect_response(lambda r: r.url.endswith("/progress/orient/time")) as beat:
        page.clock.run_for(16_000)
    assert beat.value.status == 204
    request = beat.value.request
    assert "csrf_token=" in (request.post_data or "") and "seconds=60" in (request.post_data or "")
    assert not request.headers.get("x-csrf-token")
    page.clock.run_for(7_000)
    with page.expect_response(lambda r: r.url.endswith("/progress/orient/time")) as left:
        page.locator("a.next").first.click()  # the next part, swapped in by htmx
    handed_in = int(re.search(r"seconds=(\d+)", left.value.request.post_data or "").group(1))
    assert left.value.status == 204 and 7 <= handed_in <= 12  # the 7 s, and what passed meanwhile in real time
    expect(page).not_to_have_url(re.compile("/orient$"))


def test_reading_time_survives_closing_the_tab_mid_minute(browser, live_server):
    """Closed 4 s into a part (real time: the server credits no more than the wall time it saw): those seconds
    arrive all the same, sent by the page as it goes."""
    ctx = browser.new_context()
    page = ctx.new_page()
    email = "closer@example.org"
    register(page, live_server.url, email, name="Clo")
    page.goto(live_server.url + "/lessons/transformer-scaling/mental-model")
    page.wait_for_timeout(4_000)
    assert _seconds_read(live_server, email, "mental-model") == 0  # nothing reported mid-minute yet
    page.close()
    deadline = time.monotonic() + 10
    while _seconds_read(live_server, email, "mental-model") == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert 3 <= _seconds_read(live_server, email, "mental-model") <= 6
    ctx.close()
