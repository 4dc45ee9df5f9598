"""Chart data a page asks for while a learner zooms: the server chooses the ticks and their words, the page draws.

    GET /api/v1/charts/time-ticks?lo=MS&hi=MS    a timeline window's axis ticks (labs.api time_ticks), for
                                                 static/timeline.js when a zoom or pan leaves the tick sets it holds

The answer covers a window's width either side of it, so panning on needs no new request, and says the
range of window widths it suits (`min_width`, `max_width`), so zooming within that band needs none either. It
stops at the next power of ten above the window, though: times past it take a digit more, and the tick rule spaces
every label of a set for its widest (labs/trace/chart.py), so a window short of it would get sparser ticks than
its own labels need.
It depends on nothing but the two numbers: no login, and a browser may keep it.
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import JSONResponse

from app.web.deps import csrf_protect
from labs import api as labs_api

api = APIRouter(prefix="/api/v1/charts", tags=["charts"], dependencies=[Depends(csrf_protect)])

MIN_WINDOW_MS = 0.001  # 1 µs: the viewer's narrowest window, spans are recorded to the µs
MAX_MS = 1e9  # about 11 days: no trace is longer


@api.get("/time-ticks", operation_id="get_time_ticks", summary="Axis ticks for a timeline window")
def time_ticks(
    lo: Annotated[float, Query(ge=0, le=MAX_MS, description="the window's start, ms")],
    hi: Annotated[float, Query(gt=0, le=MAX_MS, description="the window's end, ms")],
) -> JSONResponse:
    """The ticks of the timeline window [lo, hi] (ms): round times with their labels ("2.5 ms"), covering a window's
    width either side, and the band of window widths (`min_width`, `max_width`) they suit."""
    width = hi - lo
    if not width >= MIN_WINDOW_MS * (1 - 1e-9):
        raise HTTPException(
            422, f"hi: must be at least lo + {MIN_WINDOW_MS} ms (lo={lo:g}, hi={hi:g}); the window is too narrow"
        )
    decade = 10.0 ** math.ceil(math.log10(hi))
    ticks = labs_api.time_ticks(max(0.0, lo - width), max(hi, min(hi + width, decade)), width=width)
    return JSONResponse(ticks.to_json(), headers={"Cache-Control": "public, max-age=86400"})
