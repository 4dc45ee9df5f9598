"""Per-rank timelines: spans on three lanes and the overlap arithmetic over them.

Both distributed labs (`tp-sweep`, `overlap-trace`) describe what each rank did as `Span`s on one of
three lanes:

    compute        GEMMs and other math the rank ran
    communication  a collective from launch to completion (on gloo it runs on a background thread)
    wait           the rank's own thread blocked waiting for a collective (or for a late peer)

Drawing them is labs.trace.svgplot's job (`svg_timeline`); exporting them for Perfetto is
labs.trace.chrome's.

Definitions follow Holistic Trace Analysis, per rank:

    overlap ratio          = |compute ∩ communication| / |communication|
    exposed communication  = |communication| - |compute ∩ communication|

and inclusion-exclusion gives the step identity the lesson uses (12 + 5 - 3 = 14 ms):

    |compute ∪ communication| = |compute| + |communication| - |compute ∩ communication|

Any gap between that and the measured step is idle time (Python overhead, scheduling), reported
as the residual rather than hidden.

Times are milliseconds on one clock shared by all ranks (CLOCK_MONOTONIC on one Linux host).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

LANES = ("compute", "communication", "wait")

Interval = tuple[float, float]


@dataclass(frozen=True)
class Span:
    rank: int
    lane: str  # one of LANES
    name: str
    start_ms: float
    end_ms: float
    args: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.lane not in LANES:
            raise ValueError(f"span {self.name!r}: lane {self.lane!r} is not one of {', '.join(LANES)}")
        if not (math.isfinite(self.start_ms) and math.isfinite(self.end_ms)) or self.end_ms < self.start_ms:
            raise ValueError(f"span {self.name!r}: end {self.end_ms} ms is before start {self.start_ms} ms")

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms

    def to_dict(self) -> dict:
        return asdict(self)


# ---- interval arithmetic -------------------------------------------------------------------


def union(intervals) -> list[Interval]:
    """Merge intervals into sorted, disjoint ones (touching intervals merge)."""
    out: list[list[float]] = []
    for start, end in sorted((float(s), float(e)) for s, e in intervals if e > s):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def total(intervals) -> float:
    return sum(e - s for s, e in union(intervals))


def intersection(a, b) -> list[Interval]:
    """|a ∩ b| as disjoint intervals, where a and b are each first merged (so self-overlap counts once)."""
    ua, ub = union(a), union(b)
    out, i, j = [], 0, 0
    while i < len(ua) and j < len(ub):
        s, e = max(ua[i][0], ub[j][0]), min(ua[i][1], ub[j][1])
        if e > s:
            out.append((s, e))
        if ua[i][1] < ub[j][1]:
            i += 1
        else:
            j += 1
    return out


def clip(intervals, window: Interval) -> list[Interval]:
    lo, hi = window
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def lane(spans, rank: int, lane_name: str) -> list[Interval]:
    return [(s.start_ms, s.end_ms) for s in spans if s.rank == rank and s.lane == lane_name]


def overlap_windows(spans, rank: int, step: Interval | None = None) -> list[Interval]:
    """Where the rank's compute and communication run at once (compute ∩ communication), within `step` when
    given: the windows the timelines shade, whose total is overlap_metrics' overlap_ms."""
    compute, comm = lane(spans, rank, "compute"), lane(spans, rank, "communication")
    if step is not None:
        compute, comm = clip(compute, step), clip(comm, step)
    return intersection(compute, comm)


# ---- metrics -------------------------------------------------------------------------------


def overlap_metrics(spans, rank: int, step: Interval | None = None) -> dict:
    """Overlap numbers for one rank; `step` (start, end) is the measured step, else the spans' extent."""
    mine = [s for s in spans if s.rank == rank]
    if step is None:
        step = (min(s.start_ms for s in mine), max(s.end_ms for s in mine)) if mine else (0.0, 0.0)
    compute = clip(lane(spans, rank, "compute"), step)
    comm = clip(lane(spans, rank, "communication"), step)
    wait = clip(lane(spans, rank, "wait"), step)
    t_compute, t_comm = total(compute), total(comm)
    t_overlap = total(overlap_windows(spans, rank, step))
    t_step = step[1] - step[0]
    identity = t_compute + t_comm - t_overlap  # = |compute ∪ communication|
    return {
        "rank": rank,
        "step_ms": t_step,
        "compute_ms": t_compute,
        "communication_ms": t_comm,
        "wait_ms": total(wait),
        "overlap_ms": t_overlap,
        # HTA leaves the ratio undefined without communication; so do we (None, not 0 or 1).
        "overlap_ratio": (t_overlap / t_comm) if t_comm > 0 else None,
        "exposed_communication_ms": t_comm - t_overlap,
        "identity_ms": identity,
        "identity_residual_ms": t_step - identity,
    }


def temporal_breakdown(spans, rank: int, step: Interval) -> dict:
    """Split the step into compute only / communication only / both / neither (idle); sums to the step."""
    compute = clip(lane(spans, rank, "compute"), step)
    comm = clip(lane(spans, rank, "communication"), step)
    both = total(intersection(compute, comm))
    busy = total(compute + comm)
    t_step = step[1] - step[0]
    return {
        "compute_only_ms": total(compute) - both,
        "communication_only_ms": total(comm) - both,
        "overlapped_ms": both,
        "idle_ms": max(0.0, t_step - busy),
        "step_ms": t_step,
    }
