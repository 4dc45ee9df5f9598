"""A learner who uses only the keyboard: after an htmx swap the focus stays where they were (the button they
pressed, the part they opened, the Cancel button of a job card or a /jobs row that the page's one job-status poll
replaces) instead of falling back to the page, and a focus ring is not cut off by a box that scrolls sideways. Real
Chromium, real key presses; screenshots under test-artifacts/screenshots/keyboard-*.png: look at them."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from app.core.models import Job
from tests.browser.conftest import register, screenshot
from tests.browser.seed import Seeder
from tests.browser.test_job_status_poll import _plant_waiting

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

LESSON = "transformer-scaling"
RING = 5  # what a focus ring reaches past its element: the 3px outline at a 2px offset (static/app.css)


def _learner(browser, live_server, email, width=1280, height=900):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    page.set_default_timeout(15_000)
    register(page, live_server.url, email)
    return ctx, page


def _tab_to(page, selector: str, limit: int = 120, key: str = "Tab") -> None:
    """Press Tab until the element SELECTOR has the focus (fails after LIMIT presses)."""
    for _ in range(limit):
        page.keyboard.press(key)
        if page.evaluate("s => document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"{limit} presses of {key} never reached {selector}")


def _focused(page) -> str:
    return page.evaluate("() => document.activeElement.id || document.activeElement.tagName")


def _ring_room(page, clip_selector: str) -> dict:
    """How far the focused element sits inside its scroll box CLIP_SELECTOR on each side, in px."""
    return page.evaluate(
        """s => {
          const e = document.activeElement, box = e.closest(s), r = e.getBoundingClientRect(), b = box.getBoundingClientRect();
          const left = b.left + box.clientLeft, top = b.top + box.clientTop;
          return {left: r.left - left, right: left + box.clientWidth - r.right,
                  top: r.top - top, bottom: top + box.clientHeight - r.bottom};
        }""",
        clip_selector,
    )


def _await_live_swap(page, selector: str, change) -> None:
    """Mark the focused element, call CHANGE (which changes what the page shows of its job), then wait until the
    page's one job-status poll (GET /jobs/live, every N seconds as its #jobs-live says) has replaced SELECTOR with a
    new element, within one interval and a margin, and without any other request for a job's status (a card's own
    GET /jobs/ID)."""
    trigger = page.locator("#jobs-live").get_attribute("hx-trigger") or ""
    every = re.fullmatch(r"every (\d+)s", trigger)
    assert every, f"the page does not poll for its job in flight: #jobs-live hx-trigger={trigger!r}"
    asked: list = []

    def heard(request) -> None:
        asked.append(request)

    page.on("request", heard)
    page.evaluate("() => { document.activeElement.dataset.old = '1'; }")
    change()
    page.wait_for_function(
        "s => { const e = document.querySelector(s); return e && !e.dataset.old; }",
        arg=selector,
        timeout=(int(every[1]) + 5) * 1000,
    )
    page.remove_listener("request", heard)
    paths = [urlparse(r.url).path for r in asked]
    assert "/jobs/live" in paths and not [p for p in paths if re.fullmatch(r"/jobs/\d+", p)], paths


def _say(s: Seeder, job_id: int, message: str) -> Callable[[], None]:
    """A change to the waiting run that its card and its /jobs row show (the queue's word for why it waits)."""

    def change() -> None:
        with s.sessions() as db:
            job = db.get(Job, job_id)
            assert job is not None and job.status == "queued"
            job.message = message
            db.commit()

    return change


def test_answers_and_the_done_toggle_keep_the_focus_and_name_their_feedback(browser, live_server):
    ctx, page = _learner(browser, live_server, "kb-answers@example.org")
    page.goto(f"{live_server.url}/lessons/{LESSON}/practice")
    _tab_to(page, "#q-wide-layer-axis-A")
    page.keyboard.press("ArrowDown")  # B: a smaller batch (wrong)
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    feedback = page.locator("#q-wide-layer-axis .feedback")
    expect(feedback).to_contain_text("Not yet")
    # the new Check button has the focus, and names the feedback, so a screen reader reads it out there
    assert _focused(page) == "q-wide-layer-axis-submit"
    assert (
        page.evaluate("() => document.activeElement.getAttribute('aria-describedby')") == "q-wide-layer-axis-feedback"
    )
    assert feedback.get_attribute("id") == "q-wide-layer-axis-feedback"
    screenshot(page, "keyboard-feedback-laptop", full_page=False)
    page.keyboard.press("Shift+Tab")  # back to the chosen option, then the right one, and Enter submits again
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    expect(feedback).to_contain_text("Correct")
    assert _focused(page) == "q-wide-layer-axis-A"

    # a written answer: the Save button keeps the focus and names the reference answer it revealed
    _tab_to(page, "#q-format-roles-answer")
    page.keyboard.type("E4M3 forward, E5M2 for gradients.")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.locator("#q-format-roles .reference")).to_be_visible()
    assert _focused(page) == "q-format-roles-submit"
    assert page.evaluate("() => document.activeElement.getAttribute('aria-describedby')") == "q-format-roles-reference"

    # the done toggle is swapped out of band: the new one has the focus, whichever way it was pressed
    _tab_to(page, ".done-form button")
    page.keyboard.press("Enter")
    expect(page.locator(".done-form button")).to_have_text("Mark as not done")
    assert _focused(page) == "done-toggle"
    page.keyboard.press("Enter")
    expect(page.locator(".done-form button")).to_have_text("Mark this part as done")
    assert _focused(page) == "done-toggle"

    # a worked problem's step (another lesson): the step's Check button keeps the focus
    page.goto(f"{live_server.url}/lessons/planning-at-scale/plan")
    _tab_to(page, "#q-plan-7b-first-move-A")
    page.keyboard.press("Space")  # Tab into a radio group only focuses its first option
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.locator("#q-plan-7b-first-move .feedback")).to_be_visible()
    assert _focused(page) == "q-plan-7b-first-move-submit"
    ctx.close()


