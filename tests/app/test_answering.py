"""Answering a lesson without HTTP (app/services/learning/answering.py): which answers are taken and recorded, which are
refused and why, the learner's own variant, and what the lesson does not have."""

from __future__ import annotations

import pytest

from app.content import make_variant
from app.core.models import Attempt, Response
from app.services.errors import NotFound
from app.services.learning import answering
from app.services.learning import lessons as lesson_service
from app.services.learning import progress as learning

PLAN = "planning-at-scale"
PRECISION = "precision-by-numbers"


@pytest.fixture
def ann(client, make_user):
    """A learner, with the app started (which publishes the lessons)."""
    return make_user("ann@example.org")


def _current(db, lesson_id: str):
    lesson, version, _ = lesson_service.current(db, lesson_id=lesson_id)
    return lesson, version


def test_a_variant_is_drawn_once_per_question_and_seed_and_the_store_is_bounded(ann, db):
    lesson, _ = _current(db, PRECISION)
    q = lesson.questions["pipeline-bubble"]
    cache = answering.VariantCache(limit=2)
    first = cache.get(q, 1)
    assert cache.get(q, 1) is first  # kept, not drawn again
    assert first.answer == make_variant(q, 1).answer  # and what a fresh draw gives
    assert cache.get(q, 2).params != first.params and len(cache) == 2
    cache.get(q, 3)  # full: emptied, then the new one kept
    assert len(cache) == 1 and cache.get(q, 1) is not first
    # the learner's own: from their seed, the same object on every page, none for a question without numbers
    mine = answering.variant(lesson, user=ann, question_id="pipeline-bubble")
    assert mine is not None and mine.seed == learning.variant_seed(ann.id, "pipeline-bubble")
    assert answering.variant(lesson, user=ann, question_id="pipeline-bubble") is mine
    plan, _ = _current(db, PLAN)
    assert answering.variant(plan, user=ann, question_id="defend-plan") is None


def test_only_a_real_try_at_the_learners_own_variant_under_the_current_version_is_recorded(ann, db):
    lesson, version = _current(db, PRECISION)
    seed = learning.variant_seed(ann.id, "pipeline-bubble")
    right = answering.variant(lesson, user=ann, question_id="pipeline-bubble").answer

    def answer(text: str, *, given_under: int = version, with_seed: int = seed) -> answering.Answered:
        return answering.answer_question(
            db,
            user=ann,
            lesson=lesson,
            current_version=version,
            question_id="pipeline-bubble",
            version=given_under,
            answer=text,
            seed=with_seed,
        )

    refused = [
        answer(f"{right:.2f}", given_under=version - 1),  # the lesson changed since the page was opened
        answer(f"{right:.2f}", with_seed=seed + 1),  # another learner's numbers
        answer("a lot"),  # malformed
        answer(f"{right / 100:.4f}"),  # a fraction for a percentage: a hint, not a try
    ]
    assert [a.feedback for a in refused] == [None] * 4
    assert "updated to version" in refused[0].error and refused[1].error == answering.OTHER_VARIANT
    assert "As a percentage?" in refused[3].error
    assert all(a.variant is not None and a.variant.seed == seed for a in refused)  # the page shows theirs again
    assert db.query(Attempt).count() == 0
    taken = answer(f"{right:.2f}")
    assert taken.error is None and taken.feedback.status == "correct"
    (attempt,) = db.query(Attempt).all()
    assert (attempt.question_id, attempt.variant_seed, attempt.lesson_version, attempt.status) == (
        "pipeline-bubble",
        seed,
        version,
        "correct",
    )


def test_a_written_answer_is_kept_as_a_response_and_an_attempt_unless_too_long(ann, db):
    lesson, version = _current(db, PLAN)

    def answer(text: str) -> answering.Answered:
        return answering.answer_question(
            db,
            user=ann,
            lesson=lesson,
            current_version=version,
            question_id="defend-plan",
            version=version,
            answer=text,
            seed=-1,  # no variant: the seed a written answer's form sends is not looked at
        )

    long = answer("x" * (learning.MAX_ANSWER_CHARS + 1))
    assert long.feedback is None and f"under {learning.MAX_ANSWER_CHARS} characters" in long.error
    assert db.query(Response).count() == 0 and db.query(Attempt).count() == 0
    taken = answer("Shard in the node, replicate across nodes.")
    assert taken.error is None and taken.feedback is not None
    (saved,) = db.query(Response).all()
    assert (saved.kind, saved.item_id, saved.text) == (
        "free_response",
        "defend-plan",
        "Shard in the node, replicate across nodes.",
    )
    assert [a.question_id for a in db.query(Attempt)] == ["defend-plan"]


def test_a_step_is_recorded_as_a_try_and_a_stale_or_malformed_one_is_not(ann, db):
    lesson, version = _current(db, PLAN)

    def step(text: str, given_under: int = version) -> answering.Answered:
        return answering.answer_step(
            db,
            user=ann,
            lesson=lesson,
            current_version=version,
            question_id="tp8-zero1-70b",
            step_id="total-state",
            version=given_under,
            answer=text,
        )

    assert "updated to version" in step("1120 GB", given_under=version + 1).error
    assert "is not a number" in step("a lot").error
    assert db.query(Attempt).count() == 0
    assert step("112 GB").feedback.status == "incorrect"
    assert step("1120 GB").feedback.status == "correct"
    assert [(a.question_id, a.status) for a in db.query(Attempt).order_by(Attempt.id)] == [
        ("tp8-zero1-70b:total-state", "incorrect"),
        ("tp8-zero1-70b:total-state", "correct"),
    ]  # one step of six right: the problem itself is not recorded yet


def test_a_pause_answer_and_a_self_check(ann, db):
    lesson, version = _current(db, PLAN)
    prompt = lesson.pauses[0].id
    common = {"user": ann, "lesson": lesson, "current_version": version}
    stale = answering.answer_pause(db, **common, pause_id=prompt, version=version - 1, answer="Because.")
    assert "updated to version" in stale.error
    assert answering.answer_pause(db, **common, pause_id=prompt, version=version, answer="  ").error.startswith(
        "Write an answer first"
    )
    assert answering.answer_pause(db, **common, pause_id=prompt, version=version, answer="Because.").error is None
    assert [(r.kind, r.item_id) for r in db.query(Response)] == [("pause", prompt)]
    early = answering.self_check(db, **common, question_id="defend-plan", version=version, ticked=[0])
    assert "Save your written answer first" in early.error


def test_what_the_lesson_does_not_have_is_not_found(ann, db):
    lesson, version = _current(db, PLAN)
    common = {"user": ann, "lesson": lesson, "current_version": version, "version": version}
    with pytest.raises(NotFound, match="has no question 'nope'"):
        answering.answer_question(db, **common, question_id="nope", answer="1", seed=0)
    with pytest.raises(NotFound, match="no pause-and-reason prompt 'nope'"):
        answering.answer_pause(db, **common, pause_id="nope", answer="1")
    with pytest.raises(NotFound, match="no problem 'tp8-zero1-70b' with a step 'nope'"):
        answering.answer_step(db, **common, question_id="tp8-zero1-70b", step_id="nope", answer="1")
    with pytest.raises(NotFound, match="no problem 'defend-plan'"):  # a question, but not one with steps
        answering.answer_step(db, **common, question_id="defend-plan", step_id="x", answer="1")
    with pytest.raises(NotFound, match="with a self-check"):  # a question without one
        answering.self_check(db, **common, question_id="tp8-zero1-70b", ticked=[])
    assert db.query(Attempt).count() == 0 and db.query(Response).count() == 0
