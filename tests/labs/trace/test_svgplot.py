"""Timeline pictures read well: ticks on round numbers of the axis they label, subtitles shown whole."""

import json
import xml.etree.ElementTree as ET

from labs.trace import chart, svgplot
from labs.trace.timeline import Span

SVG = "{http://www.w3.org/2000/svg}"


def _texts(svg: str) -> list[ET.Element]:
    return list(ET.fromstring(svg).iter(f"{SVG}text"))


def test_timeline_ticks_are_round_in_time_since_the_window_start():
    # A window that starts at an arbitrary clock time: the axis labels time since that start.
    spans = [Span(0, "compute", "fc1", 1234.567, 1500.0), Span(0, "communication", "all-reduce", 1500.0, 2100.9)]
    svg = svgplot.svg_timeline(spans, title="t")
    axis = [t for t in _texts(svg) if t.get("text-anchor") == "middle" and t.text and t.text[0].isdigit()]
    labels = [float(t.text) for t in axis]
    assert labels[0] == 0 and len(labels) >= 4
    steps = {round(b - a, 6) for a, b in zip(labels, labels[1:])}
    assert len(steps) == 1, labels  # evenly spaced
    (step,) = steps
    assert step in (100, 200, 250, 500), labels  # a round step, so every label is a round number
    # and each tick sits where its time is: 0 at the plot's left edge
    assert abs(float(axis[0].get("x")) - 170) < 0.6


def test_a_long_subtitle_wraps_instead_of_being_cut():
    subtitle = (
        "CPU emulation: FP8 numerics are emulated in software with Transformer Engine's semantics and "
        "collectives run on gloo; timings are CPU timings, not GPU measurements."
    )
    svg = svgplot.svg_timeline([Span(0, "compute", "x", 0, 1)], title="t", subtitle=subtitle, width=600)
    root = ET.fromstring(svg)
    lines = [t.text for t in root.iter(f"{SVG}text") if t.get("fill") == "#444"]
    assert len(lines) >= 2
    assert " ".join(lines) == subtitle  # every word is there; nothing ends in an ellipsis
    width = float(root.get("viewBox").split()[2])
    assert all(len(line) * 6.5 + 12 <= width for line in lines)  # each line fits the picture
    # the plot starts below the last subtitle line
    lane = next(r for r in root.iter(f"{SVG}rect") if r.get("fill") == "#f6f6f6")
    assert float(lane.get("y")) > 40 + 16 * (len(lines) - 1)


def test_log_axis_ticks_are_plain_round_numbers():
    series = [svgplot.Series("scale", [0, 1, 2], [1.0, 100.0, 10000.0])]
    svg = svgplot.line_chart(series, title="t", xlabel="step", ylabel="value", log_y=True)
    labels = [t.text for t in _texts(svg) if t.get("text-anchor") == "end"]
    assert "10,000" in labels and not [lab for lab in labels if "e+" in lab], labels


