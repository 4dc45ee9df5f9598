"""The lesson content schema: what an author may write in `lessons/<lesson-id>/`.

Layout of one lesson folder (the lesson id is the folder name, a part or question id is its file stem):

    lessons/<lesson-id>/
        lesson.yaml            LessonFile: header, computed values, references
        parts/<part-id>.yaml   PartFile: one timed part, ordered by its `number`
        questions/<q-id>.yaml  Question: single_choice | free_response | numeric
        atlas.yaml             Atlas (optional): vocabulary, worked example, playbook, hardware eras
        lab.yaml               Lab (optional): the hands-on lab and its evidence of completion
        rubric.yaml            Rubric (optional, needs lab.yaml): how a grader scores the lab report

Every model forbids unknown keys, so a misspelt field is an error rather than silently ignored.
Markdown fields may contain `$…$` / `$$…$$` math and `{{calc:NAME.FIELD|FORMAT}}` placeholders
(see app/content/calc.py); numeric question prompts may also contain `{{param|FORMAT}}`.
Cross-file checks (question ids a part lists, era ids, code-trace line numbers, generator names)
live in the loader, which knows every file of a lesson.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from labs import catalog

ID_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
Id = Annotated[str, Field(pattern=ID_PATTERN, description="Lowercase id: letters, digits and dashes.")]
Markdown = Annotated[str, Field(min_length=1, description="Markdown text; `$…$` math allowed.")]
Text = Annotated[str, Field(min_length=1, description="Plain one-line text.")]


def _known_lab(name: str) -> str:
    """A lab name from labs/catalog.py, the one place a lab's name is written."""
    known = catalog.names()
    if name not in known:
        raise ValueError(f"a lab from labs/catalog.py ({', '.join(known)}); found {name!r}")
    return name


#: Labs a lesson may link to: the labs `python -m labs run` knows, read from the torch-free catalog.
LabId = Annotated[
    str,
    AfterValidator(_known_lab),
    Field(description="Name of a lab in labs/catalog.py.", json_schema_extra={"enum": catalog.names()}),
]


class Strict(BaseModel):
    """Base for every content model: unknown keys are errors, values are not coerced across types."""

    model_config = ConfigDict(extra="forbid", frozen=False, str_strip_whitespace=True)


# ---------------------------------------------------------------- lesson.yaml


class CoursePath(Strict):
    name: Text = Field(description="Name of the course path, e.g. 'Parallel Horizons'.")
    number: int = Field(ge=1, le=99, description="Position of the path in the course (shown as two digits).")
    items: list[Text] = Field(min_length=1, description="Topics the path covers, shown as tags.")
    emphasis: Markdown | None = Field(None, description="What the path emphasises, one or two sentences.")
    note: Text | None = Field(None, description="Small print shown with the path, e.g. an independence disclaimer.")


class Anchor(Strict):
    year: int = Field(ge=1940, le=2100, description="Year of the historical anchor.")
    label: Text = Field(description="What happened that year, e.g. 'Hopper FP8 / Transformer Engine'.")


class Computed(Strict):
    calc: Text = Field(description="Name of a calculation in app/content/calc.py's registry, e.g. 'fp8_scale'.")
    args: dict[str, float | int | str | list[float]] = Field(
        default_factory=dict, description="Keyword arguments passed to the calculation."
    )
    format: Text = Field(".4g", description="Default Python format spec for the numbers it produces.")


class Reference(Strict):
    title: Text = Field(description="Title of the page or paper.")
    covers: Text = Field(description="What the learner finds there, in a few words.")
    url: str = Field(pattern=r"^https://", description="Address of the page (https only).")
    official: bool = Field(False, description="True for vendor or project documentation.")


class LessonFile(Strict):
    """`lesson.yaml`: the header of the lesson page and lesson-wide data."""

    title: Text = Field(description="Lesson title, e.g. 'Transformer Scaling'.")
    number: int = Field(ge=1, le=99, description="Lesson number, unique in the course; shown as two digits.")
    path: CoursePath = Field(description="The course path this lesson belongs to.")
    anchor: Anchor | None = Field(None, description="Historical anchor shown in the header.")
    summary: Markdown = Field(description="One-paragraph promise of the lesson.")
    study_note: Markdown | None = Field(None, description="How to study it (e.g. write answers down as you go).")
    connects: Markdown | None = Field(None, description="How this lesson connects to tools and labs.")
    prerequisites: list[Text] = Field(default_factory=list, description="Suggested prerequisites.")
    tools: list[Text] = Field(default_factory=list, description="Practice tools the lesson uses.")
    remember: Text | None = Field(None, description="The one sentence to remember first.")
    interactive: list[Id] = Field(
        default_factory=list, description="Ids of interactive tools the 'play' link opens, e.g. 'fp8-range'."
    )
    computed: dict[Id, Computed] = Field(
        default_factory=dict,
        description="Named worked numbers, evaluated at load time; used as {{calc:NAME.FIELD}} in any file.",
    )
    references: list[Reference] = Field(default_factory=list, description="'Go deeper' links.")


