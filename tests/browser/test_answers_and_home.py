"""A written practice answer stays on screen after saving, every kind of answer refuses an empty one the same
way, and the home page says Resume once the learner has done anything in a lesson. Real Chromium at laptop
and phone widths; screenshots under test-artifacts/screenshots/answers-*.png: look at them."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.content.loader import load_lesson_dir
from tests.browser.conftest import register, screenshot
from tests.browser.test_lesson_quality import serious_violations
from tests.conftest import ROOT

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

LESSON = "transformer-scaling"
WIDTHS = [(1280, 900, "laptop"), (390, 844, "phone390")]


def _learner(browser, live_server, width, height, email):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    page.set_default_timeout(15_000)
    register(page, live_server.url, email)
    return ctx, page


@pytest.mark.parametrize(("width", "height", "name"), WIDTHS)
def test_a_saved_written_answer_stays_beside_the_reference(browser, live_server, width, height, name):
    ctx, page = _learner(browser, live_server, width, height, f"written-{name}@example.org")
    page.goto(f"{live_server.url}/lessons/{LESSON}/practice")
    q = page.locator("#q-format-roles")
    text = "E4M3 for weights and activations (more precision),\nE5M2 for gradients (more range)."
    q.get_by_label("Your answer").fill(text)
    q.get_by_role("button", name="Save and reveal the reference answer").click()
    q = page.locator("#q-format-roles")
    expect(q.locator(".your-answer")).to_contain_text("Your answer (saved")
    expect(q.locator(".your-answer blockquote")).to_have_text(text)
    expect(q.locator(".reference")).to_contain_text("Reference answer")
    expect(q.locator(".status")).to_have_text("answer saved")
    expect(q.get_by_role("button", name="Save a new answer")).to_be_visible()
    expect(q.get_by_label("Revise your answer")).to_have_value("")
    answer_box, reference = q.locator(".your-answer").bounding_box(), q.locator(".reference").bounding_box()
    assert answer_box and reference and answer_box["y"] < reference["y"]  # the learner's answer, then the reference
    q.locator("#selfcheck-format-roles").get_by_role("checkbox").first.check()  # the self-check is right there
    q.get_by_role("button", name="Save my self-check").click()
    expect(page.locator("#selfcheck-format-roles [role=status]")).to_contain_text("1 of")
    q.scroll_into_view_if_needed()
    page.locator("#q-format-roles").screenshot(path=str(screenshot_path(f"answers-written-saved-{name}")))
    shown_after_save = page.locator("#q-format-roles").inner_text()
    page.reload()
    expect(page.locator("#q-format-roles .your-answer blockquote")).to_have_text(text)
    assert page.locator("#q-format-roles").inner_text() == shown_after_save  # the same piece after a reload
    assert serious_violations(page) == []
    ctx.close()


def screenshot_path(name: str):
    from tests.browser.conftest import SHOTS

    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS / f"{name}.png"


def _check_error_under_field(page, piece, field, button):
    """The alert sits between the field and the button, the field is aria-invalid and described by it, and the
    message starts with a capital letter."""
    alert = piece.get_by_role("alert")
    expect(alert).to_be_visible()
    error_id = alert.get_attribute("id")
    assert error_id and error_id in (field.get_attribute("aria-describedby") or "").split()
    message = alert.inner_text().strip()
    assert message[0].isupper() and message.endswith("."), message
    f, a, b = field.bounding_box(), alert.bounding_box(), button.bounding_box()
    assert f and a and b and f["y"] + f["height"] <= a["y"] + 1 and a["y"] + a["height"] <= b["y"] + 1, (f, a, b)
    return message


@pytest.mark.parametrize(("width", "height", "name"), WIDTHS)
def test_an_empty_answer_is_refused_under_its_field_on_every_kind(browser, live_server, width, height, name):
    ctx, page = _learner(browser, live_server, width, height, f"empty-{name}@example.org")
    base = live_server.url
    page.goto(f"{base}/lessons/{LESSON}/deep-dives")
    pause = page.locator("#pause-fixed-scale")
    pause.get_by_role("button", name="Save my answer and reveal the reference").click()
    pause = page.locator("#pause-fixed-scale")
    field = pause.get_by_label("Your answer")
    expect(field).to_have_attribute("aria-invalid", "true")
    said = _check_error_under_field(page, pause, field, pause.get_by_role("button"))
    assert said.startswith("Write an answer first")

    page.goto(f"{base}/lessons/{LESSON}/practice")
    for qid, button, says in [
        ("wide-layer-axis", "Check", "Pick one of the options"),
        ("format-roles", "Save and reveal the reference answer", "Write an answer first"),
        ("fp8-step-time", "Check", "Type a number first"),
    ]:
        page.locator(f"#q-{qid}").get_by_role("button", name=button).click()
        q = page.locator(f"#q-{qid}")
        expect(q.get_by_role("alert")).to_be_visible()
        if qid == "wide-layer-axis":
            field = q.locator("fieldset")
            for radio in q.get_by_role("radio").all():
                expect(radio).to_have_attribute("aria-invalid", "true")
        else:
            field = q.locator("[name=answer]")
            expect(field).to_have_attribute("aria-invalid", "true")
        assert _check_error_under_field(page, q, field, q.get_by_role("button", name=button)).startswith(says)
    page.locator("#q-wide-layer-axis").scroll_into_view_if_needed()
    screenshot(page, f"answers-empty-errors-{name}")
    assert serious_violations(page) == []

    page.goto(f"{base}/lessons/planning-at-scale/plan")
    step = page.locator("#q-tp8-zero1-70b-third-option")
    step.get_by_role("button", name=re.compile("Check step")).click()
    step = page.locator("#q-tp8-zero1-70b-third-option")
    said = _check_error_under_field(page, step, step.locator("fieldset"), step.get_by_role("button"))
    assert said.startswith("Pick one of the options")
    step = page.locator("#q-tp8-zero1-70b-total-state")
    step.get_by_role("button", name="Check step 1").click()
    step = page.locator("#q-tp8-zero1-70b-total-state")
    field = step.get_by_label("Your answer")
    expect(field).to_have_attribute("aria-invalid", "true")
    assert _check_error_under_field(page, step, field, step.get_by_role("button")).startswith("Type a number first")
    step.scroll_into_view_if_needed()
    screenshot(page, f"answers-step-error-{name}", full_page=False)
    ctx.close()


@pytest.mark.parametrize(("width", "height", "name"), WIDTHS)
def test_home_says_resume_once_the_learner_answered_something(browser, live_server, width, height, name):
    ctx, page = _learner(browser, live_server, width, height, f"home-{name}@example.org")
    base = live_server.url
    card = page.locator(".lesson-card", has=page.locator(f'a[href="/lessons/{LESSON}"]'))
    expect(card.locator("a.button")).to_have_text("Start")
    expect(card).not_to_contain_text("spent")
    page.goto(f"{base}/lessons/{LESSON}/practice")
    q = page.locator("#q-wide-layer-axis")
    q.get_by_label("A.", exact=False).check()
    q.get_by_role("button", name="Check").click()
    expect(page.locator("#q-wide-layer-axis .feedback")).to_be_visible()
    page.goto(base + "/")
    card = page.locator(".lesson-card", has=page.locator(f'a[href="/lessons/{LESSON}"]'))
    expect(card.locator("a.button")).to_have_text("Resume")
    expect(card.locator("a.button")).to_have_attribute("href", f"/lessons/{LESSON}/practice")
    expect(card).not_to_contain_text("0 min spent")
    lesson, _ = load_lesson_dir(ROOT / "lessons" / LESSON)
    expect(card).to_contain_text(f"1 of {len(lesson.questions)} questions answered")
    screenshot(page, f"answers-home-resume-{name}")
    ctx.close()
