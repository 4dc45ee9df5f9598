"""The assembled lesson the loader builds from a folder: every file validated, figures drawn."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .atlas import Atlas, Era
from .header import LessonFile
from .lab import Lab
from .parts import Objective, Part, Pause
from .questions import QuestionFile
from .rubric import Rubric


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
        """Computed, never typed: the sum of the parts' core minutes (app/content/timing.py)."""
        return sum(p.minutes or 0 for p in self.parts)

    @property
    def builds_on(self) -> list[str]:
        """The prerequisites that are lessons of the path ("Lesson 06 · …", "Lessons 03–04"), in order."""
        return [p for p in self.header.prerequisites if p.startswith(("Lesson ", "Lessons "))]

    @property
    def optional_minutes(self) -> int:
        """The optional-depth sections' minutes, outside the core read time."""
        return sum(p.optional_minutes for p in self.parts)

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