def test_tiny_and_huge_axis_values_read_as_powers_of_ten_that_fit_the_margin():
    """labs/words.py: an axis says 2.5 × 10⁻⁴ as the result card does, never 2.5e-04."""
    series = [svgplot.Series("loss gap", [0, 1, 2, 3], [1e-4, 2e-4, 3e-4, 4e-4])]
    root = ET.fromstring(svgplot.line_chart(series, title="t", xlabel="step", ylabel="gap"))
    labels = [t for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    assert "1 × 10⁻⁴" in [t.text for t in labels] and not [t.text for t in labels if "e-" in t.text]
    longest = max(labels, key=lambda t: len(t.text))
    # the label's left end (about 6.5 px a character) clears the rotated y-axis title at x = 14
    assert float(longest.get("x")) - 6.5 * len(longest.text) > 20
    huge = svgplot.line_chart([svgplot.Series("flops", [0, 1], [0.0, 4e5])], title="t", xlabel="x", ylabel="y")
    assert "4 × 10⁵" in [t.text for t in _texts(huge)]


def test_log_axis_is_ticked_at_every_decade_the_values_span():
    series = [
        svgplot.Series("step", [1, 2, 4], [1e-5, 0.02, 0.02]),
        svgplot.Series("gemm", [1, 2, 4], [9e-6, 5e-6, 3e-6]),
    ]
    svg = svgplot.line_chart(series, title="t", xlabel="TP", ylabel="ms", log_y=True, log_x=True, xticks=[1, 2, 4])
    labels = [t.text for t in _texts(svg) if t.get("text-anchor") == "end"]
    assert labels == ["1 × 10⁻⁶", "1 × 10⁻⁵", "1 × 10⁻⁴", "0.001", "0.01", "0.1"]
    # degrees spaced by ratio: 1 -> 2 is as wide as 2 -> 4
    xs = {t.text: float(t.get("x")) for t in _texts(svg) if t.get("text-anchor") == "middle" and t.text in "124"}
    assert abs((xs["2"] - xs["1"]) - (xs["4"] - xs["2"])) < 0.2, xs


def test_coinciding_series_keep_their_own_marker_shapes():
    same = [0.02, 0.03]
    series = [svgplot.Series(n, [2, 4], same) for n in ("collective", "exposed comm")]
    root = ET.fromstring(svgplot.line_chart(series, title="t", xlabel="TP", ylabel="ms"))
    groups = [g for g in root.iter(f"{SVG}g") if g.get("class") in ("marker", "key")]
    assert sorted(g.get("data-shape") for g in groups) == ["circle"] * 3 + ["square"] * 3  # two points and a key each
    # hollow, and the second shape larger, so the two outlines at one point nest instead of hiding each other
    shapes = [next(iter(g)) for g in groups]
    assert {el.get("fill") for el in shapes} == {"none"}
    circle = next(el for el in shapes if el.tag == f"{SVG}circle")
    square = next(el for el in shapes if el.tag == f"{SVG}polygon")
    half = max(abs(float(v)) for point in square.get("points").split() for v in point.split(","))
    assert half > float(circle.get("r"))


def test_many_points_draw_a_clean_line_without_markers():
    series = [svgplot.Series("loss", list(range(40)), [1.0 / (i + 1) for i in range(40)])]
    root = ET.fromstring(svgplot.line_chart(series, title="t", xlabel="step", ylabel="loss"))
    assert not [g for g in root.iter(f"{SVG}g") if g.get("class") in ("marker", "key")]


def test_stacked_panels_share_one_picture_and_keep_their_own_axes():
    a = svgplot.line_chart([svgplot.Series("s", [1, 2], [400.0, 500.0])], title="measured", xlabel="x", ylabel="ms")
    b = svgplot.line_chart([svgplot.Series("s", [1, 2], [1e-5, 2e-2])], title="predicted", xlabel="x", ylabel="ms")
    root = ET.fromstring(svgplot.stack([a, b], title="both"))
    panels = root.findall(f"{SVG}svg")
    assert [p.find(f"{SVG}title").text for p in panels] == ["measured", "predicted"]
    assert float(panels[1].get("y")) >= float(panels[0].get("height"))
    assert float(root.get("viewBox").split()[3]) >= float(panels[0].get("height")) + float(panels[1].get("height"))


def test_a_chart_carries_its_spec_for_the_interactive_plot():
    series = [svgplot.Series("loss <a&b>", [0, 1, 2], [2.3, None, float("nan")], dashed=True, rings=[0])]
    svg = svgplot.line_chart(series, title="t", xlabel="step", ylabel="loss")
    (meta,) = ET.fromstring(svg).iter(f"{SVG}metadata")
    data = json.loads(meta.text)
    assert data["series"] == [
        {"name": "loss <a&b>", "xs": [0, 1, 2], "ys": [2.3, None, None], "dashed": True, "rings": [0], "style": None}
    ]
    assert (data["xlabel"], data["ylabel"], data["log_y"], data["subject"]) == ("step", "loss", False, "")
    # the server reads it back as the same chart, and plans it as the SVG was drawn
    (spec,) = chart.read_specs(svg)
    assert spec.series[0].name == "loss <a&b>" and spec.series[0].rings == [0]
    plan = chart.plan_line_chart(spec)
    drawn = [t.text for t in _texts(svg) if t.get("class") == "tick-y"]
    assert [t.label for t in plan.y.ticks] == drawn


def test_timelines_shade_each_ranks_overlap_windows():
    spans = [
        Span(0, "compute", "fc1", 0.0, 10.0),
        Span(0, "communication", "all-gather", 6.0, 14.0),
        Span(1, "compute", "fc1", 0.0, 4.0),
        Span(1, "communication", "all-gather", 6.0, 14.0),
    ]
    root = ET.fromstring(svgplot.svg_timeline(spans, title="t", width=900))
    bands = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "overlap"]
    assert [b.get("data-rank") for b in bands] == ["0"]  # rank 1's compute ends before its collective starts
    # 6 to 10 ms of a 14 ms window, on a 710 px plot that starts at x = 170
    assert abs(float(bands[0].get("x")) - (170 + 6 / 14 * 710)) < 0.1
    assert abs(float(bands[0].get("width")) - 4 / 14 * 710) < 0.2
    assert "overlap window" in " ".join(t.text or "" for t in _texts(ET.tostring(root, encoding="unicode")))
