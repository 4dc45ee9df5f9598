"""What the JSON API answers when it refuses, as models the OpenAPI document shows (app/web/openapi.py).

Every refusal is `{"detail": "..."}` in words (app/web/factory.py `_error_response`); a refusal of inputs adds
`errors`, one per field, naming it and what it allows, and some add more (the job form's `offer`, a quota's name).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Problem(BaseModel):
    """A refusal, said in words."""

    model_config = ConfigDict(extra="allow")  # e.g. `limit` and `frees_at` at a limit, `quota` over a quota
    detail: str = Field(description="what was refused and why, in words")


class FieldProblem(BaseModel):
    field: str = Field(description="the input it is about, e.g. `steps` (a lab parameter) or `backend`")
    message: str = Field(description="what is wrong with it and what it allows")
    detail: str | None = Field(None, description="the arithmetic behind the refusal, in lines, where there is some")


class Refusal(Problem):
    """Inputs refused: nothing was changed; `errors` names every bad input at once."""

    errors: list[FieldProblem] = Field(default_factory=list)


def responses(**described: str) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: each status (as `s409="why"`) answered with a Problem."""
    return {int(code.removeprefix("s")): {"model": Problem, "description": why} for code, why in described.items()}
