"""A run its own lab's cost model says cannot finish inside the job time limit is refused before it queues,
with the arithmetic and the parameter to change (as a run over the memory budget is).

    over_time_limit(params, "cpu", estimate=spec.estimate_seconds, limit_s=600)
        -> Problem("max_bytes", "max_bytes: this run is estimated at about 152 h 43 min ... lower max_bytes to
           4194304 or less (about 9 min 40 s), or iters to 3 or less (...)") | None

Which parameter: each numeric one in turn, moved toward whichever of its bounds makes the run cheaper, to the
value nearest the learner's that fits (a bisection on the cost model, so the lab names nothing here); the
suggestions that change their parameter least come first. A suggestion is one the parameters model accepts.

Backends: the estimate is the one for the backend that will run. The cost models are calibrated on a 2-core CPU
and their GPU figures are guesses (labs/resources.py GPU_GEMM_FLOPS), so on a GPU backend a run is refused only
when even GPU_GUESS_SLACK times the limit would not hold it; the time limit still stops one that overruns.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import annotated_types as at
from pydantic import ValidationError

from labs.params import LabParams
from labs.resources import GPU_BACKENDS, Problem
from labs.words import duration, number

# How far a GPU estimate may be off before it is trusted to refuse: the uncalibrated GPU rates are round numbers
# that could be a few times too slow for a small model on a big GPU.
GPU_GUESS_SLACK = 3.0
SUGGESTIONS = 3  # fixes named in one refusal
_STEPS = 60  # bisection steps: exact for any int range up to 2**60, and far below a float's resolution of interest

Estimate = Callable[[Any, str], float]


def _bounds(params: LabParams, name: str) -> tuple[float | None, float | None]:
    """The field's lower and upper bounds (ge/gt, le/lt) where it has them."""
    lo: Any = None
    hi: Any = None
    for m in type(params).model_fields[name].metadata:
        if isinstance(m, at.Ge):
            lo = m.ge
        elif isinstance(m, at.Gt):
            lo = m.gt
        elif isinstance(m, at.Le):
            hi = m.le
        elif isinstance(m, at.Lt):
            hi = m.lt
    return lo, hi


def _valid(params: LabParams, name: str, value: float) -> LabParams | None:
    try:
        return type(params).model_validate({**params.model_dump(), name: value})
    except ValidationError:
        return None


def _fix(
    params: LabParams, name: str, backend: str, estimate: Estimate, allowed: float
) -> tuple[float, Any, float] | None:
    """(relative change, the value nearest the current one that fits, its estimate) for one numeric field."""
    current = getattr(params, name)
    if isinstance(current, bool) or not isinstance(current, (int, float)):
        return None
    lo, hi = _bounds(params, name)
    is_int = isinstance(current, int)

    def cost(v: float) -> float:
        return estimate(params.model_copy(update={name: int(v) if is_int else v}), backend)

    for end in (lo, hi):
        if end is None or end == current or cost(end) > allowed:
            continue
        fits, over = float(end), float(current)  # cost(fits) <= allowed < cost(over)
        for _ in range(_STEPS):
            mid = (fits + over) / 2
            if is_int:
                mid = math.floor(mid) if fits < over else math.ceil(mid)
                if mid in (fits, over):
                    break
            if cost(mid) <= allowed:
                fits = mid
            else:
                over = mid
        value: Any = int(fits) if is_int else _rounded_toward(fits, float(end))
        if cost(value) > allowed:
            value = int(fits) if is_int else fits
        checked = _valid(params, name, value)
        if checked is None:
            continue
        change = abs(math.log(max(abs(value), 1e-12) / max(abs(current), 1e-12)))
        return change, value, estimate(checked, backend)
    return None


def _rounded_toward(x: float, end: float) -> float:
    """x to two significant figures, rounded toward `end` (the safe side): 412.7 toward 0 -> 410."""
    if x == 0:
        return 0.0
    step = 10 ** (math.floor(math.log10(abs(x))) - 1)
    return (math.floor(x / step) if end < x else math.ceil(x / step)) * step


def over_time_limit(params: LabParams, backend: str, *, estimate: Estimate, limit_s: float) -> Problem | None:
    """A Problem naming the parameter to change when this run's estimate passes the time limit; None otherwise."""
    seconds = estimate(params, backend)
    gpu = backend in GPU_BACKENDS
    allowed = limit_s * (GPU_GUESS_SLACK if gpu else 1.0)
    if seconds <= allowed:
        return None
    fixes = []
    for name in type(params).model_fields:
        found = _fix(params, name, backend, estimate, allowed)
        if found is not None:
            fixes.append((found[0], name, found[1], found[2], getattr(params, name)))
    fixes.sort()
    words = [
        f"{'lower' if value < was else 'raise'} {name} to {number(value, 4) if not isinstance(value, int) else value}"
        f" or {'less' if value < was else 'more'} ({number(est, 3)} s)"
        for _, name, value, est, was in fixes[:SUGGESTIONS]
    ]
    field = fixes[0][1] if fixes else "params"
    basis = (
        f"the {backend} estimate is a guess until GPU runs calibrate it, so runs up to {GPU_GUESS_SLACK:g}x the "
        f"limit are let through; this one is {seconds / limit_s:,.0f}x"
        if gpu
        else f"{number(seconds, 3)} s > {number(limit_s, 3)} s"
    )
    fix = "; " + ", or ".join(words) if words else "; make the run smaller"
    return Problem(
        field,
        f"{field}: this run is estimated at {duration(seconds, about=True)} on the {backend} backend (the lab's "
        f"cost model), past the course's time limit of {duration(limit_s)} for one job ({basis}), so it would be "
        f"stopped before it finished{fix}",
    )