# ---------------------------------------------------------------- parts and their blocks


class Objective(Strict):
    id: Id = Field(description="Stable id of the objective (progress and audits refer to it).")
    text: Text = Field(description="What the learner can do by the end.")


class PauseCheck(Strict):
    """Where a pause's prediction can be checked: an interactive tool and the inputs that pose the scenario.

    The pause shows a "predict, then check" link to the tool on /play with these inputs and, once the
    learner has answered, the number their answer predicts (app/content/tools.py reads it). The loader
    checks that the tool is one of the lesson's `interactive` tools, that `inputs` are valid inputs of
    it and that `predicts` is one of its outputs.
    """

    tool: Id = Field(description="An id from lesson.yaml `interactive`, e.g. 'overlap-window'.")
    inputs: dict[str, float | int | str | bool] = Field(
        default_factory=dict, description="Tool inputs that set up the pause's scenario."
    )
    predicts: Text | None = Field(None, description="The tool output the learner's prediction is about.")

    def link(self, answer: str | None = None):
        """The /play link for this check, carrying the number `answer` (the learner's text) predicts."""
        from .tools import check_link  # tools imports calc and practice; the schema stays import-light

        return check_link(self.tool, self.inputs, self.predicts, answer)


class Pause(Strict):
    id: Id = Field(description="Stable id; the learner's answer is saved under it before the reveal.")
    prompt: Text = Field(description="The 'pause and reason' question.")
    answer: Markdown = Field(description="Reference answer revealed after the learner writes theirs.")
    check: PauseCheck | None = Field(None, description="Optional: the interactive tool that checks the prediction.")


class FigureRef(Strict):
    id: Id = Field(description="Stable id of the figure, unique in the lesson.")
    name: Text = Field(description="A figure from app/content/figures.py, e.g. 'fp8-number-line'.")
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
    minutes: int = Field(ge=1, le=120, description="Minutes the part is budgeted; the read time is their sum.")
    intro: Markdown | None = Field(None, description="Optional text before the blocks.")
    blocks: list[Block] = Field(default_factory=list, description="The part's content, in order.")


class Part(PartFile):
    id: Id = Field(description="The part id: its file stem (set by the loader).")


# ---------------------------------------------------------------- questions


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


class Numeric(QuestionBase):
    kind: Literal["numeric"] = Field(description="A number with a unit, graded within a tolerance.")
    generator: Text | None = Field(
        None, description="Name of a generator in app/content/practice.py; its params vary per learner."
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


# ---------------------------------------------------------------- atlas.yaml


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


# ---------------------------------------------------------------- lab.yaml


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


# ---------------------------------------------------------------- rubric.yaml


class RubricLevel(Strict):
    id: Id = Field(description="Stable id of the level, e.g. 'complete'; a grade records which level was picked.")
    title: Text = Field(description="Short name shown on the level's button, e.g. 'Complete'.")
    fraction: float = Field(ge=0, le=1, description="Share of the item's points this level earns: 0 to 1.")
    description: Markdown | None = Field(None, description="What work at this level looks like.")


class RubricItem(Strict):
    id: Id = Field(description="Stable id; grades keep the level picked for it, so do not rename once grading started.")
    title: Text = Field(description="The rubric line as graders and learners see it.")
    points: float = Field(gt=0, le=100, description="Points the item is worth; changing it recomputes saved grades.")
    evidence: Id | None = Field(None, description="Id of the lab.yaml evidence item (or stretch) this line judges.")
    question: Id | None = Field(None, description="Id of the lab.yaml report question this line judges.")
    description: Markdown | None = Field(None, description="What the grader looks for.")
    levels: list[RubricLevel] = Field(
        min_length=2, max_length=9, description="Levels from lowest to highest; keys 1-9 pick them while grading."
    )

    @model_validator(mode="after")
    def _levels(self) -> RubricItem:
        ids = [lv.id for lv in self.levels]
        if len(set(ids)) != len(ids):
            raise ValueError(f"unique level ids; found {ids}")
        fractions = [lv.fraction for lv in self.levels]
        if fractions != sorted(fractions) or len(set(fractions)) != len(fractions):
            raise ValueError(f"level fractions strictly increasing, lowest first; found {fractions}")
        if fractions[-1] != 1:
            raise ValueError(f"a last level worth the full points (fraction 1); found {fractions[-1]}")
        return self

    def level(self, level_id: str) -> RubricLevel | None:
        return next((lv for lv in self.levels if lv.id == level_id), None)


class Rubric(Strict):
    """`rubric.yaml`: how graders score the lab report (validated like every lesson file)."""

    note: Markdown | None = Field(None, description="Guidance shown to graders above the rubric.")
    items: list[RubricItem] = Field(min_length=1, max_length=40, description="Rubric lines, in grading order.")

    @model_validator(mode="after")
    def _unique(self) -> Rubric:
        ids = [i.id for i in self.items]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"unique item ids; found {', '.join(dup)} more than once")
        return self

    @property
    def max_points(self) -> float:
        return sum(i.points for i in self.items)

    def item(self, item_id: str) -> RubricItem | None:
        return next((i for i in self.items if i.id == item_id), None)


