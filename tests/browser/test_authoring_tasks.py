"""An instructor's whole authoring tasks in the browser editor, in real Chromium at 1280x800 and 390x844: fix a typo
and publish it with a note (then reload the page), make a mistake and see publishing refused with the text and the
note kept, add a new question (which needs its file and a part that lists it, in one version), answer it as a
learner, and restore the version from before. Screenshots under test-artifacts/screenshots/authoring-*.png: look at
them.

It edits planning-at-scale (the lesson test_lesson_updated_browser.py publishes to) and restores it at the end, with
the editor's own "restore" button, so every later browser test reads the lesson's shipped text (a fallback puts the
files back if this test fails half-way)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.services.learning import lessons as lesson_service
from app.services.learning import publishing
from tests.browser.conftest import login, register, screenshot
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

LESSON = "planning-at-scale"
PART = "parts/inference.yaml"
AUTHOR = "tasks-author@example.org"
TYPO, FIXED = "a different bottleneck", "another bottleneck"
QUESTION = """kind: numeric
prompt: How many bits does one FP8 number take in memory?
answer: 8
unit: bits
tolerance: {abs: 0}
"""

MID_PART = """number: 2
title: Size it first
heading: Count before you shard
minutes: 3
blocks:
  - kind: section
    id: size-first
    title: One line of arithmetic
    body: Parameters times bytes per parameter, before anything else.
"""


def _type(page, text: str) -> None:
    """Replace the editor's text the way an author does: select all, type (CodeMirror over the textarea)."""
    page.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(text)


def _editor(page, base: str, path: str = PART):
    page.goto(f"{base}/instructor/lessons/{LESSON}/edit?file={path}")
    expect(page.locator(".cm-content")).to_be_visible()


