"""Per-rank timelines: spans on three lanes, overlap arithmetic, Chrome trace and SVG drawing.

Both distributed labs (`tp-sweep`, `overlap-trace`) describe what each rank did as `Span`s on one of
three lanes:

    compute        GEMMs and other math the rank ran
    communication  a collective from launch to completion (on gloo it runs on a background thread)
    wait           the rank's own thread blocked waiting for a collective (or for a late peer)

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

import json
import math
from dataclasses import asdict, dataclass, field
from html import escape

from labs.svgplot import svg_open

LANES = ("compute", "communication", "wait")
# Colour-blind-safe (Okabe-Ito); each lane is also labelled in words, so colour is never the only cue.
LANE_COLOURS = {"compute": "#0072B2", "communication": "#D55E00", "wait": "#8a8a8a"}

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
    t_overlap = total(intersection(compute, comm))
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


# ---- Chrome trace (Perfetto, chrome://tracing) -----------------------------------------------


def chrome_trace(spans, *, metadata: dict | None = None) -> dict:
    """Trace Event Format: pid = rank, tid = lane (1 compute, 2 communication, 3 wait), times in µs."""
    events: list[dict] = []
    for rank in sorted({s.rank for s in spans}):
        events.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}})
        for tid, lane_name in enumerate(LANES, start=1):
            events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": lane_name}})
            events.append(
                {"ph": "M", "name": "thread_sort_index", "pid": rank, "tid": tid, "args": {"sort_index": tid}}
            )
    for s in sorted(spans, key=lambda s: (s.rank, s.start_ms)):
        events.append(
            {
                "ph": "X",
                "name": s.name,
                "cat": s.lane,
                "pid": s.rank,
                "tid": LANES.index(s.lane) + 1,
                "ts": round(s.start_ms * 1000.0, 3),
                "dur": round(s.duration_ms * 1000.0, 3),
                "args": _json_safe(s.args),
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": _json_safe(metadata or {})}


def chrome_trace_json(spans, *, metadata: dict | None = None) -> str:
    return json.dumps(chrome_trace(spans, metadata=metadata), allow_nan=False)


def _json_safe(obj):
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


# ---- SVG drawing ---------------------------------------------------------------------------


def _ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    span = hi - lo if hi > lo else 1.0
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt_ms(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def svg_timeline(
    spans,
    *,
    title: str,
    description: str = "",
    window: Interval | None = None,
    width: int = 900,
    subtitle: str = "",
) -> str:
    """One row group per rank with lanes compute / communication / wait, x axis in ms.

    Lanes are labelled in words at the left of every rank group, so no legend is needed. Each bar
    carries a <title> (its name and duration) for hover and screen readers, and bars wide enough
    for text show their name. All text is escaped.
    """
    spans = list(spans)
    ranks = sorted({s.rank for s in spans}) or [0]
    if window is None:
        lo = min((s.start_ms for s in spans), default=0.0)
        hi = max((s.end_ms for s in spans), default=1.0)
    else:
        lo, hi = window
    hi = hi if hi > lo else lo + 1.0
    left, right, top = 170, 20, 58 if subtitle else 44
    lane_h, lane_gap, group_gap = 18, 4, 14
    group_h = len(LANES) * (lane_h + lane_gap)
    plot_h = len(ranks) * (group_h + group_gap)
    height = top + plot_h + 48
    pw = width - left - right

    def px(t: float) -> float:
        return left + (t - lo) / (hi - lo) * pw

    out = svg_open(width, height, title, description or (f"{title}. {subtitle}" if subtitle else ""))
    out.append(f'<text x="12" y="22" font-size="14" font-weight="600" fill="#111">{escape(title)}</text>')
    if subtitle:
        # Keep the line inside the picture (~6.5 px a character at this size); the full text stays in <desc>.
        room = max(20, int((width - 24) / 6.5))
        shown = subtitle if len(subtitle) <= room else subtitle[: room - 1] + "…"
        out.append(f'<text x="12" y="40" fill="#444">{escape(shown)}</text>')
    axis_y = top + plot_h
    for t in _ticks(lo, hi):
        x = px(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 4}" y2="{axis_y}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{x:.1f}" y="{axis_y + 16}" text-anchor="middle" fill="#333">{_fmt_ms(t - lo)}</text>')
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{axis_y}" y2="{axis_y}" stroke="#333"/>')
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{axis_y + 36}" text-anchor="middle" fill="#111">'
        f"time since start of window (ms)</text>"
    )
    for gi, rank in enumerate(ranks):
        gy = top + gi * (group_h + group_gap)
        out.append(f'<text x="12" y="{gy + group_h / 2 + 4:.1f}" font-weight="600" fill="#111">rank {rank}</text>')
        for li, lane_name in enumerate(LANES):
            ly = gy + li * (lane_h + lane_gap)
            colour = LANE_COLOURS[lane_name]
            out.append(f'<rect x="{left}" y="{ly}" width="{pw}" height="{lane_h}" fill="#f6f6f6"/>')
            out.append(
                f'<text x="{left - 8}" y="{ly + lane_h - 5}" text-anchor="end" fill="{colour}">{lane_name}</text>'
            )
            for s in spans:
                if s.rank != rank or s.lane != lane_name or s.end_ms < lo or s.start_ms > hi:
                    continue
                x0, x1 = px(max(s.start_ms, lo)), px(min(s.end_ms, hi))
                w = max(x1 - x0, 1.0)  # a zero-length wait still shows as a hairline
                tip = f"rank {rank} · {lane_name} · {s.name}: {s.duration_ms:.3f} ms"
                out.append(
                    f'<rect x="{x0:.1f}" y="{ly}" width="{w:.1f}" height="{lane_h}" fill="{colour}" '
                    f'fill-opacity="0.85"><title>{escape(tip)}</title></rect>'
                )
                if w > 7 * len(s.name) + 6:
                    out.append(
                        f'<text x="{x0 + 4:.1f}" y="{ly + lane_h - 5}" fill="#fff" pointer-events="none">'
                        f"{escape(s.name)}</text>"
                    )
    out.append("</svg>")
    return "\n".join(out)
