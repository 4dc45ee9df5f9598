"""The interactive lesson: three calculators as an htmx page and as JSON under /api/v1/tools."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from app.deps import CurrentUser, csrf_protect
from app.services.tools import TOOLS
from app.web import is_htmx, render
from labs.params import describe_error

router = APIRouter(dependencies=[Depends(csrf_protect)])
api = APIRouter(prefix="/api/v1/tools", tags=["tools"], dependencies=[Depends(csrf_protect)])


def _run(tool: str, query: dict) -> tuple[dict | None, dict | None, list[dict]]:
    if tool not in TOOLS:
        raise HTTPException(404, f"There is no tool {tool!r}; tools: {', '.join(TOOLS)}.")
    model, fn, _ = TOOLS[tool]
    data = {k: v for k, v in query.items() if v != ""}
    if "consumer_reads_result" in model.model_fields:
        data["consumer_reads_result"] = data.get("consumer_reads_result") in ("on", "true", "1", True)
    try:
        params = model.model_validate(data)
    except ValidationError as exc:
        return None, data, describe_error(exc)
    return fn(params), params.model_dump(), []


def _state(tool: str, result, params, errors) -> dict:
    return {
        "title": TOOLS[tool][2],
        "params": params,
        "result": result,
        "errors": {e["field"]: e["message"] for e in errors},
    }


def _defaults() -> dict:
    return {name: _state(name, fn(model()), model().model_dump(), []) for name, (model, fn, _) in TOOLS.items()}


@router.get("/play")
def play(request: Request, user: CurrentUser):
    return render(request, "tools/play.html", {"tools": _defaults()})


@router.get("/play/{tool}")
def play_tool(request: Request, tool: str, user: CurrentUser):
    """htmx: only the tool's live output (the form being typed in is never replaced); else the whole page."""
    result, values, errors = _run(tool, dict(request.query_params))
    status = 422 if errors else 200
    state = _state(tool, result, values, errors)
    if is_htmx(request):
        return render(request, f"tools/_{tool}-out.html", {"name": tool, "t": state}, status_code=status)
    tools = _defaults()
    tools[tool] = state
    return render(request, "tools/play.html", {"tools": tools}, status_code=status)


@api.get("/{tool}")
def tool_api(request: Request, tool: str, user: CurrentUser):
    """Run one calculator: `fp8-range`, `parallel-axis` or `overlap-window`; parameters as query strings."""
    result, values, errors = _run(tool, dict(request.query_params))
    if errors:
        return JSONResponse({"detail": "; ".join(e["message"] for e in errors), "errors": errors}, status_code=422)
    return {"tool": tool, "params": values, "result": result}
