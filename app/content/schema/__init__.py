"""The lesson content schema: what an author may write in `lessons/<lesson-id>/`.

Layout of one lesson folder (the lesson id is the folder name, a part or question id is its file stem),
with the module here that describes each file:

    lessons/<lesson-id>/
        lesson.yaml            LessonFile (header.py): header, computed values, references
        parts/<part-id>.yaml   PartFile (parts.py): one timed part, ordered by its `number`
        questions/<q-id>.yaml  QuestionFile (questions.py): single_choice | free_response | numeric | multi_step
        atlas.yaml             Atlas (atlas.py, optional): vocabulary, worked example, playbook, hardware eras
        lab.yaml               Lab (lab.py, optional): the hands-on lab and its evidence of completion
        rubric.yaml            Rubric (rubric.py, optional, needs lab.yaml): how a grader scores the lab report

base.py holds what they share (the strict base model, ids, Markdown and text fields, lab names) and
lesson.py the assembled Lesson the loader builds. Every model forbids unknown keys, so a misspelt field
is an error rather than silently ignored. Markdown fields may contain `$…$` / `$$…$$` math and
`{{calc:NAME.FIELD|FORMAT}}` placeholders (see app/content/calc/); numeric question prompts may also
contain `{{param|FORMAT}}`. Cross-file checks (question ids a part lists, era ids, code-trace line
numbers, generator names) live in the loader, which knows every file of a lesson.
"""

from .atlas import Atlas, Era, ExampleStep, PlaybookRow, Term, WorkedExample
from .base import ID_PATTERN, MAX_ID, SLUG, Id, LabId, Markdown, Strict, Text, is_id
from .header import Anchor, Computed, CoursePath, LessonFile, Reference
from .lab import Evidence, Lab, LabStep, ReportQuestion, Stretch
from .lesson import Lesson, Question, Rendered
from .parts import (
    Block,
    CalloutBlock,
    CodeTraceBlock,
    ConceptCard,
    ConceptCardsBlock,
    FigureBlock,
    FigureRef,
    MarkdownBlock,
    Objective,
    ObjectivesBlock,
    Part,
    PartFile,
    Pause,
    PauseCheck,
    QuestionsBlock,
    SectionBlock,
    Step,
    StepsBlock,
    TimelineBlock,
    TraceStep,
)
from .questions import (
    Choices,
    ChoiceStep,
    FreeResponse,
    MultiStep,
    NamedMistake,
    Numeric,
    NumericStep,
    Option,
    ParamSpec,
    ProblemStep,
    QuestionBase,
    QuestionFile,
    Range,
    SingleChoice,
    Tolerance,
)
from .rubric import Rubric, RubricItem, RubricLevel

__all__ = [
    "ID_PATTERN",
    "MAX_ID",
    "SLUG",
    "Anchor",
    "Atlas",
    "Block",
    "CalloutBlock",
    "ChoiceStep",
    "Choices",
    "CodeTraceBlock",
    "Computed",
    "ConceptCard",
    "ConceptCardsBlock",
    "CoursePath",
    "Era",
    "Evidence",
    "ExampleStep",
    "FigureBlock",
    "FigureRef",
    "FreeResponse",
    "Id",
    "Lab",
    "LabId",
    "LabStep",
    "Lesson",
    "LessonFile",
    "Markdown",
    "MarkdownBlock",
    "MultiStep",
    "NamedMistake",
    "Numeric",
    "NumericStep",
    "Objective",
    "ObjectivesBlock",
    "Option",
    "ParamSpec",
    "Part",
    "PartFile",
    "Pause",
    "PauseCheck",
    "PlaybookRow",
    "ProblemStep",
    "Question",
    "QuestionBase",
    "QuestionFile",
    "QuestionsBlock",
    "Range",
    "Reference",
    "Rendered",
    "ReportQuestion",
    "Rubric",
    "RubricItem",
    "RubricLevel",
    "SectionBlock",
    "SingleChoice",
    "Step",
    "StepsBlock",
    "Stretch",
    "Strict",
    "Term",
    "Text",
    "TimelineBlock",
    "Tolerance",
    "TraceStep",
    "WorkedExample",
    "is_id",
]
