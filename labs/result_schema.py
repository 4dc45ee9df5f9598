"""result.json's contract, from the result models: validation, and the generated JSON Schema file.

One envelope per lab (labs.result_common.Envelope + the `lab` tag + the lab's Params + its results
model from the catalog), told apart by `lab`. `validate()` checks a result against those models;
`labs/schema/result.schema.json` is generated from the same models for readers outside Python:

    python -m labs schema            # rewrite labs/schema/result.schema.json after changing a model
    python -m labs schema --check    # exit 1 when the committed file is stale (a test checks this too)

Torch-free, like the catalog: the web tier validates uploaded bundles with it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, Union, cast

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.json_schema import GenerateJsonSchema

from labs import SCHEMA_VERSION, catalog
from labs.result_common import STRICT, Envelope, LabResults

SCHEMA_PATH = Path(__file__).parent / "schema" / "result.schema.json"
SCHEMA_ID = "https://course.local/labs/result.schema.json"
REGENERATE = "python -m labs schema"


def _class_name(lab: str) -> str:
    """fp8-step -> Fp8StepResultJson: the model of that lab's whole result.json."""
    return "".join(part.capitalize() for part in lab.split("-")) + "ResultJson"


def envelope_model(spec: catalog.LabSpec) -> type[Envelope]:
    """The whole result.json of one lab: the shared envelope around its Params and results model."""
    return create_model(
        _class_name(spec.name),
        __base__=Envelope,
        __doc__=f"result.json of {spec.name}: {spec.title}",
        lab=(cast(Any, Literal)[spec.name], ...),  # a Literal built from the catalog at run time
        params=(spec.params, ...),
        results=(spec.result, ...),
    )


class _AnyResults(LabResults):
    """Only the common part of `results`; used to keep checking a result whose `lab` is unknown."""

    model_config = STRICT | ConfigDict(extra="allow")


class _AnyLab(Envelope):
    lab: str
    params: dict[str, Any]
    results: _AnyResults


@cache
def _adapter(labs: tuple[str, ...] | None = None) -> TypeAdapter[Any]:
    """The tagged union of `labs`' envelopes (None: every lab of the catalog)."""
    models = tuple(envelope_model(catalog.get(name)) for name in (catalog.names() if labs is None else labs))
    union = cast(Any, Union)[models]  # one member per lab, known only at run time
    tagged: Any = Annotated[union, Field(discriminator="lab")]
    return TypeAdapter(tagged)


# ---- validation -------------------------------------------------------------------------------


def _say(err: Any) -> str:
    """One pydantic error in the reader's terms: what was wrong, and the value when it is short."""
    kind, value = err["type"], err.get("input")
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "not a field of this result (unknown key)"
    msg = err["msg"] or kind
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
    msg = msg.removeprefix("Input ")
    msg = msg[0].lower() + msg[1:]
    if isinstance(value, (bool, int, float, str)) or value is None:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        msg += f"; got {shown}"
    return msg


def _lines(exc: ValidationError, *, skip_first: bool) -> list[str]:
    out = []
    for err in exc.errors(include_url=False):
        loc = list(err["loc"])[1 if skip_first else 0 :]
        where = "/".join(str(p) for p in loc) or "(top level)"
        out.append(f"{where}: {_say(err)}")
    return out


def validate(result: Any) -> list[str]:
    """Why `result` is not a valid result.json, one readable line per problem naming its path; [] when valid.

    The result is checked as the JSON it will be written as (tuples become lists).
    """
    try:
        data = json.loads(json.dumps(result, allow_nan=True))
    except (TypeError, ValueError) as exc:
        return [f"(top level): not representable as JSON ({exc})"]
    labs = list(catalog.LABS)
    if not isinstance(data, dict):
        return [f"(top level): expected a JSON object, got {type(data).__name__}"]
    if data.get("lab") not in labs:
        # No lab model to check against: say so, then check everything the labs share.
        lab = data.get("lab")
        head = "lab: required" if "lab" not in data else f"lab: got {lab!r}, expected one of {', '.join(labs)}"
        try:
            _AnyLab.model_validate(data)
        except ValidationError as exc:
            return [head] + [line for line in _lines(exc, skip_first=False) if not line.startswith("lab:")]
        return [head]
    try:
        _adapter().validate_python(data)
    except ValidationError as exc:
        return _lines(exc, skip_first=True)  # the first loc element is the `lab` tag
    return []


# ---- the JSON Schema file ----------------------------------------------------------------------


class _Generator(GenerateJsonSchema):
    """Pydantic's generator without a title on every property (the file stays readable)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def json_schema() -> dict:
    """The committed file's schema: the course's own labs, whatever COURSE_LAB_PATH adds where it is generated."""
    own = tuple(name for name in catalog.names() if catalog.ships_with_course(name))
    body = _adapter(own).json_schema(schema_generator=_Generator)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "Lab result bundle (result.json)",
        "description": (
            f"Written by `python -m labs run`. GENERATED from the result models in labs/ (labs/result_common.py "
            f"and labs/<lab>/result.py) by `{REGENERATE}`; do not edit by hand. schema_version "
            f"({SCHEMA_VERSION}) changes when a field's meaning or shape changes."
        ),
        **body,
    }


def render() -> str:
    """The file's exact text: stable key order from the models, two-space indent, a final newline."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def write(path: Path = SCHEMA_PATH) -> bool:
    """Write the generated schema; True when the file changed."""
    text = render()
    if path.is_file() and path.read_text() == text:
        return False
    path.write_text(text)
    return True


def is_current(path: Path = SCHEMA_PATH) -> bool:
    return path.is_file() and path.read_text() == render()


__all__ = ["SCHEMA_PATH", "envelope_model", "is_current", "json_schema", "render", "validate", "write"]
