"""Lab parameter forms, built from the lab catalog: each lab's pydantic `Params` model (the one source
of bounds) and its backends.

`form_fields(lab)` describes the parameter inputs and `backend_field(lab, host)` the backend choice; each
field carries the fieldset it is shown in (`group`, its legend) and whether it is a rarely changed knob folded
under "More settings" (`advanced`), both declared next to the field in the lab's params module;
`parse_form(lab, form)` turns submitted strings into typed values and checks them against `Params`,
reporting every invalid field in one pass, each in the learner's terms ("steps: at least 2, got 1");
the job service then checks the run against this host with the catalog's rules, so the form, the API and
the CLI share one rulebook (the API and the CLI word errors with labs.params.describe_error).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from pydantic import ValidationError
from pydantic_core.core_schema import ErrorType

from app.core.digits import ANY, decimal_number, whole_number
from app.services.jobs.labhost import HostCapacity
from labs import api, catalog

BOUND_DIGITS = 15  # significant digits of a field's limit: all a float has, so 0.1 reads 0.1 and 5000 reads 5,000


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
    group: str = ""  # the legend of the fieldset the form shows it in ("" for a lab whose form is one group)
    advanced: bool = False  # folded under the group's "More settings" until it differs from its default

    @property
    def label_in_sentence(self) -> str:
        """The label inside a list of them: "Seed" reads "seed", "FP8 format" stays as it is."""
        head = self.label[:2]
        return self.label[0].lower() + self.label[1:] if head.istitle() and head.isalpha() else self.label

    def changed(self, values: Mapping[str, Any]) -> bool:
        """Whether the form shows this field with something other than its default: a refused form's typed value
        (strings, as the browser sent them) or a prefilled run's params. A folded group holding one opens, so
        nothing a learner set sits hidden. An empty `values` is a fresh form: every field at its default."""
        if not values:
            return False
        value = values.get(self.name)
        if self.kind == "bool":  # ticked as the template ticks it; an unticked box is not sent at all
            return bool(value) != bool(self.default)
        if self.name not in values:
            return False  # not sent: the form shows the default
        if self.kind == "multi_choice":
            chosen = [value] if isinstance(value, str) else list(value or [])
            default = self.default if isinstance(self.default, list) else []
            return sorted(map(str, chosen)) != sorted(map(str, default))
        shown = _text(value).strip()
        if shown == self.default_text:
            return False
        if shown == "" or self.default_text == "":
            return True
        try:
            return _parse(self, shown) != _parse(self, self.default_text)
        except ValueError:
            return True  # not a value at all: certainly not the default

    @property
    def name_differs(self) -> bool:
        """The label is not just the parameter's name: the form shows the name too, as messages, job
        cards and the command line use it ("d_model: must divide by n_heads")."""
        return self.label.lower() != self.name.replace("_", " ")

    @property
    def range_text(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(map(str, self.choices))
        if self.kind == "multi_choice":
            return "one or more of " + ", ".join(map(str, self.choices))
        lo, hi, in_list = self.minimum, self.maximum, self.kind == "int_list"
        if lo is not None and hi is not None:
            text = f"{_num(lo, in_list=in_list)} to {_num(hi, in_list=in_list)}"
        elif lo is not None:
            text = f"at least {_num(lo, in_list=in_list)}"
        elif hi is not None:
            text = f"at most {_num(hi, in_list=in_list)}"
        else:
            text = ""
        if self.kind == "int_list":
            text = "comma-separated whole numbers" + (f", each {text}" if text else "")
        if self.nullable:
            text += ("; " if text else "") + "leave empty for none"
        return text

    @property
    def default_text(self) -> str:
        return _text(self.default)


def _text(value: Any) -> str:
    """A value as the form's text input shows it: a list "1, 2, 4", none as empty."""
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value))
    return str(value)


def _num(v: float, *, in_list: bool = False) -> str:
    """A bound as labs/words.py writes numbers, to every digit it has: a limit is exact, never rounded. In a
    comma-separated list field a thousands separator would read as two values, so it has none."""
    return api.number(v, BOUND_DIGITS, grouping=not in_list)


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
        group=str(prop.get("group", "")),
        advanced=bool(prop.get("advanced", False)),
    )


