"""`questions/<question-id>.yaml`: single choice, free response, numeric and multi-step questions."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from .base import Id, Markdown, Strict, Text


class Option(Strict):
    id: str = Field(pattern=r"^[A-Z]$", description="Option letter, A to Z.")
    text: Text = Field(description="The option as shown.")
    correct: bool = Field(False, description="True for the one correct option.")
    feedback: Markdown = Field(description="Shown when the learner picks this option.")


class QuestionBase(Strict):
    label: Text | None = Field(None, description="Small tag above the prompt, e.g. 'Format' or 'Diagnose'.")
    prompt: Markdown = Field(description="The question.")
    hint: Markdown | None = Field(None, description="Hint the learner may open before answering.")


class SingleChoice(QuestionBase):
    kind: Literal["single_choice"] = Field(description="Pick one option; each option has its own feedback.")
    options: list[Option] = Field(min_length=2, description="Options, A first.")
    explanation: Markdown | None = Field(None, description="Shown with the answer after any pick.")

    @model_validator(mode="after")
    def _one_correct(self) -> SingleChoice:
        n = sum(o.correct for o in self.options)
        if n != 1:
            raise ValueError(f"exactly one option with correct: true; found {n}")
        ids = [o.id for o in self.options]
        if len(set(ids)) != len(ids):
            raise ValueError(f"unique option ids; found {ids}")
        return self


class FreeResponse(QuestionBase):
    kind: Literal["free_response"] = Field(description="Written answer, saved before the reference is revealed.")
    reference_answer: Markdown = Field(description="The reference answer.")
    self_check: list[Text] = Field(
        default_factory=list,
        max_length=12,
        description="Points a complete answer makes; after the reveal the learner ticks those theirs made.",
    )


class Tolerance(Strict):
    abs: float | None = Field(None, ge=0, description="Accepted absolute error, in the question's unit.")
    rel: float | None = Field(None, ge=0, le=1, description="Accepted relative error, e.g. 0.02 for 2%.")

    @model_validator(mode="after")
    def _one_kind(self) -> Tolerance:
        if (self.abs is None) == (self.rel is None):
            raise ValueError("exactly one of abs or rel; found " + ("both" if self.abs is not None else "neither"))
        return self

    def accepts(self, value: float, expected: float) -> bool:
        """Whether `value` counts as `expected` under this tolerance."""
        if self.abs is not None:
            return abs(value - expected) <= self.abs + 1e-12
        return abs(value - expected) <= (self.rel or 0.0) * abs(expected) + 1e-12


class Range(Strict):
    min: float = Field(description="Smallest value drawn.")
    max: float = Field(description="Largest value drawn.")
    step: float = Field(1, gt=0, description="Values are min + k·step.")

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.max < self.min:
            raise ValueError(f"max >= min; found max {self.max} < min {self.min}")
        return self


class Choices(Strict):
    choices: list[float | int | str] = Field(min_length=1, description="Values drawn with equal chance.")


ParamSpec = float | int | str | list[float] | Range | Choices


class NamedMistake(Strict):
    """A wrong answer that follows from one known wrong idea, and what to tell a learner who gives it: a matching
    answer counts as a try, and its feedback says which idea went wrong (lessons/_template/README.md, "Known
    mistakes")."""

    value: float | None = Field(
        None,
        description="The wrong answer, in the question's unit: a fixed question's (its answer is the same for all).",
    )
    times_answer: float | None = Field(
        None,
        description="The wrong answer as a multiple of the learner's own right answer, e.g. 2 for twice it: any "
        "numeric question (a generated one's answer differs per learner); what the question statistics draft.",
    )
    feedback: Markdown = Field(
        description="What went wrong, shown to a learner whose answer matches: the idea that gives this number. A "
        "generated question's may use its {{placeholders}}."
    )

    @field_validator("feedback", mode="before")
    @classmethod
    def _written(cls, v):
        if isinstance(v, str) and not v.strip():
            raise ValueError("the words a learner who gives this answer reads: the idea that gives it; found none yet")
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> NamedMistake:
        if (self.value is None) == (self.times_answer is None):
            both = "both" if self.value is not None else "neither"
            raise ValueError(
                f"exactly one of `value` (the wrong answer) or `times_answer` (it ÷ the answer); found {both}"
            )
        if self.times_answer is not None and not (math.isfinite(self.times_answer) and self.times_answer != 0):
            raise ValueError(f"`times_answer` a finite multiple other than 0; found {self.times_answer}")
        return self

    def wrong_for(self, answer: float) -> float:
        """The wrong value this rule names for a learner whose right answer is `answer`."""
        return self.value if self.value is not None else (self.times_answer or 0.0) * answer


class Numeric(QuestionBase):
    kind: Literal["numeric"] = Field(description="A number with a unit, graded within a tolerance.")
    generator: Text | None = Field(
        None, description="Name of a generator in app/content/practice/; its params vary per learner."
    )
    params: dict[str, ParamSpec] = Field(
        default_factory=dict,
        description="Generator parameters: a fixed value, {min, max, step} or {choices: [...]}.",
    )
    answer: float | None = Field(None, description="The answer of a fixed (non-generated) question.")
    unit: str = Field("", description="Unit of the answer, e.g. 'ms', 'GB', '%'; empty for a pure number.")
    answer_in: Text = Field(
        "",
        max_length=40,
        description="What a unitless answer counts, named beside the answer box and in the feedback: 'GPU-hours', "
        "'billion tokens'. Display only: it converts nothing, so a question with a `unit` has none.",
    )
    tolerance: Tolerance = Field(
        default_factory=lambda: Tolerance.model_validate({"rel": 0.01}), description="How close counts as correct."
    )
    explanation: Markdown | None = Field(
        None, description="Shown after grading; may use {{param}} and the generator's derived values."
    )
    mistakes: list[NamedMistake] = Field(
        default_factory=list,
        max_length=8,
        description="Wrong answers worth naming, each with the idea behind it: a matching answer counts as a try and "
        "is told what went wrong. A generator names its own besides.",
    )

    @model_validator(mode="after")
    def _answer_or_generator(self) -> Numeric:
        if (self.generator is None) == (self.answer is None):
            both = "both" if self.generator is not None else "neither"
            raise ValueError(f"exactly one of `generator` (parameterized) or `answer` (fixed); found {both}")
        if self.answer is not None and self.params:
            raise ValueError("`params` only together with a `generator`; found params with a fixed answer")
        if self.answer_in and self.unit:
            raise ValueError(
                f"`answer_in` only for a unitless answer (it converts nothing); this one's unit is {self.unit!r}"
            )
        for i, m in enumerate(self.mistakes):
            if m.value is not None and self.answer is None:
                raise ValueError(
                    f"mistakes[{i}].value: `times_answer` on a generated question, whose answer differs per learner "
                    "(the wrong answer as a multiple of each learner's own, e.g. `times_answer: 2` for twice it); "
                    f"found value: {m.value:g}"
                )
            if self.answer is not None:
                close = self.tolerance.accepts(m.wrong_for(self.answer), self.answer)
                named = f"{m.value:g}" if m.value is not None else f"{m.times_answer:g} × {self.answer:g}"
                what = f"{named}, which the tolerance accepts as the answer {self.answer:g}"
            else:
                rel = self.tolerance.rel
                close = rel is not None and abs((m.times_answer or 0.0) - 1) <= rel
                what = f"{m.times_answer:g} × the answer, which the tolerance (±{(rel or 0.0) * 100:g}%) accepts"
            if close:
                rule = "value" if m.value is not None else "times_answer"
                raise ValueError(
                    f"mistakes[{i}].{rule}: a wrong answer the tolerance tells apart from the right one (one it "
                    f"accepts is graded correct); found {what}"
                )
        return self

    @property
    def shown_unit(self) -> str:
        """The unit the page and the feedback name: `unit`, else `answer_in`."""
        return self.unit or self.answer_in

    @property
    def answer_in_one(self) -> str:
        """`answer_in` for a count of one: "GPU-hour" for "GPU-hours"; "billion tokens" stays (its first word
        is the one a number agrees with)."""
        first, _, rest = self.answer_in.partition(" ")
        if first.endswith("s") and not first.endswith("ss"):
            first = first[:-1]
        return f"{first} {rest}" if rest else first

    def unit_for(self, x: float) -> str:
        """The unit named after the number x: `answer_in`'s words agree with a count of one."""
        if not self.unit and self.answer_in and abs(x) == 1:
            return self.answer_in_one
        return self.shown_unit


class NumericStep(Numeric):
    id: Id = Field(description="Stable id of the step; its attempts are saved under it.")

    @model_validator(mode="after")
    def _fixed(self) -> NumericStep:
        drawn = sorted(k for k, v in self.params.items() if isinstance(v, (Range, Choices)))
        if drawn:
            raise ValueError(
                f"fixed parameter values (every learner works the same scenario); found ranges for {', '.join(drawn)}"
            )
        return self


class ChoiceStep(SingleChoice):
    id: Id = Field(description="Stable id of the step; its attempts are saved under it.")


ProblemStep = Annotated[NumericStep | ChoiceStep, Field(discriminator="kind")]


class MultiStep(QuestionBase):
    kind: Literal["multi_step"] = Field(
        description="A worked problem in checked steps; each step's solution stays hidden until it is tried."
    )
    steps: list[ProblemStep] = Field(min_length=2, max_length=12, description="The steps, in order.")
    summary: Markdown | None = Field(None, description="The whole solution, shown once every step is right.")

    @model_validator(mode="after")
    def _unique_steps(self) -> MultiStep:
        ids = [st.id for st in self.steps]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"unique step ids; found {', '.join(dup)} more than once")
        return self

    def step(self, step_id: str) -> NumericStep | ChoiceStep | None:
        return next((st for st in self.steps if st.id == step_id), None)


QuestionFile = Annotated[SingleChoice | FreeResponse | Numeric | MultiStep, Field(discriminator="kind")]
