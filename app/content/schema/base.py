"""What every content model shares: the strict base model, ids, Markdown and text fields, lab names."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

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


SLUG = re.compile(ID_PATTERN)
MAX_ID = 64  # the database's lesson_id columns are String(64)


def is_id(text: str) -> bool:
    """Whether `text` is a whole id (fullmatch: a `$` alone lets a trailing newline through)."""
    return len(text) <= MAX_ID and SLUG.fullmatch(text) is not None
