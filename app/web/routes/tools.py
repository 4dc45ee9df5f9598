"""The interactive lesson: four calculators as an htmx page and as JSON under /api/v1/tools."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

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


@api.get("/{tool}")
def tool_api(request: Request, tool: str, user: CurrentUser):
    """Run one calculator (`fp8-range`, `parallel-axis`, `overlap-window`, `memory`); inputs as query strings.

    Add `predicts=OUTPUT&predict=NUMBER` to have a prediction judged. 422 lists every invalid input at once.
    """
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
