"""Spans as a Chrome trace (Trace Event Format), for Perfetto or chrome://tracing.

One process per rank (pid = rank) and one thread per lane (tid 1 compute, 2 communication, 3 wait),
times in microseconds. Arguments and metadata are made JSON-safe (non-finite floats become null).
"""

from __future__ import annotations

import json
import math

from labs.trace.timeline import LANES


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