def test_an_instructors_authoring_tasks_end_to_end(browser, live_server):
    base = live_server.url
    seeder = Seeder(live_server.data)
    seeder.user(AUTHOR, roles=("learner", "instructor"), name="Tess")
    with seeder.sessions() as db:
        original = lesson_service.latest_row(db, lesson_id=LESSON)
        start, files = original.version, dict(original.files)
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    page.set_default_timeout(15_000)
    learner = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    learner.set_default_timeout(15_000)
    try:
        login(page, base, AUTHOR)
        register(learner, base, "tasks-learner@example.org")

        # 1. a typo fixed and published with a note; the page after it reloads without posting again
        _editor(page, base)
        _type(page, files[PART].replace(TYPO, FIXED))
        expect(page.locator("#preview p.ok")).to_contain_text("Valid. Preview of part 5")
        page.get_by_label("Note for the version history (optional)").fill("Serving: wording")
        page.get_by_role("button", name="Validate and publish a new version").click()
        expect(page.locator("#published")).to_contain_text(f"Published version {start + 1}")
        assert page.url.endswith(f"published={start + 1}#published")  # the editor's address, not the POST's
        page.reload()  # was a resent form, refused as a conflict with the version it had just published
        expect(page.locator("#published")).to_contain_text(f"Published version {start + 1}")
        expect(page.locator("#preview")).not_to_contain_text("after you started editing")
        expect(page.locator(f"#v{start + 1}")).to_contain_text("Serving: wording")
        screenshot(page, "authoring-published-laptop")
        learner.goto(f"{base}/lessons/{LESSON}/inference")
        expect(learner.locator("#part-inference")).to_contain_text(FIXED)

        # 2. a word where a number goes: the message says what to type; publishing keeps the text and the note
        _editor(page, base)
        assert files[PART].startswith("number: 5\n")
        _type(page, files[PART].replace("number: 5\n", "number: five\n", 1))
        problem = page.locator("#preview ul.errors li").first
        expect(problem).to_contain_text(f"{LESSON}/{PART}:1 number: expected a whole number (integer) such as 5")
        expect(problem).not_to_contain_text("unable to parse")
        page.get_by_label("Note for the version history (optional)").fill("Serving: part five")
        page.get_by_role("button", name="Validate and publish a new version").click()
        expect(page.locator("#preview")).to_contain_text("nothing is published until it is fixed")
        assert "number: five" in page.locator("textarea#text").input_value()
        expect(page.get_by_label("Note for the version history (optional)")).to_have_value("Serving: part five")

        # leaving with unpublished edits asks first (a file link would have dropped them without a word)
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.type), d.dismiss() if len(dialogs) == 1 else d.accept()))
        with page.expect_event("dialog"):
            page.get_by_role("link", name="parts/moe.yaml").click()
        assert dialogs == ["beforeunload"] and "/publish" in page.url  # dismissed: still here, text and all

        # 3. a new question: its own file, listed in the part picked, previewed there, published in one version
        _editor(page, base)
        page.get_by_label("File (an existing one").fill("questions/fp8-bits.yaml")
        expect(page.locator("label[for=text]")).to_have_text("YAML of questions/fp8-bits.yaml")
        expect(page.locator("#publish-options")).to_contain_text("New question fp8-bits.")
        _type(page, QUESTION)
        expect(page.locator("#preview p.ok")).to_contain_text("with the new question listed in it")
        page.locator("#list_in").select_option(PART)
        expect(page.locator("#preview p.ok")).to_contain_text(
            f"Preview of part 5 with the new question listed in it ({PART})"
        )
        expect(page.locator("#preview .preview-frame")).to_contain_text("How many bits does one FP8 number take")
        screenshot(page, "authoring-new-question-laptop")
        page.get_by_label("Note for the version history (optional)").fill("New question: FP8 bits")
        page.get_by_role("button", name="Validate and publish a new version").click()
        expect(page.locator("#published")).to_contain_text(f"Published version {start + 2}")
        expect(page.locator("#published")).to_contain_text(f"The new question is listed in {PART}")

        learner.goto(f"{base}/lessons/{LESSON}/inference")
        card = learner.locator("#q-fp8-bits")
        card.get_by_label(re.compile("Your answer")).fill("8")
        card.get_by_role("button", name="Check").click()
        expect(card).to_contain_text("Correct")
        card.scroll_into_view_if_needed()
        screenshot(learner, "authoring-new-question-answered-phone390", full_page=False)

        # the new-question panel on a phone: inside the screen, nothing cut off
        phone = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
        phone.set_default_timeout(15_000)
        login(phone, base, AUTHOR)
        _editor(phone, base)
        phone.get_by_label("File (an existing one").fill("questions/another-one.yaml")
        picker = phone.locator("#list_in")
        expect(picker).to_be_visible()
        box = picker.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
        # the choice comes before the Publish button, not after it with the preview (the form comes first on a phone)
        publish = phone.get_by_role("button", name="Validate and publish a new version").bounding_box()
        assert publish and box["y"] + box["height"] <= publish["y"], (box, publish)
        picker.focus()  # a keyboard user changes the part: the picker the preview swaps in keeps the focus
        with phone.expect_response("**/preview"):
            picker.select_option(index=1)
        expect(picker).to_have_value(re.compile(r"^parts/"))
        expect(picker).to_be_focused()
        picker.scroll_into_view_if_needed()
        screenshot(phone, "authoring-new-question-phone390", full_page=False)
        phone.context.close()

        # taking it out of the part again: the preview offers to remove its file too (the editor deletes no file)
        _editor(page, base)
        _type(page, page.locator("textarea#text").input_value().replace(", fp8-bits]", "]"))
        expect(page.locator("#publish-options")).to_contain_text("No part lists questions/fp8-bits.yaml any more.")
        expect(page.locator("#preview")).to_contain_text("nothing is published")
        page.get_by_label("Remove it from the lesson in this version").check()
        expect(page.locator("#preview p.ok")).to_contain_text("Valid. Preview of part 5")
        screenshot(page, "authoring-remove-question-laptop", full_page=False)

        # a new part in the middle: its number is taken, and ticking "Make room" moves the later parts up
        _editor(page, base)
        page.get_by_label("File (an existing one").fill("parts/sizing-first.yaml")
        _type(page, MID_PART)
        expect(page.locator("#preview")).to_contain_text("nothing is published")
        expect(page.locator("#publish-options")).to_contain_text("Number 2 is taken by parts/memory-anatomy.yaml")
        page.get_by_label(re.compile("Make room: renumber parts 2–6 to 3–7")).check()
        expect(page.locator("#preview p.ok")).to_contain_text("Valid. Preview of part 2")
        expect(page.get_by_label(re.compile("Make room"))).to_be_checked()
        screenshot(page, "authoring-make-room-laptop", full_page=False)

        # 4. back to the version before: restored as a new version, the question gone from the learner's page
        _editor(page, base)
        page.get_by_role("button", name=f"restore v{start} as a new version").click()
        expect(page.get_by_test_id("restore-confirm")).to_contain_text("This publishes to every learner")
        page.get_by_role("button", name=f"Restore version {start} for every learner").click()
        expect(page.locator("#published")).to_contain_text(f"Published version {start + 3}")
        expect(page.locator(f"#v{start + 3}")).to_contain_text(f"Restored version {start}")
        screenshot(page, "authoring-restored-laptop")
        learner.goto(f"{base}/lessons/{LESSON}/inference")
        expect(learner.locator("#part-inference")).to_contain_text(TYPO)
        expect(learner.locator("#q-fp8-bits")).to_have_count(0)
    finally:
        ctx.close()
        learner.context.close()
        with seeder.sessions() as db:  # whatever happened above, later tests read the shipped lesson
            if lesson_service.latest_row(db, lesson_id=LESSON).files != files:
                publishing.publish(db, lesson_id=LESSON, files=files, source="editor", note="restored by a test")
        seeder.close()
