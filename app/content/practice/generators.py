"""Numeric question generators: each learner's own variant, drawn deterministically from a seed.

A generator is a family of problems: default parameters (a seed's worked numbers), a unit and a solver
that reuses app/content/calc/, so a question and the lesson's worked example share one arithmetic.
`make_variant(question, seed)` draws the question's `params` ranges from a random stream fixed by
(question id, seed), solves, and fills the prompt, hint and explanation; `check_numeric` is what the
loader runs so an author learns at validation time that a generator, parameter or placeholder is wrong.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any

from labs.api import number, percent

from .. import calc
from ..formats import spec_problem
from ..schema import Choices, Numeric, Question, Range
from . import atscale, numerics, planning
from .answers import gradable
from .family import Generator


@dataclass(frozen=True)
class Variant:
    """One learner's instance of a question: fixed by (question id, seed)."""

    question_id: str
    seed: int
    params: dict[str, Any]
    prompt: str  # Markdown, placeholders filled in
    answer: float | None  # None for non-numeric questions
    unit: str
    explanation: str  # Markdown
    values: dict[str, Any] = field(default_factory=dict)  # params + derived numbers
    hint: str = ""  # Markdown, placeholders filled in


class PracticeError(ValueError):
    """A question cannot produce a variant (unknown generator, bad parameter, unknown placeholder)."""


# ---------------------------------------------------------------- number formatting and placeholders


def shown(v: Any) -> str:
    """A placeholder's value in a prompt: numbers as labs/words.py writes them everywhere ("16,384",
    "6.07 × 10⁻⁷"), which app/content/practice/answers.py reads back; a tuple as "(1, 2)"; text as it is."""
    if isinstance(v, str):
        return v
    if isinstance(v, list | tuple):
        return "(" + ", ".join(shown(x) for x in v) + ")"
    return number(v)


PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*(?:\|([^}]*))?\}\}")


def fill(template: str, values: dict[str, Any], written: dict[str, str] | None = None) -> str:
    """Replace {{name}} / {{name|.2f}} with values; {{name|%}} shows a fraction as a percentage (0.4 → "40%").
    `written`: how a placeholder without a format is written instead of shown() (the answer, in as many digits as
    its tolerance needs). PracticeError names an unknown placeholder."""

    def sub(m: re.Match) -> str:
        name, spec = m.group(1), m.group(2)
        if name not in values:
            raise PracticeError(f"unknown placeholder {{{{{name}}}}}; available: {', '.join(sorted(values))}")
        if not spec and written and name in written:
            return written[name]
        v = values[name]
        if spec and spec.strip() == "%" and isinstance(v, (int, float)) and not isinstance(v, bool):
            return percent(v)
        if spec:
            problem = spec_problem(spec.strip())
            if problem:
                raise PracticeError(problem)
            try:
                return format(v, spec.strip())
            except (TypeError, ValueError) as exc:
                raise PracticeError(f"format {spec!r} does not apply to {name}={v!r}: {exc}") from None
        return shown(v)

    return PLACEHOLDER.sub(sub, template)


# ---------------------------------------------------------------- generators


GENERATORS: dict[str, Generator] = {g.name: g for g in (*numerics.FAMILIES, *planning.FAMILIES, *atscale.FAMILIES)}


# ---------------------------------------------------------------- variants


def _rng(question_id: str, seed: int) -> random.Random:
    digest = hashlib.sha256(f"{question_id}|{seed}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _draw(spec: Any, rng: random.Random) -> Any:
    if isinstance(spec, Range):
        k = int(math.floor((spec.max - spec.min) / spec.step + 1e-9))
        v = round(spec.min + rng.randint(0, k) * spec.step, 10)
        return int(v) if float(v).is_integer() and float(spec.step).is_integer() else v
    if isinstance(spec, Choices):
        return rng.choice(spec.choices)
    return spec


def check_numeric(q: Numeric) -> list[tuple[str, str, str]]:
    """Problems a parameterized question has: (field, expected, found) triples; [] when it is usable."""
    if q.generator is None:
        return []
    gen = GENERATORS.get(q.generator)
    if gen is None:
        return [("generator", f"one of {', '.join(sorted(GENERATORS))}", repr(q.generator))]
    unknown = sorted(set(q.params) - set(gen.defaults))
    problems = [
        (f"params.{name}", f"a parameter of {gen.name}: {', '.join(gen.defaults)}", repr(name)) for name in unknown
    ]
    if q.unit != gen.unit:
        problems.append(("unit", repr(gen.unit) + f" (the unit {gen.name} answers in)", repr(q.unit)))
    if problems:
        return problems
    for seed in range(5):  # every template must fill and every draw must solve
        try:
            make_variant(Question(id="check", body=q), seed)
        except PracticeError as exc:
            return [("params", "parameters and placeholders the generator can use", str(exc))]
    return []


def make_variant(question: Question, seed: int) -> Variant:
    """Deterministic per (question id, seed): params drawn from the ranges, prompt and answer computed."""
    q = question.body
    if isinstance(q, Numeric) and q.generator is not None:
        gen = GENERATORS.get(q.generator)
        if gen is None:
            raise PracticeError(f"unknown generator {q.generator!r}")
        rng = _rng(question.id, seed)
        for _attempt in range(20):  # redraw the rare combination the solver rejects
            params = {**gen.defaults, **{k: _draw(v, rng) for k, v in q.params.items()}}
            try:
                values = {**params, **gen.solve(params)}
                break
            except calc.CalcError as exc:
                last = exc
        else:
            raise PracticeError(f"{gen.name}: no valid draw in 20 tries: {last}")
        params = {k: values.get(k, v) for k, v in params.items()}  # what the solver actually used
        prompt = fill(q.prompt, values)
        # The explanation shows the answer as the grader would accept it back.
        written = {"answer": gradable(float(values["answer"]), q.tolerance.accepts)}
        explanation = fill(q.explanation or gen.explanation, values, written)
        hint = fill(q.hint, values) if q.hint else ""
        answer = float(values["answer"])
        if q.mistakes:  # the question's own rules first: its author named them for this question
            named = [(m.wrong_for(answer), fill(m.feedback, values)) for m in q.mistakes]
            values = {**values, "mistakes": [*named, *values.get("mistakes", ())]}
        return Variant(question.id, seed, params, prompt, answer, q.unit, explanation, values, hint)
    if isinstance(q, Numeric):
        assert q.answer is not None  # Numeric's validator: a fixed answer where there is no generator
        values = {"mistakes": [(m.wrong_for(q.answer), m.feedback) for m in q.mistakes]} if q.mistakes else {}
        return Variant(question.id, seed, {}, q.prompt, q.answer, q.unit, q.explanation or "", values, q.hint or "")
    return Variant(question.id, seed, {}, q.prompt, None, "", getattr(q, "explanation", None) or "", {}, q.hint or "")
