"""How long a part takes, computed from what is in it: the one formula behind every part's minutes.

The loader calls `part_minutes` for every part that does not type its minutes, and the lesson's read
time is the sum, so a part that grows by a section grows in time too. A typed value must agree:
`typed_mismatches` lists the ones that do not, and tests/content/test_timing.py runs it on every
shipped lesson. The rates are the
course's assumptions, stated once here:

- prose is read at READING_WPM words a minute (technical text with formulas, read to be understood, is
  slower than the 200–250 of ordinary prose);
- each figure takes FIGURE_MIN to read (axes, legend, the point it makes);
- each pause asks the learner to write an answer before the reveal: PAUSE_MIN;
- each question takes the minutes QUESTION_MIN gives its kind (a multi-step question per step);
- a code trace takes TRACE_LINE_MIN per line of code on top of its steps' words.

Sections labelled "Optional depth" are timed apart: a part's minutes are its core, and its optional
minutes are shown beside them. Words are counted in every text the learner reads in the part (intro, bodies, captions, cards, steps,
callouts, objectives, pause prompts and reference answers, trace steps) and in the atlas eras a timeline
block shows. Question texts are inside their kind's minutes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

READING_WPM = 160
FIGURE_MIN = 1.0
PAUSE_MIN = 2.0
QUESTION_MIN = {"single_choice": 1.0, "free_response": 3.0, "numeric": 2.0, "multi_step": 1.5}  # multi_step: per step
TRACE_LINE_MIN = 0.25

# Fields a learner reads; ids, labels, sources, code and figure parameters are not prose.
READ_KEYS = frozenset({"intro", "body", "caption", "prompt", "answer", "text", "title", "what_changed", "cost"})
WORD = re.compile(r"[^\s]+")


@dataclass(frozen=True)
class Estimate:
    """One part's time and what it is made of; `optional` is the minutes of its optional-depth sections,
    counted apart (the part's `minutes` is its core)."""

    words: int
    figures: int
    pauses: int
    questions: float  # minutes of questions
    code_lines: int
    minutes: int
    optional: int = 0

    def describe(self) -> str:
        return (
            f"{self.words:,} words at {READING_WPM} a minute, {self.figures} figures, {self.pauses} pauses, "
            f"{self.questions:g} min of questions, {self.code_lines} lines of traced code"
        )


def _words(node: Any, key: str | None = None) -> int:
    if isinstance(node, str):
        return len(WORD.findall(node)) if key in READ_KEYS else 0
    if isinstance(node, dict):
        return sum(_words(v, k if k in READ_KEYS or k in ("cards", "items", "steps", "pause", "figures") else None)
                   for k, v in node.items())  # fmt: skip
    if isinstance(node, list):
        return sum(_words(v, key) for v in node)
    return 0


def _question_minutes(question: Any) -> float:
    body = question.body
    each = QUESTION_MIN[body.kind]
    return each * len(body.steps) if body.kind == "multi_step" else each


@dataclass
class _Tally:
    words: int = 0
    figures: int = 0
    pauses: int = 0
    questions: float = 0.0  # minutes
    lines: int = 0

    def minutes(self) -> float:
        return (
            self.words / READING_WPM
            + self.figures * FIGURE_MIN
            + self.pauses * PAUSE_MIN
            + self.questions
            + self.lines * TRACE_LINE_MIN
        )


def _count(block: Any, into: _Tally, questions: dict[str, Any], eras: dict[str, Any]) -> None:
    """Add one block's words, figures, pauses, question minutes and traced lines to `into`."""
    into.words += _words(block.model_dump())
    kind = block.kind
    if kind == "section":
        into.figures += len(block.figures)
        into.pauses += block.pause is not None
    elif kind == "figure":
        into.figures += 1
    elif kind == "questions":
        into.questions += sum(_question_minutes(questions[q]) for q in block.ids if q in questions)
    elif kind == "code_trace":
        into.lines += len(block.code_lines)
    elif kind == "timeline":
        into.words += sum(_words(eras[e].model_dump()) for e in block.eras if e in eras)


def is_optional(block: Any) -> bool:
    """A section labelled "Optional …" (the lessons' "Optional depth") is timed apart from the core."""
    return block.kind == "section" and (block.label or "").lower().startswith("optional")


def part_minutes(part: Any, questions: dict[str, Any], eras: dict[str, Any]) -> Estimate:
    """Minutes for one part (a validated Part): its core, rounded up to a whole minute and at least one, and
    its optional-depth sections apart, rounded up too (0 when it has none).

    `questions` maps question ids to loaded Questions, `eras` era ids to atlas Eras; ids a part names but
    these lack are counted as nothing (the loader reports them on their own).
    """
    core, extra = _Tally(words=_words({"intro": part.intro})), _Tally()
    for block in part.blocks:
        _count(block, extra if is_optional(block) else core, questions, eras)
    return Estimate(
        core.words,
        core.figures,
        core.pauses,
        core.questions,
        core.lines,
        max(1, math.ceil(core.minutes())),
        math.ceil(extra.minutes()),
    )


def typed_mismatches(lesson: Any) -> list[str]:
    """Parts of a loaded lesson whose typed minutes differ from the formula's, as sentences naming both."""
    eras = {e.id: e for e in lesson.atlas.hardware_ecosystem} if lesson.atlas else {}
    out = []
    for part in lesson.parts:
        est = part_minutes(part, lesson.questions, eras)
        if part.minutes != est.minutes or part.optional_minutes != est.optional:
            out.append(
                f"{lesson.id}/parts/{part.id}.yaml: minutes {part.minutes}, but its core takes {est.minutes} "
                f"({est.describe()}) and its optional depth {est.optional}; remove the field or write {est.minutes}"
            )
    return out
