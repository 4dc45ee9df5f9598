"""`parts/<part-id>.yaml`: one timed part and the blocks it is made of."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from .base import Id, LabId, Markdown, Strict, Text


class Objective(Strict):
    id: Id = Field(description="Stable id of the objective (progress and audits refer to it).")
    text: Text = Field(description="What the learner can do by the end.")


class PauseCheck(Strict):
    """Where a pause's prediction can be checked: an interactive tool and the inputs that pose the scenario.

    The pause shows a "predict, then check" link to the tool on /play with these inputs and, once the
    learner has answered, the number their answer predicts (`pause_link` in app/content/tools.py builds it:
    the schema imports no tool). The loader checks that the tool is one of the lesson's `interactive` tools,
    that `inputs` are valid inputs of it and that `predicts` is one of its outputs.
    """

    tool: Id = Field(description="An id from lesson.yaml `interactive`, e.g. 'overlap-window'.")
    inputs: dict[str, float | int | str | bool] = Field(
        default_factory=dict, description="Tool inputs that set up the pause's scenario."
    )
    predicts: Text | None = Field(None, description="The tool output the learner's prediction is about.")


class Pause(Strict):
    id: Id = Field(description="Stable id; the learner's answer is saved under it before the reveal.")
    prompt: Markdown = Field(
        description="The 'pause and reason' question (inline Markdown: a link to a lab preset, `code`)."
    )
    answer: Markdown = Field(description="Reference answer revealed after the learner writes theirs.")
    check: PauseCheck | None = Field(None, description="Optional: the interactive tool that checks the prediction.")


class FigureRef(Strict):
    id: Id = Field(description="Stable id of the figure, unique in the lesson.")
    name: Text = Field(description="A figure from app/content/figures/, e.g. 'fp8-number-line'.")
    params: dict[str, Any] = Field(default_factory=dict, description="The figure's parameters (see its model).")
    caption: Markdown | None = Field(None, description="Text under the picture.")


class MarkdownBlock(Strict):
    kind: Literal["markdown"] = Field(description="Free Markdown.")
    body: Markdown = Field(description="The text.")


class CalloutBlock(Strict):
    kind: Literal["callout"] = Field(description="A highlighted box.")
    style: Literal["remember", "note", "depth", "warning", "anchor"] = Field(
        description="Look of the box: remember, note, depth (extra depth), warning, anchor (historical)."
    )
    title: Text = Field(description="Box title.")
    body: Markdown = Field(description="Box text.")


class ObjectivesBlock(Strict):
    kind: Literal["objectives"] = Field(description="The 'by the end you should be able to' list.")
    items: list[Objective] = Field(min_length=1, description="Objectives, in order.")


class Step(Strict):
    id: Id = Field(description="Stable id of the step.")
    label: Text = Field(description="Short label, e.g. 'Scale'.")
    body: Markdown = Field(description="What the step says.")


class StepsBlock(Strict):
    kind: Literal["steps"] = Field(description="A numbered mental-model sequence.")
    items: list[Step] = Field(min_length=1, description="Steps, in order.")


class ConceptCard(Strict):
    id: Id = Field(description="Stable id of the card.")
    title: Text = Field(description="The claim the card makes.")
    body: Markdown = Field(description="Why it holds.")


class ConceptCardsBlock(Strict):
    kind: Literal["concept_cards"] = Field(description="A row of short concept cards.")
    cards: list[ConceptCard] = Field(min_length=1, description="Cards, in order.")


class SectionBlock(Strict):
    kind: Literal["section"] = Field(description="A titled deep-dive section, optionally ending in a pause.")
    id: Id = Field(description="Stable id of the section.")
    label: Text | None = Field(None, description="Small label above the title, e.g. 'Part 01' or 'Depth'.")
    title: Text = Field(description="Section title.")
    body: Markdown = Field(description="Section text.")
    source: Text | None = Field(None, description="Where the material comes from, for depth sections.")
    figures: list[FigureRef] = Field(
        default_factory=list, description="Figures drawn at publish time, shown after the text, before the pause."
    )
    your_run: LabId | None = Field(
        None,
        description="A lab whose latest successful run by the learner is summarised beside this section's worked "
        "example (their own numbers, linked to the job), or a nudge to run it.",
    )
    pause: Pause | None = Field(None, description="The 'pause and reason' prompt that closes the section.")


class FigureBlock(FigureRef):
    kind: Literal["figure"] = Field(description="A figure drawn by code when the lesson version is built.")


class TraceStep(Strict):
    id: Id = Field(description="Stable id of the trace step.")
    label: Text = Field(description="Short tag, e.g. 'Recipe'.")
    title: Text = Field(description="What happens at these lines.")
    body: Markdown = Field(description="Why it matters.")
    lines: list[int] = Field(min_length=1, description="1-based line numbers of the block's `code` this step explains.")


class CodeTraceBlock(Strict):
    kind: Literal["code_trace"] = Field(description="A program model with trace steps linked to its lines.")
    id: Id = Field(description="Stable id of the trace.")
    title: Text = Field(description="Caption of the program model.")
    language: Literal["python", "cpp", "cuda", "text", "bash"] = Field(
        "python", description="Language used for highlighting."
    )
    code: str = Field(min_length=1, description="The code; line N is what a step's `lines` refer to.")
    steps: list[TraceStep] = Field(min_length=1, description="Trace steps, in reading order.")

    @property
    def code_lines(self) -> list[str]:
        return self.code.rstrip("\n").split("\n")

    # Line numbers are checked against `code` by the loader, which can point at the exact step.


class TimelineBlock(Strict):
    kind: Literal["timeline"] = Field(description="Hardware/ecosystem eras, taken from atlas.yaml by id.")
    eras: list[Id] = Field(min_length=1, description="Ids of `hardware_ecosystem` entries in atlas.yaml.")


class QuestionsBlock(Strict):
    kind: Literal["questions"] = Field(description="Practice questions, taken from questions/ by id.")
    ids: list[Id] = Field(min_length=1, description="Question ids (file stems under questions/), in order.")


Block = Annotated[
    MarkdownBlock
    | CalloutBlock
    | ObjectivesBlock
    | StepsBlock
    | ConceptCardsBlock
    | SectionBlock
    | CodeTraceBlock
    | TimelineBlock
    | QuestionsBlock
    | FigureBlock,
    Field(discriminator="kind"),
]


class PartFile(Strict):
    """`parts/<part-id>.yaml`: one timed part of the lesson."""

    number: int = Field(ge=1, le=20, description="Position of the part; numbers run 1, 2, 3… without gaps.")
    title: Text = Field(description="Short title used in the pacing list, e.g. 'Mental model'.")
    heading: Text | None = Field(None, description="Longer heading on the part itself; defaults to the title.")
    minutes: int | None = Field(
        None,
        ge=1,
        le=240,
        description="Leave it out: the loader computes it from the part's content (app/content/timing.py). "
        "A value written here must equal that formula's (the tests check shipped lessons). The read time is the sum.",
    )
    intro: Markdown | None = Field(None, description="Optional text before the blocks.")
    blocks: list[Block] = Field(default_factory=list, description="The part's content, in order.")


class Part(PartFile):
    id: Id = Field(description="The part id: its file stem (set by the loader).")
    optional_minutes: int = Field(
        0, ge=0, description="Minutes of its optional-depth sections, set by the loader (app/content/timing.py)."
    )
