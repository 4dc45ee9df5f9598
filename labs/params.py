"""Parameter models for labs: strict (unknown keys are errors) with one-line reasons."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.config import JsonDict

T = TypeVar("T")


class LabParams(BaseModel):
    """Base for every lab's parameters. Subclasses give each field a bound and a description."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# ---- fields and rules every multi-rank lab declares alike ------------------------------------------------------
# Factories rather than a base model: pydantic puts a base model's fields first, and a lab's form shows its fields in
# declaration order (app/services/jobs/forms.py), so each lab keeps these where its form wants them. `group` is the
# form's fieldset (json_schema_extra), as every field names one. labs/parallel/dist.py `run_ranks` reads them.


def ranks_field(default: int, *, description: str, group: JsonDict, title: str = "Ranks") -> Any:
    """`ranks`: processes started by labs/parallel/dist.py, one per device. Two at least (one rank shares nothing);
    eight at most, the GPUs of one node."""
    return Field(default, ge=2, le=8, description=description, title=title, json_schema_extra=group)


def seed_field(description: str, group: JsonDict) -> Any:
    """`seed`: what it seeds, in `description`; any non-negative 32-bit integer, as torch.manual_seed takes."""
    return Field(0, ge=0, le=2**31 - 1, description=description, json_schema_extra=group)


def rank_timeout_field(group: JsonDict) -> Any:
    """`rank_timeout_s`: labs/parallel/dist.py stops ranks still running then, and the job fails with the reason."""
    return Field(
        300,
        ge=10,
        le=1800,
        description="A rank that has not finished by then is stopped and the job fails",
        title="Rank timeout (s)",
        json_schema_extra=group,
    )


def in_order(choices: Sequence[T]) -> AfterValidator:
    """A list field of `choices` (schedules, strategies, collectives): each chosen one once, in `choices`' order,
    however the form or the JSON listed them, since that is the order the lab runs them and the page shows them.

        schedules: Annotated[list[Schedule], in_order(SCHEDULES)] = Field(...)
    """
    return AfterValidator(lambda chosen: [c for c in choices if c in chosen])


@dataclass(frozen=True)
class Preset:
    """A named run a lesson's pause asks for: the lab's params that show one thing, declared as data.

    `name` is what the form's button and the lesson's link say ("Spike at step 20"); `why` is one line on what
    the run shows; `params` are the fields that differ from the lab's defaults (validated like a submission:
    tests/labs/test_presets.py). The form prefills from `/labs/<lab>?preset=<key>`, without JavaScript.
    """

    name: str
    why: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The name as a URL word: "Spike at step 20" -> "spike-at-step-20"."""
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")


def describe_error(exc: ValidationError) -> list[dict]:
    """Turn pydantic's errors into [{field, message}] in the user's terms."""
    out = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "params"
        value = err.get("input")
        kind = err["type"]
        if kind == "extra_forbidden":
            msg = f"unknown parameter {field!r}"
        elif kind == "missing":
            msg = f"{field}: required"
        else:
            ctx = err.get("ctx") or {}
            bounds = []
            for key, word in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
                if key in ctx:
                    bounds.append(f"{word} {ctx[key]}")
            expected = " and ".join(bounds) if bounds else err["msg"].lower()
            if "expected" in ctx:
                expected = f"one of {ctx['expected']}"
            msg = f"{field}: got {value!r}, expected {expected}"
        out.append({"field": field, "message": msg})
    return out


def one_line(exc: ValidationError) -> str:
    return "; ".join(e["message"] for e in describe_error(exc))