# ---------------------------------------------------------------- assembled lesson and course


class Rendered(BaseModel):
    """One drawn figure, as stored on a built lesson."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="The registry name it was drawn by.")
    title: str = Field(description="Short title: the SVG <title> and the figure's accessible name.")
    svg: str = Field(description="The SVG document (role=img, <title>, <desc>), every string escaped.")
    narrow_svg: str = Field(
        "",
        description="The same picture laid out for a phone (drawn in place of `svg` on a narrow screen); may be empty.",
    )
    width: int = Field(description="Its viewBox width in px: the page never draws it wider than this.")
    alt: str = Field(description="Text alternative: what the picture shows, in sentences (also the <desc>).")
    columns: list[str] = Field(description="Header of the numbers table.")
    rows: list[list[str]] = Field(description="The figure's numbers as text, one row per item drawn.")
    numbers: dict[str, float] = Field(description="Named numbers the picture shows, checked against calc by tests.")


class Question(BaseModel):
    """A question with its id (file stem); `body` is the validated file."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="File stem under questions/.")
    body: QuestionFile = Field(description="The question as written.")

    @property
    def kind(self) -> str:
        return self.body.kind


class Lesson(BaseModel):
    """One loaded lesson: every file validated, references resolved, computed values filled in."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="Folder name under lessons/.")
    header: LessonFile = Field(description="lesson.yaml.")
    parts: list[Part] = Field(description="Parts ordered by number.")
    questions: dict[str, Question] = Field(default_factory=dict, description="questions/*.yaml by id.")
    atlas: Atlas | None = Field(None, description="atlas.yaml, if present.")
    lab: Lab | None = Field(None, description="lab.yaml, if present.")
    rubric: Rubric | None = Field(None, description="rubric.yaml, if present (needs lab.yaml).")
    values: dict[str, dict[str, float | int | bool]] = Field(
        default_factory=dict, description="Evaluated `computed` entries: name -> field -> value."
    )
    figures: dict[str, Rendered] = Field(
        default_factory=dict, description="Figures drawn when this version was built, by figure id."
    )

    @property
    def title(self) -> str:
        return self.header.title

    @property
    def number(self) -> int:
        return self.header.number

    @property
    def read_time_minutes(self) -> int:
        """Computed, never typed: the sum of the parts' minutes."""
        return sum(p.minutes for p in self.parts)

    def part(self, part_id: str) -> Part | None:
        return next((p for p in self.parts if p.id == part_id), None)

    def era(self, era_id: str) -> Era | None:
        if not self.atlas:
            return None
        return next((e for e in self.atlas.hardware_ecosystem if e.id == era_id), None)

    def blocks(self, kind: str):
        """All blocks of one kind across parts, in order, as (part, block)."""
        return [(p, b) for p in self.parts for b in p.blocks if b.kind == kind]

    @property
    def objectives(self) -> list[Objective]:
        return [o for _, b in self.blocks("objectives") for o in b.items]

    @property
    def pauses(self) -> list[Pause]:
        return [b.pause for _, b in self.blocks("section") if b.pause]


SLUG = re.compile(ID_PATTERN)
