"""`lesson.yaml`: the lesson header, its computed worked numbers and its references."""

from __future__ import annotations

from pydantic import Field

from .base import Id, Markdown, Strict, Text


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
    calc: Text = Field(description="Name of a calculation in the registry of app/content/calc/, e.g. 'fp8_scale'.")
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
