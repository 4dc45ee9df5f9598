"""Timeline arithmetic on hand-made intervals with answers worked out on paper."""

import json
import xml.etree.ElementTree as ET

import pytest

from labs.trace import chrome, svgplot
from labs.trace import timeline as tl
from labs.trace.timeline import Span


def test_union_merges_overlapping_and_touching():
    assert tl.union([(5, 7), (0, 2), (1, 3), (3, 4), (9, 9)]) == [(0, 4), (5, 7)]
    assert tl.total([(0, 2), (1, 3)]) == 3


def test_intersection_counts_self_overlap_once():
    a = [(0, 4), (2, 6)]  # union (0, 6)
    b = [(5, 8), (1, 2)]
    assert tl.intersection(a, b) == [(1, 2), (5, 6)]
    assert tl.total(tl.intersection(a, [])) == 0


def lesson_example():
    """The lesson's worked example: 12 ms compute, 5 ms communication, 3 ms of it hidden."""
    return [
        Span(0, "compute", "gemm", 0.0, 12.0),
        Span(0, "communication", "all-gather", 9.0, 14.0),
        Span(0, "wait", "wait()", 12.0, 14.0),
    ]


def test_overlap_metrics_reproduce_lesson_identity():
    m = tl.overlap_metrics(lesson_example(), 0)
    assert m["compute_ms"] == 12 and m["communication_ms"] == 5 and m["overlap_ms"] == 3
    assert m["overlap_ratio"] == pytest.approx(3 / 5)
    assert m["exposed_communication_ms"] == 2
    assert m["identity_ms"] == 14 and m["step_ms"] == 14 and m["identity_residual_ms"] == 0
    assert m["wait_ms"] == 2


def test_overlap_ratio_undefined_without_communication_and_zero_when_serial():
    only_compute = [Span(1, "compute", "gemm", 0, 3)]
    assert tl.overlap_metrics(only_compute, 1)["overlap_ratio"] is None
    serial = [Span(0, "compute", "a", 0, 2), Span(0, "communication", "ag", 2, 5)]
    m = tl.overlap_metrics(serial, 0)
    assert m["overlap_ratio"] == 0 and m["exposed_communication_ms"] == 3


def test_step_window_clips_and_residual_is_idle_time():
    spans = [Span(0, "compute", "a", 0, 2), Span(0, "communication", "ag", 1, 3), Span(0, "compute", "b", 5, 9)]
    m = tl.overlap_metrics(spans, 0, step=(0, 8))
    assert m["compute_ms"] == 5  # (0,2) + (5,8) after clipping
    assert m["identity_ms"] == 5 + 2 - 1
    assert m["identity_residual_ms"] == 2  # the gap (3, 5) is idle
    b = tl.temporal_breakdown(spans, 0, (0, 8))
    assert b == {"compute_only_ms": 4, "communication_only_ms": 1, "overlapped_ms": 1, "idle_ms": 2, "step_ms": 8}


def test_metrics_are_per_rank():
    spans = lesson_example() + [Span(1, "communication", "ag", 0, 4)]
    assert tl.overlap_metrics(spans, 1)["overlap_ratio"] == 0
    assert tl.overlap_metrics(spans, 0)["overlap_ratio"] == pytest.approx(0.6)


def test_bad_spans_are_refused():
    with pytest.raises(ValueError, match="lane"):
        Span(0, "gpu", "x", 0, 1)
    with pytest.raises(ValueError, match="before start"):
        Span(0, "compute", "x", 2, 1)


def test_chrome_trace_uses_rank_as_pid_and_lane_as_tid():
    trace = json.loads(chrome.chrome_trace_json(lesson_example() + [Span(1, "wait", "w", 1, 2)], metadata={"k": 1}))
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {(e["pid"], e["tid"], e["cat"]) for e in xs} == {
        (0, 1, "compute"),
        (0, 2, "communication"),
        (0, 3, "wait"),
        (1, 3, "wait"),
    }
    comm = next(e for e in xs if e["cat"] == "communication")
    assert comm["ts"] == 9000 and comm["dur"] == 5000  # microseconds
    names = {(e["pid"], e["args"]["name"]) for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert (1, "communication") in names
    assert trace["otherData"] == {"k": 1}


def test_svg_is_wellformed_labels_lanes_and_escapes_text():
    spans = lesson_example() + [Span(1, "compute", "<script>alert(1)</script>&", 0, 10)]
    svg = svgplot.svg_timeline(spans, title='Step "A" <b>', subtitle="x < y")
    root = ET.fromstring(svg)  # raises if any text was left unescaped
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert texts.count("compute") == 2 and texts.count("wait") == 2  # lanes labelled per rank group
    assert "rank 1" in texts and "time since start of window (ms)" in texts
    assert "<script>" not in svg and "&lt;script&gt;" in svg