@pytest.mark.parametrize(("width", "height", "name"), [(1280, 900, "laptop"), (390, 844, "phone390")])
def test_opening_a_part_moves_the_focus_to_its_heading(browser, live_server, width, height, name):
    ctx, page = _learner(browser, live_server, f"kb-parts-{name}@example.org", width, height)
    page.goto(f"{live_server.url}/lessons/{LESSON}/orient")
    _tab_to(page, ".pacing a[href$='/deep-dives']")
    if name == "phone390":  # the chip strip scrolls sideways: the focused chip's whole ring is inside it
        room = _ring_room(page, ".pacing ol")
        assert min(room.values()) >= RING, room
        screenshot(page, "keyboard-pacing-chip-phone390", full_page=False)
    page.keyboard.press("Enter")
    heading = page.locator(".part-wrap h2")
    expect(heading).to_have_text("Concept deep dives")
    expect(heading).to_be_focused()  # read out by a screen reader; the next Tab goes into the part
    screenshot(page, f"keyboard-part-heading-{name}", full_page=False)
    page.keyboard.press("Tab")
    assert page.evaluate("() => !!document.activeElement.closest('.part-wrap')")
    # a pause's answer: its Save button keeps the focus and names the reference answer it revealed
    pause = page.locator(".pause").first
    pause_id = pause.get_attribute("id")
    _tab_to(page, f"#{pause_id} textarea")
    page.keyboard.type("The scale moves the values into range.")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.locator(f"#{pause_id} .reference")).to_be_visible()
    assert _focused(page) == f"{pause_id}-submit"
    assert page.evaluate("() => document.activeElement.getAttribute('aria-describedby')") == f"{pause_id}-reference"
    # the "next part" link at the foot does the same
    _tab_to(page, ".part-foot a.next")
    page.keyboard.press("Enter")
    expect(heading).to_have_text("Put it back into code")
    expect(heading).to_be_focused()
    ctx.close()


def test_a_polling_job_card_and_the_jobs_list_keep_the_focus(browser, live_server):
    """A run waiting in a queue no worker of this server takes stays in flight, next in its line, so the page polls
    at its shortest interval; each change the test makes to it comes back through the poll as a new card (or, on
    /jobs, a new list), and the focus must stay on its Cancel button."""
    ctx, page = _learner(browser, live_server, "kb-jobs@example.org")
    s = Seeder(live_server.data)
    job_id = _plant_waiting(s, s.user("kb-jobs@example.org"))
    page.goto(f"{live_server.url}/labs/env-check")
    card = page.locator(f"#job-list #job-{job_id}")
    expect(card).to_have_attribute("data-status", "queued")
    _tab_to(page, "#job-list form button", limit=60)
    _await_live_swap(page, "#job-list form button", _say(s, job_id, "waiting for a lab host"))
    expect(card).to_contain_text("Queued: waiting for a lab host.")
    assert _focused(page) == f"job-{job_id}-cancel"

    page.goto(f"{live_server.url}/jobs")  # the poll says "jobs-changed" and the list asks for itself again
    _tab_to(page, f"tr[data-job='{job_id}'] button", limit=40)
    _await_live_swap(page, f"tr[data-job='{job_id}'] button", _say(s, job_id, "waiting for a lab host with room"))
    assert _focused(page) == f"jobs-{job_id}-cancel"
    page.keyboard.press("Enter")  # cancel it by keyboard
    expect(page.locator(f"tr[data-job='{job_id}']")).to_have_attribute("data-status", "cancelled")
    s.close()

    # on a phone a run's link starts its row inside a box that scrolls sideways: its ring is not cut off
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/jobs")
    _tab_to(page, f"tr[data-job='{job_id}'] a", limit=40)
    room = _ring_room(page, ".table-wrap")
    assert room["left"] >= RING, room
    screenshot(page, "keyboard-jobs-phone390", full_page=False)
    ctx.close()
