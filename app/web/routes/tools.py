"""The interactive lesson: four calculators as an htmx page and as JSON under /api/v1/tools.

Each calculator is its own documented operation, GET /api/v1/tools/<name>, whose query parameters are its
inputs (from the tool's model in app/content/tools.py); an unknown name answers 404 naming the tools.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from app.content.tools import TOOLS, Tool
from app.core.models import User
from app.services.learning import tools as tool_service
from app.web.deps import CurrentUser, csrf_protect
from app.web.templates import is_htmx, render

router = APIRouter(dependencies=[Depends(csrf_protect)])
api = APIRouter(prefix="/api/v1/tools", tags=["tools"], dependencies=[Depends(csrf_protect)])


@router.get("/play")
def play(request: Request, user: CurrentUser):
    return render(request, "tools/play.html", {"tools": tool_service.defaults()})


@router.get("/play/{tool}")
def play_tool(request: Request, tool: str, user: CurrentUser):
    """htmx: only the tool's live output, plus each field's error message swapped in next to its field (the
    form being typed in is never replaced); else the whole page with this tool's inputs and answer."""
    state = tool_service.run(tool, request.query_params)
    status = 422 if state.errors else 200
    if is_htmx(request):
        return render(request, "tools/_out.html", {"name": tool, "t": state, "oob": True}, status_code=status)
    tools = tool_service.defaults()
    tools[tool] = state
    return render(request, "tools/play.html", {"tools": tools, "focus": tool}, status_code=status)


class PredictionOut(BaseModel):
    about: str = Field(description="the output the prediction is about (`predicts`)")
    label: str = Field(description="that output in words")
    unit: str = Field(description="the unit the prediction was read in")
    predicted: float | None = Field(description="the number read from `predict`; null when it had none")
    computed: Any = Field(description="what the tool computed, in that unit")
    right: bool | None = Field(description="whether the prediction is within the output's tolerance")
    verdict: str | None = Field(description="the judgement in words")


class ToolAnswer(BaseModel):
    tool: str
    params: dict[str, Any] = Field(description="the inputs it ran with, every one filled in")
    result: dict[str, Any] = Field(description="what it computed, by output name")
    prediction: PredictionOut | None = Field(None, description="present when the query carried `predicts`")


def _answer(request: Request, tool: str) -> dict | JSONResponse:
    state = tool_service.run(tool, request.query_params)
    if state.errors:
        errors = state.error_list()
        return JSONResponse({"detail": "; ".join(e["message"] for e in errors), "errors": errors}, status_code=422)
    body: dict = {"tool": tool, "params": state.values, "result": state.result}
    if state.prediction is not None:
        p = state.prediction
        body["prediction"] = {
            "about": p.about,
            "label": p.output.label,
            "unit": p.output.unit,
            "predicted": p.value,
            "computed": p.actual,
            "right": p.verdict.right if p.verdict else None,
            "verdict": p.verdict.words if p.verdict else None,
        }
    return body


def _query_parameters(tool: Tool) -> list[dict]:
    """The tool's inputs as the document's query parameters (each optional: a missing one takes its default),
    then the two a "predict, then check" link adds. The route reads the query itself (tool_service.run), so one
    answer lists every bad input at once, in the learner's words."""
    schema = tool.model.model_json_schema()
    inputs = [
        {"name": name, "in": "query", "required": False, "description": _words(prop), "schema": prop}
        for name, prop in schema["properties"].items()
    ]
    predict = 'the prediction, a number with or without its unit ("14 ms", "40%"), judged against `predicts`'
    return [
        *inputs,
        {"name": "predicts", "in": "query", "required": False, "schema": {"type": "string", "enum": list(tool.outputs)},
         "description": "the output the prediction is about"},
        {"name": "predict", "in": "query", "required": False, "schema": {"type": "string"}, "description": predict},
    ]  # fmt: skip


def _words(prop: dict) -> str:
    """An input in the learner's words: its label (the form's), then its hint."""
    return ": ".join(w for w in (prop.get("title"), prop.get("description")) if w)


def _route(name: str) -> Callable[[Request, User], dict | JSONResponse]:
    def run_tool(request: Request, user: CurrentUser) -> dict | JSONResponse:
        return _answer(request, name)

    return run_tool


for _tool in TOOLS.values():
    _operation = f"run_{_tool.name.replace('-', '_')}"
    api.add_api_route(
        f"/{_tool.name}",
        _route(_tool.name),
        methods=["GET"],
        name=_operation,
        response_model=ToolAnswer,
        operation_id=_operation,
        summary=_tool.title,
        description=f"{_tool.about}\n\nAdd `predicts=OUTPUT&predict=NUMBER` to have a prediction judged. "
        "422 lists every invalid input at once.",
        openapi_extra={"parameters": _query_parameters(_tool)},
    )


@api.get("/{tool}", include_in_schema=False, response_model=None)
def tool_api(request: Request, tool: str, user: CurrentUser) -> dict | JSONResponse:
    """A tool this course does not have: 404 naming the ones it has."""
    return _answer(request, tool)
