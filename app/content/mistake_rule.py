"""A known-mistake rule drafted into a question's YAML from the class's question statistics.

    drafted(text, ratio, question) -> (the question's text with the rule added, Drafted)

The statistics page (app/services/classes/stats.py) links each frequent wrong answer that no rule explains to
the editor, with its ratio to the learner's own right answer. The editor opens the question with the rule in
place, in the format the schema reads (`mistakes:` in app/content/schema/questions.py; lessons/_template/
README.md, "Known mistakes"): `times_answer` on a generated question, whose right answer differs per learner,
`value` on a fixed one. Its `feedback` is left empty, since only the author can say which idea gives that number:
the validator points at that line until they do, so a rule never reaches learners without its words.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal

from .schema import Numeric, Question

GUIDE = 'lessons/_template/README.md, "Known mistakes"'
TOP_KEY = re.compile(r"^[A-Za-z_][\w-]*\s*:")  # a top-level key of a question file
MISTAKES_KEY = re.compile(r"^mistakes\s*:(?P<empty>\s*\[\s*\])?(?P<rest>\s*(?:#.*)?)$")


class DraftError(ValueError):
    """The statistics' link asks for a rule this question cannot take (said in the author's words)."""


@dataclass(frozen=True)
class Drafted:
    """What the editor says about the rule it drafted."""

    ratio: str  # "2": the wrong answers were 2× the right one
    key: str  # "times_answer: 2" or "value: 49"
    line: int  # 1-based line of its (empty) feedback


def yaml_number(x: float) -> str:
    """`x` as a plain YAML number of at most 6 significant digits: "2", "0.5", "4500000" (never "4.5e+06", which
    YAML 1.1 readers take for a string)."""
    text = format(x, ".6g")
    if "e" in text:
        text = format(Decimal(text), "f")
    return text


def drafted(text: str, ratio: float, question: Question | None) -> tuple[str, Drafted]:
    """The question's text with a rule for answers `ratio` times the right one appended to its `mistakes:` list
    (made when it has none). DraftError for a ratio that is no number, or a question that is not numeric."""
    if not (math.isfinite(ratio) and ratio != 0 and abs(ratio) < 1e12):
        raise DraftError("mistake: a finite ratio of a wrong answer to the right answer, other than 0, e.g. 2 or 0.5")
    body = question.body if question else None
    if not isinstance(body, Numeric):
        raise DraftError("mistake: a known-mistake rule belongs to a numeric question; this file is not one")
    if body.answer is not None:
        key = f"value: {yaml_number(ratio * body.answer)}"
        seen = f"{yaml_number(ratio)}× the right answer, {yaml_number(ratio * body.answer)}{' ' + body.unit if body.unit else ''}"
    else:
        key = f"times_answer: {yaml_number(ratio)}"
        seen = f"{yaml_number(ratio)}× their own right answer"
    lines = text.rstrip("\n").split("\n")
    found = next(((i, m) for i, line in enumerate(lines) if (m := MISTAKES_KEY.match(line))), None)
    if found is None:
        lines += ["mistakes:"]
        at, indent = len(lines) - 1, "  "
    else:
        at, key_line = found
        lines[at] = "mistakes:" + key_line["rest"]  # "mistakes: []" becomes a block list; its comment stays
        item = next((ln for ln in lines[at + 1 :] if ln.lstrip().startswith("- ")), "  - ")
        indent = item[: len(item) - len(item.lstrip())] or "  "
    end = at + 1
    while end < len(lines) and not TOP_KEY.match(lines[end]):
        end += 1
    while end > at + 1 and not lines[end - 1].strip():  # before the blank lines that end the list
        end -= 1
    rule = [
        f"{indent}# Drafted from the class's question statistics: learners answered {seen}.",
        f"{indent}# Write what went wrong, the idea that gives that number, as its feedback ({GUIDE}).",
        f"{indent}- {key}",
        f'{indent}  feedback: ""',
    ]
    lines[end:end] = rule
    return "\n".join(lines) + "\n", Drafted(yaml_number(ratio), key, end + len(rule))
