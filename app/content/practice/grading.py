"""Grading one answer against a question's key: options for single choice, the reference for free
response, the tolerance for numeric answers. Pure: no HTTP, no database.

A raw answer that is not a number (or has a unit of the wrong kind) is `invalid`: the message says
what was expected and `counts_as_attempt` is False, so the app must not record it as a try.

A numeric answer that is a known slip rather than a wrong idea gets `hint` (not a try either): a
fraction where a percentage was asked (0.273 for 27.3%), or a value a generator names as a slip (the
value after rounding when the question asks before it). A value a generator names as a mistake (a
wrong idea the lesson warns about: one phase of a ring all-reduce, the KV cache without V) is a try,
graded incorrect, and its feedback says which idea went wrong instead of only that it is out of range. Multi-step problems grade one step at a time
with `grade_step`, reusing the same rules; a step is its own small question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from labs.api import number, percent

from ..schema import FreeResponse, MultiStep, Numeric, Question, SingleChoice
from .answers import convert, parse_number, with_unit
from .generators import Variant, make_variant

Status = Literal["correct", "incorrect", "invalid", "answered", "hint"]


@dataclass(frozen=True)
class Feedback:
    status: Status
    message: str  # Markdown
    expected: float | None = None
    unit: str = ""
    expected_text: str = ""  # "14 ms"
    explanation: str = ""  # Markdown, shown after a graded answer
    chosen: str | None = None  # the option id for single choice

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    @property
    def counts_as_attempt(self) -> bool:
        """Only a real try is recorded: malformed input and recognised slips are not."""
        return self.status not in ("invalid", "hint")


def _slip(value: float, expected: float, q: Numeric, variant: Variant) -> str | None:
    """The hint for a recognised slip, or None when the answer is simply wrong."""
    if q.unit == "%" and expected and not _within(value, expected, q) and _within(value * 100, expected, q):
        return f"{number(value)} looks like a fraction. As a percentage? Multiply by 100 (here: {percent(value)})."
    for slip_value, message in variant.values.get("slips", ()):
        if not _within(value, expected, q) and _within(value, float(slip_value), q):
            return str(message)
    return None


def _mistake(value: float, expected: float, q: Numeric, variant: Variant) -> str | None:
    """What went wrong when the answer is a generator's known mistake, or None. A mistake the tolerance cannot tell
    from the answer (a 64-GPU ring's 2(N−1)/N is within 2% of 2) is never named."""
    for wrong, message in variant.values.get("mistakes", ()):
        if not _within(float(wrong), expected, q) and _within(value, float(wrong), q):
            return str(message)
    return None


def _band(q: Numeric) -> str:
    """The accepted range, as the incorrect feedback names it: "±0.5 ms", "±2%", "±0.5%"."""
    tol = q.tolerance
    if tol.abs is not None:
        return f"±{with_unit(tol.abs, q.unit_for(tol.abs))}"
    return f"±{percent(tol.rel or 0.0)}"


def _within(value: float, expected: float, q: Numeric) -> bool:
    return q.tolerance.accepts(value, expected)


def grade(question: Question, variant: Variant | None, raw_answer: str) -> Feedback:
    """Grade one answer. Never raises for learner input: a malformed answer is status='invalid'."""
    q = question.body
    if isinstance(q, SingleChoice):
        chosen = (raw_answer or "").strip().upper()
        option = next((o for o in q.options if o.id == chosen), None)
        if option is None:
            ids = ", ".join(o.id for o in q.options)
            return Feedback("invalid", f"Pick one of the options ({ids}).")
        right = next(o for o in q.options if o.correct)
        return Feedback(
            "correct" if option.correct else "incorrect",
            option.feedback,
            expected_text=right.id,
            explanation=q.explanation or "",
            chosen=option.id,
        )
    if isinstance(q, FreeResponse):
        if not (raw_answer or "").strip():
            return Feedback("invalid", "Write your answer before revealing the reference answer.")
        return Feedback("answered", q.reference_answer, explanation=q.reference_answer)
    if isinstance(q, MultiStep):
        return Feedback("invalid", "Answer this problem one step at a time.")
    assert isinstance(q, Numeric)
    if variant is None:
        variant = make_variant(question, 0)
    raw = (raw_answer or "").strip()
    for words in (q.answer_in, q.answer_in_one) if q.answer_in else ():  # "84 GPU-hours", "1 GPU-hour"
        if raw.lower().endswith(words.lower()):
            raw = raw[: -len(words)]
            break
    try:
        value, unit = parse_number(raw)
        if unit and q.answer_in:
            raise ValueError(f"Type the number of {q.answer_in} alone; drop “{unit}”.")
        value = convert(value, unit, q.unit)
    except ValueError as exc:
        return Feedback("invalid", str(exc), unit=q.unit)
    if variant.answer is None:  # make_variant gives every numeric question an answer
        raise ValueError(f"question {question.id!r}: its variant has no answer")
    expected = float(variant.answer)
    text = with_unit(expected, q.unit_for(expected), q.tolerance.accepts)
    slip = _slip(value, expected, q, variant)
    if slip:
        return Feedback("hint", slip, unit=q.unit)
    shown = with_unit(value, q.unit_for(value))
    if _within(value, expected, q):
        return Feedback("correct", f"Correct: {shown}.", expected, q.unit, text, variant.explanation)
    mistake = _mistake(value, expected, q, variant)
    if mistake:
        message = f"Not quite: {shown}. {mistake}"
    elif q.tolerance.abs == 0:
        message = f"Not quite: {shown} is not the answer, which is exact here."
    else:
        side = "too high" if value > expected else "too low"
        message = f"Not quite: {shown} is {side}, outside the accepted range ({_band(q)})."
    return Feedback(
        "incorrect",
        message,
        expected,
        q.unit,
        text,
        variant.explanation,
    )


def step_question(question: Question, step_id: str) -> Question | None:
    """One step of a multi-step problem as a question of its own (id "<question>:<step>"), or None."""
    body = question.body
    step = body.step(step_id) if isinstance(body, MultiStep) else None
    return Question(id=f"{question.id}:{step.id}", body=step) if step else None


def grade_step(question: Question, step_id: str, raw_answer: str) -> Feedback:
    """Grade one step of a multi-step problem: numeric steps with their tolerance and units, choices by option."""
    sub = step_question(question, step_id)
    if sub is None:
        raise ValueError(f"question {question.id!r} has no step {step_id!r}")
    return grade(sub, make_variant(sub, 0), raw_answer)
