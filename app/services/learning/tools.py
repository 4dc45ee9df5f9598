"""/play's calculators, served: read a query in the learner's terms, compute, and compare a prediction.

The tools themselves (inputs with labels and bounds, cross-field rules, outputs a learner can predict, and
the arithmetic from app.content.calc / labs.parallel.costmodel) live in app/content/tools.py, where the
lesson loader checks pauses' "predict, then check" data against them. Predictions are labeled as such on
every page that shows one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

from app.content.practice.answers import convert, parse_number
from app.content.tools import TOOLS, Output, Tool, Verdict, judge, label, validate
from app.services.errors import NotFound

__all__ = ["TOOLS", "FormField", "Prediction", "ToolRun", "defaults", "form_fields", "run"]

# Query names that are not tool inputs: what a "predict, then check" link carries.
PREDICT, PREDICTS = "predict", "predicts"


@dataclass(frozen=True)
class FormField:
    name: str
    label: str
    kind: Literal["num", "select", "check"]
    options: tuple[tuple[str, str], ...] = ()  # (value, words) for selects


@dataclass(frozen=True)
class Prediction:
    """The learner's prediction of one output, as they typed it, read in the output's unit and judged."""

    about: str
    output: Output
    typed: str
    value: float | None
    verdict: Verdict | None
    actual: Any  # what the tool computed, in the unit shown


@dataclass
class ToolRun:
    tool: Tool
    values: dict[str, Any]  # what the form shows: the validated inputs, or the text as typed
    result: dict | None
    errors: dict[str, str] = field(default_factory=dict)  # field -> sentence naming it and what it accepts
    prediction: Prediction | None = None

    @property
    def fields(self) -> list[FormField]:
        return form_fields(self.tool)

    def shown(self, name: str) -> str:
        """A field's value as the form shows it: 12.0 as "12", text as typed."""
        v = self.values.get(name)
        if isinstance(v, float):
            return str(int(v)) if v.is_integer() and abs(v) < 1e15 else format(v, ".10g")
        return "" if v is None else str(v)

    def near(self, name: str) -> str:
        """A field's message as shown right under the field: without the label the field already shows."""
        msg = self.errors.get(name, "")
        head = f"{label(self.tool, name)}: " if name in self.tool.model.model_fields else ""
        return msg.removeprefix(head) if head else msg

    def error_list(self) -> list[dict[str, str]]:
        return [{"field": k, "message": v} for k, v in self.errors.items()]


def form_fields(tool: Tool) -> list[FormField]:
    out = []
    for name, info in tool.model.model_fields.items():
        ann = info.annotation
        if name in tool.choices:
            opts = tuple((str(k), v) for k, v in tool.choices[name].items())
            out.append(FormField(name, label(tool, name), "select", opts))
        elif get_origin(ann) is Literal:
            out.append(FormField(name, label(tool, name), "select", tuple((str(o), str(o)) for o in get_args(ann))))
        elif ann is bool:
            out.append(FormField(name, label(tool, name), "check"))
        else:
            out.append(FormField(name, label(tool, name), "num"))
    return out


def _tool(name: str) -> Tool:
    tool = TOOLS.get(name)
    if tool is None:
        raise NotFound(f"There is no tool {name!r}; tools: {', '.join(TOOLS)}.")
    return tool


def _prediction(tool: Tool, about: str, typed: str, result: dict | None, errors: dict[str, str]) -> Prediction | None:
    output = tool.outputs.get(about)
    if output is None:
        errors[PREDICTS] = f"predicts: one of {', '.join(tool.outputs)} (what a prediction can be about); got “{about}”"
        return None
    value: float | None = None
    if typed.strip() and output.kind != "yes/no":
        try:
            number, unit = parse_number(typed)
            value = convert(number, unit, output.unit) if unit and unit != output.unit else number
        except ValueError as exc:
            errors[PREDICT] = f"your prediction: {exc}"
    actual = output.shown(result.get(about)) if result else None
    verdict = judge(output, value, result.get(about)) if (value is not None and result) else None
    return Prediction(about, output, typed, value, verdict, actual)


def run(name: str, query: Mapping[str, Any]) -> ToolRun:
    """Validate `query` (text from a form or a link; empty fields take their defaults), compute, and judge a
    prediction when the query carries one (`predicts` names the output, `predict` the learner's number).
    NotFound for an unknown tool."""
    tool = _tool(name)
    data = {k: v for k, v in query.items() if k not in (PREDICT, PREDICTS) and v != ""}
    params, errors = validate(tool, data)
    result = tool.compute(params) if params is not None else None
    values = params.model_dump() if params is not None else {**_defaults_of(tool), **data}
    prediction = None
    if query.get(PREDICTS):
        prediction = _prediction(tool, str(query[PREDICTS]), str(query.get(PREDICT, "")), result, errors)
    return ToolRun(tool, values, result, errors, prediction)


def _defaults_of(tool: Tool) -> dict[str, Any]:
    return tool.model().model_dump()


def defaults() -> dict[str, ToolRun]:
    """Every tool at its default inputs, in /play's order."""
    return {name: run(name, {}) for name in TOOLS}
