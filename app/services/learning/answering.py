"""Answering a lesson: pause-and-reason prompts, practice questions, the steps of multi-step problems, self-checks.

Each function decides whether an answer is taken (the lesson version it was given under, the learner's own
variant, the text's length), grades it, records what counts (an attempt, a written response) and returns what
the page shows. A refusal is data, not an exception: the page shows the learner's piece again with their text
kept and the refusal beside it. Only a question, step or prompt the lesson does not have raises (NotFound).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.content import Feedback, Variant, grade, make_variant
from app.content.practice import grade_step
from app.content.schema import FreeResponse, Lesson, MultiStep, Numeric, Part, Pause, Question
from app.core.models import Person, User
from app.services.errors import NotFound
from app.services.learning import progress as learning

OTHER_VARIANT = "This answer was for a different variant of the question than yours; reload the page to see your own."


class VariantCache:
    """Each learner's variant of each numeric question, drawn once per process and kept.

    What: the `Variant` (numbers drawn from the generator's ranges, the prompt and the answer computed) for a
    question object and a learner's seed. Why: drawing one took more time than the rest of a practice page, and a
    variant depends only on the question (fixed per published lesson version) and the seed, so a kept one is never
    stale. Bounded: emptied when it holds `limit` entries (a variant is cheap to draw again, and the ones in use
    come back at once). Keyed by the question's id(): each entry holds its question, so no other object can take
    that id while the entry lives, and a new lesson version's questions are new keys.
    """

    def __init__(self, limit: int = 4096):
        self.limit = limit  # ~4 questions per part x ~1,000 learners reading the same part
        self._kept: dict[tuple[int, int], tuple[Question, Variant]] = {}

    def get(self, question: Question, seed: int) -> Variant:
        key = (id(question), seed)
        entry = self._kept.get(key)
        if entry is None:
            if len(self._kept) >= self.limit:
                self._kept.clear()
            entry = self._kept[key] = (question, make_variant(question, seed))
        return entry[1]

    def __len__(self) -> int:
        return len(self._kept)


VARIANTS = VariantCache()  # one per process: the lesson pages and the answers they post share it


def variant(lesson: Lesson, *, user: Person, question_id: str) -> Variant | None:
    """The learner's own variant of a numeric question (None for other kinds)."""
    q = lesson.questions[question_id]
    if not isinstance(q.body, Numeric):
        return None
    return VARIANTS.get(q, learning.variant_seed(user.id, question_id))


def part_variants(lesson: Lesson, *, user: Person, part: Part | None) -> dict[str, Variant | None]:
    """Variants of the questions `part` shows (none for a part without questions, or no part)."""
    ids = [qid for b in (part.blocks if part else []) if b.kind == "questions" for qid in b.ids]
    return {qid: variant(lesson, user=user, question_id=qid) for qid in ids}


def stale(version: int, current_version: int) -> str | None:
    """Why an answer given under `version` is refused while the lesson is at `current_version` (None: it is not)."""
    if version != current_version:
        return (
            f"This lesson was updated to version {current_version} after you opened it (you answered version "
            f"{version}). Your text is still in the box: reload the page and submit it again."
        )
    return None


@dataclass(frozen=True)
class Answered:
    """What an answer came to: `feedback` when it was graded and counted, else `error` (why it was not); for a
    numeric question, `variant`: the learner's own, which the page shows again either way."""

    feedback: Feedback | None = None
    error: str | None = None
    variant: Variant | None = None


def pause(lesson: Lesson, pause_id: str) -> Pause:
    """The lesson's pause-and-reason prompt `pause_id`; NotFound if it has none."""
    found = next((p for p in lesson.pauses if p.id == pause_id), None)
    if found is None:
        raise NotFound(f"Lesson {lesson.id!r} has no pause-and-reason prompt {pause_id!r}.")
    return found


def answer_pause(
    db: Session, *, user: User, lesson: Lesson, current_version: int, pause_id: str, version: int, answer: str
) -> Answered:
    """Save a pause-and-reason answer."""
    pause(lesson, pause_id)
    error = stale(version, current_version)
    if not error:
        try:
            learning.save_response(
                db, user=user, lesson_id=lesson.id, version=version, item_id=pause_id, kind="pause", text=answer
            )
        except learning.AnswerError as exc:
            error = exc.message
    return Answered(error=error)


def question(lesson: Lesson, question_id: str) -> Question:
    """The lesson's question `question_id`; NotFound if it has none."""
    q = lesson.questions.get(question_id)
    if q is None:
        raise NotFound(f"Lesson {lesson.id!r} has no question {question_id!r}.")
    return q


def answer_question(
    db: Session,
    *,
    user: Person,
    lesson: Lesson,
    current_version: int,
    question_id: str,
    version: int,
    answer: str,
    seed: int,
) -> Answered:
    """Grade a practice answer and record it if it is a real try (not malformed, not a recognised slip).

    Refused first, in this order: an answer given under an older lesson version; a numeric answer for a variant
    (`seed`) that is not the learner's own; a written answer too long to keep. A written answer that counts is
    saved as the learner's response as well as an attempt."""
    q = question(lesson, question_id)
    my_seed = learning.variant_seed(user.id, question_id)
    mine = variant(lesson, user=user, question_id=question_id)
    error = stale(version, current_version)
    if not error and isinstance(q.body, Numeric) and seed != my_seed:
        error = OTHER_VARIANT
    if not error and isinstance(q.body, FreeResponse):
        try:
            learning.check_answer_text(answer)
        except learning.AnswerError as exc:
            error = exc.message
    if error:
        return Answered(error=error, variant=mine)
    feedback = grade(q, mine, answer)
    if not feedback.counts_as_attempt:
        return Answered(error=feedback.message, variant=mine)
    if isinstance(q.body, FreeResponse):
        learning.save_response(
            db, user=user, lesson_id=lesson.id, version=version, item_id=question_id, kind="free_response", text=answer
        )
    learning.record_attempt(
        db,
        user=user,
        lesson_id=lesson.id,
        version=version,
        question_id=question_id,
        seed=my_seed,
        answer=answer,
        status=feedback.status,
    )
    return Answered(feedback=feedback, variant=mine)


def multistep(lesson: Lesson, question_id: str, step_id: str) -> MultiStep:
    """The multi-step problem `question_id` if it has a step `step_id`; NotFound otherwise."""
    q = lesson.questions.get(question_id)
    body = q.body if q else None
    if not isinstance(body, MultiStep) or body.step(step_id) is None:
        raise NotFound(f"Lesson {lesson.id!r} has no problem {question_id!r} with a step {step_id!r}.")
    return body


def answer_step(
    db: Session,
    *,
    user: User,
    lesson: Lesson,
    current_version: int,
    question_id: str,
    step_id: str,
    version: int,
    answer: str,
) -> Answered:
    """Grade one step of a multi-step problem like a practice question and record it if it is a real try; the
    problem itself is recorded as right once every step is (learning.record_step)."""
    body = multistep(lesson, question_id, step_id)
    error = stale(version, current_version)
    if error:
        return Answered(error=error)
    feedback = grade_step(lesson.questions[question_id], step_id, answer)
    if not feedback.counts_as_attempt:
        return Answered(error=feedback.message)
    learning.record_step(
        db,
        user=user,
        lesson_id=lesson.id,
        version=version,
        question_id=question_id,
        step_ids=[s.id for s in body.steps],
        step_id=step_id,
        answer=answer,
        status=feedback.status,
    )
    return Answered(feedback=feedback)


def self_check(
    db: Session,
    *,
    user: User,
    lesson: Lesson,
    current_version: int,
    question_id: str,
    version: int,
    ticked: list[int],
) -> Answered:
    """Save the self-check points a learner ticked after a free-response question's reference answer."""
    q = lesson.questions.get(question_id)
    if q is None or not isinstance(q.body, FreeResponse) or not q.body.self_check:
        raise NotFound(f"Lesson {lesson.id!r} has no question {question_id!r} with a self-check.")
    error = stale(version, current_version)
    if not error:
        try:
            learning.save_self_check(
                db,
                user=user,
                lesson_id=lesson.id,
                version=version,
                question_id=question_id,
                ticked=ticked,
                points=len(q.body.self_check),
            )
        except learning.AnswerError as exc:
            error = exc.message
    return Answered(error=error)
