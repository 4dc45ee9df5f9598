"""`rubric.yaml`: how a grader scores the lab report."""

from __future__ import annotations

from pydantic import Field, model_validator

from .base import Id, Markdown, Strict, Text


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
