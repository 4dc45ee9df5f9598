"""`lab.yaml`: the optional hands-on lab, its evidence of completion and its report questions."""

from __future__ import annotations

from pydantic import Field, model_validator

from .base import Id, LabId, Markdown, Strict, Text
from .header import Reference


class LabStep(Strict):
    id: Id = Field(description="Stable id of the step.")
    text: Markdown = Field(description="What to do.")
    lab: LabId | None = Field(None, description="The lab that automates this step, if any.")


class Evidence(Strict):
    id: Id = Field(description="Stable id; a submission's evidence is keyed by it.")
    title: Text = Field(description="What to hand in.")
    description: Markdown = Field(description="What counts as complete.")
    lab: LabId = Field(description="The lab whose result provides this evidence.")
    fallback: bool = Field(False, description="True for the item accepted on unsupported hardware instead.")


class Stretch(Strict):
    id: Id = Field(description="Stable id of the challenge.")
    text: Markdown = Field(description="The challenge.")
    lab: LabId = Field(description="The lab that supports it.")


class ReportQuestion(Strict):
    id: Id = Field(description="Stable id; the learner's written answer in a lab report is keyed by it.")
    prompt: Markdown = Field(description="The question the learner answers in writing in the lab report.")
    hint: Markdown | None = Field(None, description="What a good answer refers to, shown under the box.")


class Lab(Strict):
    """`lab.yaml`: the optional hands-on lab."""

    title: Text = Field(description="Lab title.")
    minutes_min: int = Field(ge=1, description="Shortest expected duration in minutes.")
    minutes_max: int = Field(ge=1, description="Longest expected duration in minutes.")
    requirements: Text = Field(description="What environment it needs, e.g. 'a CUDA GPU'.")
    goal: Markdown = Field(description="What the learner validates.")
    procedure: list[LabStep] = Field(min_length=1, description="Steps, in order.")
    evidence: list[Evidence] = Field(min_length=1, description="Evidence of completion.")
    stretch: Stretch | None = Field(None, description="Optional stretch challenge.")
    entry_points: list[Reference] = Field(default_factory=list, description="Official learning entry points.")
    report_questions: list[ReportQuestion] = Field(
        default_factory=list, description="Questions the learner answers in writing when handing in the lab report."
    )

    @model_validator(mode="after")
    def _durations(self) -> Lab:
        if self.minutes_max < self.minutes_min:
            raise ValueError(f"minutes_max >= minutes_min; found {self.minutes_max} < {self.minutes_min}")
        ids = [e.id for e in self.evidence] + ([self.stretch.id] if self.stretch else [])
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"evidence and stretch ids unique; found {', '.join(dup)} more than once")
        qids = [q.id for q in self.report_questions]
        dup = sorted({i for i in qids if qids.count(i) > 1})
        if dup:
            raise ValueError(f"report question ids unique; found {', '.join(dup)} more than once")
        return self

    @property
    def report_slots(self) -> list[Evidence | Stretch]:
        """What a lab report can carry: every evidence item, then the stretch challenge."""
        return [*self.evidence, *([self.stretch] if self.stretch else [])]
