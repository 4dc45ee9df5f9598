"""Parameter models for labs: strict (unknown keys are errors) with one-line reasons."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class LabParams(BaseModel):
    """Base for every lab's parameters. Subclasses give each field a bound and a description."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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
