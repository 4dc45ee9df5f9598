"""`atlas.yaml`: optional reference material (vocabulary, worked example, playbook, eras)."""

from __future__ import annotations

from pydantic import Field

from .base import Id, Markdown, Strict, Text


class Term(Strict):
    term: Text = Field(description="The word.")
    definition: Markdown = Field(description="What it means here.")


class ExampleStep(Strict):
    id: Id = Field(description="Stable id of the step.")
    title: Text = Field(description="Short title, e.g. 'Compute scale'.")
    body: Markdown = Field(description="The step, with {{calc:…}} numbers.")


class WorkedExample(Strict):
    title: Text = Field(description="Title of the example.")
    steps: list[ExampleStep] = Field(min_length=1, description="Steps, in order.")
    result: Markdown = Field(description="What the numbers add up to.")
    why: Markdown = Field(description="Why it matters.")


class PlaybookRow(Strict):
    id: Id = Field(description="Stable id of the row.")
    symptom: Text = Field(description="What the learner observes.")
    inspect: Markdown = Field(description="What to inspect first.")
    evidence: Markdown = Field(description="The evidence that settles it.")


class Era(Strict):
    id: Id = Field(description="Stable id; a part's timeline block refers to it.")
    title: Text = Field(description="Name of the era, e.g. 'FP32 training'.")
    what_changed: Markdown = Field(description="What the hardware and software changed.")
    cost: Markdown = Field(description="What it cost or what became the new problem.")


class Atlas(Strict):
    """`atlas.yaml`: optional reference material, outside the timed parts."""

    note: Text | None = Field(None, description="Small print, e.g. 'optional reference, outside the core time'.")
    vocabulary: list[Term] = Field(default_factory=list, description="Core vocabulary.")
    worked_example: WorkedExample | None = Field(None, description="One worked example with computed numbers.")
    playbook: list[PlaybookRow] = Field(default_factory=list, description="Diagnostic playbook rows.")
    hardware_ecosystem: list[Era] = Field(default_factory=list, description="Hardware → ecosystem eras, in order.")