def form_fields(lab: str) -> list[FormField]:
    schema = catalog.get(lab).params.model_json_schema()
    defs = schema.get("$defs", {})
    return [_field_from_schema(n, p, defs) for n, p in schema.get("properties", {}).items()]


def backend_field(lab: str, host: HostCapacity) -> FormField:
    """The backend choice: auto, then the backends the lab has a real path for (catalog order, best first).
    It joins the lab's first group (the run itself: steps, seed), after that group's own fields."""
    spec = catalog.get(lab)
    auto = host.resolve(spec, "auto")
    params = form_fields(lab)
    return FormField(
        name="backend",
        label="Backend",
        kind="choice",
        default="auto",
        description=f"auto picks the best this course's workers have: {auto} here "
        f"(this host runs {', '.join(host.backends)}).",
        choices=["auto", *spec.backends],
        group=params[0].group if params else "",
    )


def parse_form(lab: str, form: Any) -> tuple[dict, dict[str, str]]:
    """Return (params, errors-by-field): every field that does not parse or that `Params` refuses, at once.

    `form` is Starlette's FormData (or a dict); multi-choice fields read every submitted value. The lab's
    rules across fields and the host's limits come after, in the job service, once every field is valid.
    """
    fields = {f.name: f for f in form_fields(lab)}
    params: dict = {}
    errors: dict[str, str] = {}
    for f in fields.values():
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
            params[f.name] = _parse(f, raw)
        except ValueError:
            errors[f.name] = f"{f.name}: {_expected(f)}, got {raw!r}"
    try:
        catalog.get(lab).params.model_validate(params)
    except ValidationError as exc:
        for name, message in field_errors(exc, fields).items():
            errors.setdefault(name, message)  # a field that did not parse keeps that message
    return params, errors


def _parse(f: FormField, raw: str) -> Any:
    """ASCII digits only (app/core/digits.py): the model checks each value's range; ValueError for anything else."""
    if f.kind == "int":
        return _int(raw.replace(",", "").replace("_", "") if _thousands(raw) else raw)
    if f.kind == "float":
        value = decimal_number(raw)
        if value is None:
            raise ValueError(raw)
        return value
    if f.kind == "int_list":
        # "1, 2, 4", "1 2 4" and "1;2;4" all mean three degrees; an empty item ("1,,2") is a typo, not a value
        if re.search(r"[,;]\s*[,;]", raw):
            raise ValueError(raw)
        return [_int(p) for p in re.split(r"[,;\s]+", raw) if p]
    return raw


def _int(raw: str) -> int:
    value = whole_number(raw, lo=-ANY, hi=ANY, signed=True)
    if value is None:
        raise ValueError(raw)
    return value


def _thousands(raw: str) -> bool:
    """'16,384' and '16_384' are one number to a learner typing a size."""
    digits = raw.lstrip("+-")
    groups = digits.replace("_", ",").split(",")
    return len(groups) > 1 and 1 <= len(groups[0]) <= 3 and all(re.fullmatch("[0-9]{3}", g) for g in groups[1:])


def _expected(f: FormField) -> str:
    what = {
        "int": "a whole number",
        "float": "a number",
        "int_list": "whole numbers separated by commas, e.g. 1, 2, 4",
        "choice": "one of " + ", ".join(map(str, f.choices)),
    }.get(f.kind, "a value")
    limits = f.range_text if f.kind in ("int", "float") and f.range_text else ""
    return f"{what}{' from ' + limits if limits and ' to ' in limits else (', ' + limits if limits else '')}"


def _bound(ctx: dict, *, in_list: bool = False) -> str:
    for key, words in (("ge", "at least"), ("gt", "more than"), ("le", "at most"), ("lt", "less than")):
        if key in ctx:
            return f"{words} {_num(ctx[key], in_list=in_list)}"
    return ""


# pydantic's own error types; any other type is a lab's rule (a PydanticCustomError such as "cross_field").
_PYDANTIC_ERROR_TYPES = frozenset(get_args(ErrorType))
# Errors a validator raises with its own words: pydantic prefixes the text ("Value error, ...").
_VALIDATOR_PREFIXES = {"value_error": "Value error, ", "assertion_error": "Assertion failed, "}


