"""A lab's Chrome trace, shaped for the page's timeline viewer (static/timeline.js).

The labs write each trace once, as Trace Event Format (labs/trace/chrome.py: pid = rank, tid = lane, "X"
events in µs, `args.step` the measured step). The viewer needs the same spans grouped by step, in
milliseconds, each with its words ready ("0.625 ms", "2.0 KiB" from labs.api, the one formatter), so the
page reads numbers exactly as the result card does; and everything else it draws computed here by the
code that draws the lab's SVG timeline: the lanes' colours, each step's overlap windows per rank
(labs.api overlap_windows), where each step sits when all are laid end to end, and the axis ticks of each
fitted view (labs.api time_ticks; a zoomed view's come from app/web/routes/charts.py). A trace from an
uploaded bundle is untrusted: it is bounded in size and span count, and anything that is not a complete
span is left out, not guessed at.
"""

from __future__ import annotations

import math

from app.services.errors import NotFound
from app.services.jobs.artifacts import Artifact
from labs.api import (
    LANE_COLOURS,
    LANE_INK,
    LANE_SHORT,
    LANES,
    OVERLAP_COLOURS,
    Span,
    byte_size,
    duration,
    jsonbounds,
    overlap_windows,
    time_ticks,
)

MAX_BYTES = jsonbounds.TRACE.max_bytes  # the grader's limit for a trace too (labs/checks MAX_TRACE_BYTES)
MAX_SPANS = 20_000  # a 64-step run of 8 ranks is ~6,000; past this the page would crawl, so Perfetto it is


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _names(events: list, kind: str) -> dict:
    """pid (process_name) or (pid, tid) (thread_name) -> the name the metadata event gives it."""
    out = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == kind and isinstance(e.get("args"), dict):
            key = e.get("pid") if kind == "process_name" else (e.get("pid"), e.get("tid"))
            out[key] = str(e["args"].get("name", ""))[:80]
    return out


def span_words(start_ms: float, dur_ms: float, args: dict) -> dict:
    """What a span's readout says, from labs.api's words: its start into the step, its length, its bytes."""
    words = {"start": duration(start_ms / 1000), "duration": duration(dur_ms / 1000)}
    size = _number(args.get("bytes"))
    if size is not None:
        words["bytes"] = byte_size(size)
    if all(isinstance(args.get(k), int) for k in "mnk"):
        words["shape"] = f"{args['m']}×{args['n']}×{args['k']} (m×n×k)"
    return words


def timeline(artifact: Artifact, *, title: str) -> dict:
    """The viewer's JSON for one trace artifact: ranks, lanes, steps (extent of each) and spans, times in ms
    from the start of the span's own step. NotFound when the file is not a readable Chrome trace."""
    if artifact.path.stat().st_size > MAX_BYTES:
        raise NotFound(f"{artifact.path.name} is larger than {byte_size(MAX_BYTES)}: open it in Perfetto instead.")
    try:
        doc = jsonbounds.loads(artifact.path.read_bytes(), what=artifact.path.name, bounds=jsonbounds.TRACE)
    except jsonbounds.TooMuch as exc:
        raise NotFound(f"{exc}.") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise NotFound(f"{artifact.path.name} has no traceEvents list: it is not a Chrome trace.")
    events = [e for e in events if isinstance(e, dict)]
    ranks, lanes = _names(events, "process_name"), _names(events, "thread_name")
    raw = []
    for e in events:
        ts, dur = _number(e.get("ts")), _number(e.get("dur"))
        if e.get("ph") != "X" or ts is None or dur is None or dur < 0 or not isinstance(e.get("pid"), int):
            continue
        args: dict = e["args"] if isinstance(e.get("args"), dict) else {}
        lane = str(e.get("cat") or lanes.get((e["pid"], e.get("tid"))) or "compute")
        step: int = args["step"] if isinstance(args.get("step"), int) else 0
        raw.append((e["pid"], lane if lane in LANES else "compute", str(e.get("name", ""))[:120], ts, dur, step, args))
        if len(raw) > MAX_SPANS:
            raise NotFound(f"{artifact.path.name} holds more than {MAX_SPANS:,} spans: open it in Perfetto instead.")
    if not raw:
        raise NotFound(f"{artifact.path.name} holds no spans to draw.")
    # One clock for every rank (labs/trace/timeline.py), so a step starts at its earliest span on any rank.
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    for _, _, _, ts, dur, step, _ in raw:
        starts[step] = min(starts.get(step, ts), ts)
        ends[step] = max(ends.get(step, ts + dur), ts + dur)
    spans = []
    for rank, lane, name, ts, dur, step, args in sorted(raw, key=lambda r: (r[5], r[0], LANES.index(r[1]), r[3])):
        start_ms, dur_ms = (ts - starts[step]) / 1000, dur / 1000
        size = _number(args.get("bytes"))
        spans.append(
            {
                "rank": rank,
                "lane": lane,
                "name": name,
                "step": step,
                "start_ms": start_ms,
                "dur_ms": dur_ms,
                "bytes": size,
                "words": span_words(start_ms, dur_ms, args),
            }
        )
    rank_ids = sorted({s["rank"] for s in spans})
    steps, offset = [], 0.0
    for k, step in enumerate(sorted(starts)):
        dur_ms = (ends[step] - starts[step]) / 1000
        mine = [
            Span(s["rank"], s["lane"], "", s["start_ms"], s["start_ms"] + s["dur_ms"])
            for s in spans
            if s["step"] == step
        ]
        steps.append(
            {
                "step": step,
                "name": f"step {k + 1} of {len(starts)}",
                "dur_ms": dur_ms,
                "offset_ms": offset,  # where it starts when all steps are laid end to end
                "words": duration(dur_ms / 1000),
                "ticks": time_ticks(0.0, dur_ms).to_json(),
                "overlap": [{"rank": r, "windows": overlap_windows(mine, r)} for r in rank_ids],
            }
        )
        offset += dur_ms
    present = [lane for lane in LANES if any(s["lane"] == lane for s in spans)]
    return {
        "title": title,
        "file_name": artifact.download_name or artifact.path.name,
        "ranks": [{"rank": r, "name": ranks.get(r) or f"rank {r}"} for r in rank_ids],
        "lanes": [
            {"name": lane, "short": LANE_SHORT[lane], "colour": LANE_COLOURS[lane], "ink": LANE_INK[lane]}
            for lane in present
        ],
        "overlap": OVERLAP_COLOURS,
        "steps": steps,
        "all": {
            "name": "all steps",
            "dur_ms": offset,
            "ticks": time_ticks(0.0, offset).to_json(),
        },
        "spans": spans,
    }
