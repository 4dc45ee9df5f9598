"""Lab parameter forms, built from the lab catalog: each lab's pydantic `Params` model (the one source
of bounds) and its backends.

`form_fields(lab)` describes the parameter inputs and `backend_field(lab, host)` the backend choice;
`parse_form(lab, form)` turns submitted strings into typed values that `Params` then validates, and the
job service checks the run against this host with the catalog's rules, so the form, the API and the CLI
share one rulebook.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.services.labhost import HostCapacity
from labs import catalog


@dataclass
class FormField:
    name: str
    label: str
    kind: str  # int | float | bool | choice | int_list | multi_choice | text
    default: object = None
    description: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: list = field(default_factory=list)
    nullable: bool = False

    @property
    def range_text(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(map(str, self.choices))
        if self.kind == "multi_choice":
            return "one or more of " + ", ".join(map(str, self.choices))
        lo, hi = self.minimum, self.maximum
        if lo is not None and hi is not None:
            text = f"{_num(lo)} to {_num(hi)}"
        elif lo is not None:
            text = f"at least {_num(lo)}"
        elif hi is not None:
            text = f"at most {_num(hi)}"
        else:
            text = ""
        if self.kind == "int_list":
            text = "comma-separated whole numbers" + (f", each {text}" if text else "")
        if self.nullable:
            text += ("; " if text else "") + "leave empty for none"
        return text

    @property
    def default_text(self) -> str:
        if self.default is None:
            return ""
        if isinstance(self.default, list):
            return ", ".join(map(str, self.default))
        return str(self.default)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def _field_from_schema(name: str, prop: dict, defs: dict) -> FormField:
    nullable = False
    if "anyOf" in prop:
        options = [p for p in prop["anyOf"] if p.get("type") != "null"]
        nullable = len(options) < len(prop["anyOf"])
        merged = dict(options[0]) if options else {}
        merged.update({k: v for k, v in prop.items() if k != "anyOf"})
        prop = merged
    if "$ref" in prop:
        prop = {**defs[prop["$ref"].split("/")[-1]], **{k: v for k, v in prop.items() if k != "$ref"}}
    kind = {"integer": "int", "number": "float", "boolean": "bool", "array": "int_list"}.get(
        str(prop.get("type")), "text"
    )
    choices = prop.get("enum") or ([prop["const"]] if "const" in prop else [])
    if choices:
        kind = "choice"
    items = prop.get("items", {})
    if "$ref" in items:
        items = defs[items["$ref"].split("/")[-1]]
    if kind == "int_list" and items.get("enum"):
        kind, choices = "multi_choice", list(items["enum"])
    return FormField(
        name=name,
        label=prop.get("title") or name.replace("_", " "),
        kind=kind,
        default=prop.get("default"),
        description=prop.get("description", ""),
        minimum=prop.get("minimum", items.get("minimum")),
        maximum=prop.get("maximum", items.get("maximum")),
        choices=list(choices),
        nullable=nullable,
    )


def form_fields(lab: str) -> list[FormField]:
    schema = catalog.get(lab).params.model_json_schema()
    defs = schema.get("$defs", {})
    return [_field_from_schema(n, p, defs) for n, p in schema.get("properties", {}).items()]


def backend_field(lab: str, host: HostCapacity) -> FormField:
    """The backend choice: auto, then the backends the lab has a real path for (catalog order, best first)."""
    spec = catalog.get(lab)
    auto = host.resolve(spec, "auto")
    return FormField(
        name="backend",
        label="Backend",
        kind="choice",
        default="auto",
        description=f"auto picks the best this course's workers have: {auto} here "
        f"(this host runs {', '.join(host.backends)}).",
        choices=["auto", *spec.backends],
    )


def parse_form(lab: str, form: Any) -> tuple[dict, dict[str, str]]:
    """Return (params, errors-by-field) from submitted strings; Params validation comes after.

    `form` is Starlette's FormData (or a dict); multi-choice fields read every submitted value.
    """
    params: dict = {}
    errors: dict[str, str] = {}
    for f in form_fields(lab):
        if f.kind == "multi_choice":
            if hasattr(form, "getlist") and f"{f.name}__present" in form:
                params[f.name] = [v for v in form.getlist(f.name) if isinstance(v, str)]
            continue
        raw = form.get(f.name)
        if f.kind == "bool":
            params[f.name] = raw in ("on", "true", "1")
            continue
        if raw is None:
            continue  # not submitted: the model's default applies
        raw = raw.strip()
        if raw == "":
            if f.nullable:
                params[f.name] = None
            continue
        try:
            if f.kind == "int":
                params[f.name] = int(raw)
            elif f.kind == "float":
                params[f.name] = float(raw)
            elif f.kind == "int_list":
                params[f.name] = [int(p) for p in raw.replace(" ", "").split(",") if p]
            else:
                params[f.name] = raw
        except ValueError:
            errors[f.name] = f"{f.name}: got {raw!r}, expected {f.range_text or 'a ' + f.kind}"
    return params, errors
