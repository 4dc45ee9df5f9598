"""The plan both drawings of a chart share: ticks for any timeline window, markers by one rule, two runs on one
axis, and a chart SVG read back safely."""

from __future__ import annotations

import math

import pytest

from labs.trace import chart, svgplot
from labs.trace.chart import ChartSpec, Series


@pytest.mark.parametrize("width", [0.0013, 0.02, 0.7, 3.0, 12.5, 250.0, 4096.0, 86_400_000.0])
def test_a_tick_set_suits_exactly_the_windows_whose_ticks_it_holds(width):
    """time_ticks' band of widths is where the step it chose is the step a window of that width gets over the same
    times, so the page may keep a set while its window stays in the band and inside the set, and ask again only
    outside it."""
    ts = chart.time_ticks(0.0, width)
    assert ts.min_width < width <= ts.max_width
    for w in (ts.min_width * 1.001, ts.max_width * 0.999, ts.max_width / 1.0000001):
        assert chart.time_ticks(0.0, width, width=w).step == ts.step, w
    for w in (ts.min_width * 0.999, ts.max_width * 1.001):
        assert chart.time_ticks(0.0, width, width=w).step != ts.step, w
    # round steps, at most TIME_TICKS intervals and never fewer than one across the window
    mantissa = ts.step / 10 ** math.floor(math.log10(ts.step) + 1e-12)
    assert round(mantissa, 9) in chart.NICE
    assert width / chart.TIME_TICKS <= ts.step * (1 + 1e-9) and ts.step <= width
    _labels_are_their_times_and_fit(ts)


def _labels_are_their_times_and_fit(ts: chart.TickSet) -> None:
    """Each label is its tick's time to the last digit the step needs, and in the widest window the set suits,
    neighbouring labels keep a gap on the narrowest axis, the last one pulled back inside the plot included."""
    assert all(t.label.endswith(" ms") for t in ts.ticks)
    assert [float(t.label.removesuffix(" ms").replace(",", "")) for t in ts.ticks] == pytest.approx(
        [t.at for t in ts.ticks], rel=1e-12, abs=1e-12
    )
    assert len({t.label for t in ts.ticks}) == len(ts.ticks)
    widest = max(chart.label_em(t.label) for t in ts.ticks)
    apart = chart.TICK_AXIS_EM * ts.step / ts.max_width * (1 + 1e-6)  # em between neighbouring ticks
    assert apart >= widest + chart.TICK_GAP_EM
    assert apart >= 1.5 * widest - chart.TICK_END_EM + chart.TICK_GAP_EM


@pytest.mark.parametrize(
    ("lo", "hi", "labels"),
    [
        (1.0, 1.15, ["1 ms", "1.05 ms", "1.1 ms", "1.15 ms"]),
        (3.0, 3.0015, ["3 ms", "3.0005 ms", "3.001 ms", "3.0015 ms"]),
        (4.0, 5.5, ["4 ms", "4.5 ms", "5 ms", "5.5 ms"]),
        (1000.0, 1010.0, ["1,000 ms", "1,005 ms", "1,010 ms"]),
    ],
)
def test_a_zoomed_window_far_from_zero_keeps_each_tick_its_own_time(lo, hi, labels):
    """Three significant digits would label ticks 0.0005 apart at 3 ms all "3 ms"; the step's decimals are kept."""
    ts = chart.time_ticks(lo, hi)
    assert [t.label for t in ts.ticks] == labels
    _labels_are_their_times_and_fit(ts)


def test_a_zoomed_window_gets_ticks_round_in_time_not_in_the_window():
    ts = chart.time_ticks(1.13, 1.87, width=0.74)
    assert ts.step == 0.2
    assert [t.label for t in ts.ticks] == ["1.2 ms", "1.4 ms", "1.6 ms", "1.8 ms"]


def test_markers_follow_one_rule_for_every_chart():
    few = chart.plan_line_chart(ChartSpec([Series("a", [1, 2, 4], [1.0, 2.0, 3.0])], "t", "x", "y"))
    many = chart.plan_line_chart(
        ChartSpec([Series("a", list(range(17)), [1.0] * 17), Series("b", [1, 2], [1.0, 2.0])], "t", "x", "y")
    )
    assert few.lines[0].marker is not None and few.lines[0].marker.shape == "circle"
    assert [line.marker for line in many.lines] == [None, None]  # one long series: no chart gets dots
    shapes = [chart.marker(i) for i in range(5)]
    assert [m.shape for m in shapes] == ["circle", "square", "triangle", "diamond", "circle"]
    assert [m.r for m in shapes[:4]] == sorted(m.r for m in shapes[:4])  # each larger: coinciding outlines nest


def test_two_runs_overlay_on_one_axis_keeping_each_series_colour_and_shape():
    a = ChartSpec(
        [Series("BF16", [0, 1], [2.0, 1.0]), Series("FP8", [0, 1], [2.1, 1.2], dashed=True)], "Loss", "step", "loss"
    )
    b = ChartSpec(
        [Series("BF16", [0, 1, 2], [2.0, 1.1, 0.5]), Series("FP8", [0, 1, 2], [2.2, 1.3, 9.0])], "Loss", "step", "loss"
    )
    both = chart.overlay([("A · #1", a), ("B · #2", b)])
    assert both is not None
    plan = chart.plan_line_chart(both)
    assert [line.name for line in plan.lines] == ["A · #1 · BF16", "A · #1 · FP8", "B · #2 · BF16", "B · #2 · FP8"]
    assert [line.dash for line in plan.lines] == ["", "", chart.DASH, chart.DASH]  # run A solid, run B dashed
    assert plan.lines[0].colour == plan.lines[2].colour != plan.lines[1].colour
    assert plan.y.hi >= 9.0  # one axis for both runs' values
    assert [s.label for s in plan.steps] == ["0", "1", "2"]
    other = ChartSpec([Series("amax", [0], [1.0])], "amax of w1", "step", "value", log_y=True)
    assert chart.overlay([("A", a), ("B", other)]) is None


def test_a_chart_svg_is_read_back_and_anything_else_is_refused_in_words():
    svg = svgplot.line_chart([Series("s", [1, 2], [1.0, 2.0])], title="t", xlabel="x", ylabel="y")
    stacked = svgplot.stack([svg, svg], title="both")
    assert len(chart.read_specs(stacked)) == 2
    for text, why in [
        ("<svg/>", "holds no line chart"),
        ('<metadata data-plot="line-chart">{nope</metadata>', "not JSON"),
        ('<metadata data-plot="line-chart">{"series": 3}</metadata>', "not a chart"),
    ]:
        with pytest.raises(ValueError, match=why):
            chart.read_specs(text)
    huge = ChartSpec([Series("s", list(range(chart.MAX_POINTS + 1)), [1.0] * (chart.MAX_POINTS + 1))], "t", "x", "y")
    with pytest.raises(ValueError, match="more than"):
        chart.read_specs(chart.spec_json(huge))


def test_stacked_panels_share_their_margin_and_their_degrees():
    measured = ChartSpec([Series("step", [1, 2], [400.0, 300.0])], "measured", "TP", "ms", log_x=True, log_y=True)
    predicted = ChartSpec(
        [Series("step", [1, 2, 4, 8], [1e-5, 8e-6, 6e-6, 7e-6])], "predicted", "TP", "ms", log_x=True, log_y=True
    )
    top, bottom = chart.plan_panels([measured, predicted])
    assert top.left == bottom.left > chart.plan_line_chart(measured).left  # the wider labels' margin, for both
    assert top.x == bottom.x and [t.label for t in top.x.ticks] == ["1", "2", "4", "8"]