def _rule_message(err: Any) -> str | None:
    """The lab's own words for a rule its params model checks (e.g. fields that do not fit together), or None
    for pydantic's built-in checks, which are worded from the field's bounds instead."""
    kind, msg = err["type"], str(err.get("msg", ""))
    if kind in _VALIDATOR_PREFIXES:
        prefix = _VALIDATOR_PREFIXES[kind]
        return msg[len(prefix) :] if msg.startswith(prefix) else msg
    if kind not in _PYDANTIC_ERROR_TYPES:
        return msg
    return None


def field_errors(exc: ValidationError, fields: dict[str, FormField] | None = None) -> dict[str, str]:
    """pydantic's errors as one message per form field, in the learner's terms:
    'steps: at least 2, got 1', 'degrees: each at most 8, got 9', 'recipe: one of delayed, current, got x',
    and a rule across fields in the params model's own words: 'n_heads: a divisor of d_model=18 (...), got 4'."""
    out: dict[str, str] = {}
    for err in exc.errors():
        loc = err.get("loc", ())
        name = str(loc[0]) if loc else "params"
        if name in out:
            continue
        value, kind, ctx = err.get("input"), err["type"], err.get("ctx") or {}
        item = len(loc) > 1 and isinstance(loc[1], int)  # one value of a list, e.g. a TP degree
        f = (fields or {}).get(name)
        rule = _rule_message(err)
        if rule is not None:
            message = f"{name}: {rule}" + (f", got {_shown(value)}" if loc and value is not None else "")
        elif kind == "extra_forbidden":
            message = f"{name}: not a parameter of this lab"
        elif kind == "missing":
            message = f"{name}: required"
        elif _bound(ctx):
            message = f"{name}: {'each ' if item else ''}{_bound(ctx, in_list=item)}, got {_shown(value, in_list=item)}"
        elif kind in ("too_short", "too_long"):
            n = ctx.get("min_length" if kind == "too_short" else "max_length")
            words = "at least" if kind == "too_short" else "at most"
            message = f"{name}: {words} {n} value{'s' if n != 1 else ''}, got {ctx.get('actual_length', '?')}"
        elif kind in ("literal_error", "enum"):
            message = f"{name}: one of {ctx.get('expected', '')}, got {_shown(value)}".replace("'", "")
        elif f is not None:
            message = f"{name}: {_expected(f)}, got {_shown(value)}"
        else:
            message = f"{name}: {err['msg']}"
        out[name] = message
    return out


def _shown(value: Any, *, in_list: bool = False) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _num(value, in_list=in_list)
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


# --------------------------------------------------------------------------- presets and run length


@dataclass(frozen=True)
class PresetLink:
    """One of a lab's presets as the form's row of links shows it (templates/labs/_presets.html)."""

    key: str
    name: str
    why: str
    href: str  # the lab page with ?preset=KEY: prefills the form without JavaScript
    active: bool  # the preset the form is showing now


def preset_links(lab: str, chosen: str | None = None) -> list[PresetLink]:
    spec = catalog.get(lab)
    return [
        PresetLink(p.key, p.name, p.why, f"/labs/{lab}?preset={p.key}#lab-form", p.key == chosen) for p in spec.presets
    ]


def preset_values(lab: str, key: str) -> dict[str, Any]:
    """The form's values for preset `key`: every parameter as the form shows it (a list "1, 2, 4", none as empty,
    a multiple choice as its ticked values, a box as ticked or not), the preset's fields over the lab's defaults.
    KeyError (naming the lab's presets) for an unknown key."""
    spec = catalog.get(lab)
    params = spec.params.model_validate(dict(spec.preset(key).params))
    values: dict[str, Any] = {}
    for f in form_fields(lab):
        v = getattr(params, f.name)
        if f.kind == "multi_choice":
            values[f.name] = [str(c) for c in (v or [])]
        elif f.kind == "bool":
            values[f.name] = bool(v)
        else:
            values[f.name] = _text(v)
    return values


def duration_text(seconds: float | None, backend: str, basis: str) -> str:
    """What the form says about a run's length: 'A run takes about 40 s on this server's CPU (...)'."""
    if seconds is None:
        return ""
    where = "this server's CPU" if backend == "cpu" else f"this server's GPU ({backend})"
    step = 10 if seconds < 600 else 60  # an estimate, not a measurement: no false precision
    shown = max(step, round(seconds / step) * step)
    return f"A run takes about {api.duration(shown)} on {where} ({basis})."
