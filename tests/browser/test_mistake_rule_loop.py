"""An instructor finishes a known-mistake rule from the question statistics, in real Chromium at 1280x800 and
390x844: the statistics list a frequent wrong answer no rule explains, "Draft a rule" opens the question in the
editor with the rule in place and its one gap (the feedback) pointed at, the instructor writes it, the preview
validates it, publishing takes it, and a learner's wrong answer is told which idea went wrong.

Each width works on a lesson of its own, made from lessons/_template and taken away at the end (its fixed numeric
question: 8 bits, answered 32, four times the answer, FP32's width). Screenshots: test-artifacts/screenshots/
rule-*.png."""

from __future__ import annotations

import pytest
import yaml
from playwright.sync_api import expect

from app.core.models import User
from app.services.learning import answering
from app.services.learning import lessons as lesson_service
from app.services.learning import progress as learning
from tests.browser import made_lessons
from tests.browser.conftest import SIZES, screenshot
from tests.browser.seed import Seeder
from tests.conftest import ROOT

pytestmark = pytest.mark.browser

INSTRUCTOR = "rule-author@example.org"
QID = "example-fixed-numeric"
FEEDBACK = "That is FP32's width, four bytes. FP8 stores each number in one byte: 8 bits."
LESSONS = {"laptop": ("rules-laptop", 87), "phone": ("rules-phone", 88)}
TEMPLATE = (ROOT / "lessons" / "_template" / "questions" / f"{QID}.yaml").read_text()
KNOWN = len(yaml.safe_load(TEMPLATE)["mistakes"])  # the template's own rules: the drafted one comes after them


def _learner(s: Seeder, email: str) -> int:
    return s.user(email, name=email.split("@")[0].title())


def _answers_32(s: Seeder, uid: int, lesson_id: str) -> None:
    with s.sessions() as db:
        user = db.get(User, uid)
        current = lesson_service.current(db, lesson_id=lesson_id)
        done = answering.answer_question(
            db,
            user=user,
            lesson=current.lesson,
            current_version=current.version,
            question_id=QID,
            version=current.version,
            answer="32",
            seed=learning.variant_seed(uid, QID),
        )
        assert done.error is None and done.feedback.status == "incorrect", done


@pytest.fixture(scope="module")
def lessons(live_server):
    s = Seeder(live_server.data)
    s.user(INSTRUCTOR, roles=("instructor",), name="Rhoda")
    for size, (lesson_id, number) in LESSONS.items():
        made_lessons.publish(s, lesson_id, f"Rules on a {size}", number)
        for n in (1, 2):  # two learners give the same wrong answer: a pattern worth a rule
            _answers_32(s, _learner(s, f"rule-{size}-{n}@example.org"), lesson_id)
    yield LESSONS
    made_lessons.remove(s, *(lid for lid, _ in LESSONS.values()))
    s.close()


@pytest.mark.parametrize("size", list(SIZES))
def test_a_rule_drafted_from_the_statistics_is_written_validated_published_and_graded(
    live_server, lessons, open_page, size
):
    lesson_id = lessons[size][0]
    base, width = live_server.url, SIZES[size][0]
    pg = open_page(size, INSTRUCTOR)
    pg.goto(f"{base}/classes/default/questions?lesson={lesson_id}")
    row = pg.locator(f"tr[data-question='{QID}']")
    wrong = row.get_by_test_id("wrong-answers")
    expect(wrong).to_contain_text("32 bits (4× the answer)")
    expect(wrong).to_contain_text("no rule")
    screenshot(pg, f"rule-statistics-{size}")
    row.get_by_test_id("draft-rule").first.click()

    # the editor: the rule in the schema's own format, its empty feedback the one problem, at its line
    pg.wait_for_url(f"**/instructor/lessons/{lesson_id}/edit?file=questions/{QID}.yaml**")
    text = pg.locator("#text").input_value()
    assert text.startswith(TEMPLATE.rstrip("\n") + "\n  # Drafted from the class's question statistics"), text
    assert text.endswith('  - value: 32\n    feedback: ""\n'), text  # after the template's own rules, all kept
    expect(pg.get_by_test_id("drafted-rule")).to_contain_text("answers 4× the right one")
    preview = pg.locator("#preview")
    expect(preview).to_contain_text("1 problem")
    expect(preview.locator("ul.errors li").first).to_contain_text(
        f"mistakes[{KNOWN}].feedback: expected the words a learner"
    )
    editor = pg.locator(".cm-editor")
    expect(editor.locator(".cm-error-line")).to_have_count(1)
    expect(editor.locator(".cm-error-line")).to_contain_text('feedback: ""')
    screenshot(pg, f"rule-drafted-{size}")

    # the instructor writes the feedback where the editor points; the preview validates it
    expect(pg.get_by_test_id("drafted-rule")).to_contain_text("between the quotes on line")
    editor.locator(".cm-error-line").click()
    pg.keyboard.press("End")
    pg.keyboard.press("ArrowLeft")  # between the quotes: any text is valid YAML there, a colon included
    pg.keyboard.insert_text(FEEDBACK)
    expect(preview.locator("p.ok")).to_contain_text("Valid.", timeout=10_000)
    expect(editor.locator(".cm-error-line")).to_have_count(0)
    preview.scroll_into_view_if_needed()
    screenshot(pg, f"rule-validated-{size}", full_page=False)
    pg.get_by_label("Note for the version history (optional)").fill("Named the FP32 mistake")
    pg.get_by_test_id("publish").click()
    expect(pg.locator("#published")).to_contain_text("Published version 2")
    box = pg.locator("#published").bounding_box()
    assert box and box["x"] + box["width"] <= width, box

    # the statistics now count that answer as explained
    pg.goto(f"{base}/classes/default/questions?lesson={lesson_id}")
    expect(pg.locator(f"tr[data-question='{QID}']").get_by_test_id("wrong-answers")).to_contain_text("rule explains it")

    # a learner's wrong answer is told which idea went wrong (and still counts as a try)
    learner = open_page(size, f"rule-{size}-1@example.org")
    learner.goto(f"{base}/lessons/{lesson_id}/first-part")
    card = learner.locator(f"#q-{QID}")
    card.locator(f"#q-{QID}-answer").fill("32")
    card.get_by_role("button", name="Check").click()
    feedback = card.locator(f"#q-{QID}-feedback")
    expect(feedback).to_contain_text(FEEDBACK)
    expect(feedback).not_to_contain_text("accepted range")
    fb = feedback.bounding_box()
    assert fb and fb["x"] >= 0 and fb["x"] + fb["width"] <= width, fb
    card.scroll_into_view_if_needed()
    screenshot(learner, f"rule-learner-feedback-{size}", full_page=False)
