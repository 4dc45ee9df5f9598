"""One dataset drawn both ways: by labs/trace/svgplot.py (the SVG artifact, the page without JavaScript) and by the
page's scripts in real Chromium (static/plot.js, static/timeline.js) from the server's plan of it. Both must show the
same ticks (values and labels), the same markers (shapes, sizes, positions), rings, colours and overlap windows;
positions are compared as fractions of each drawing's plot frame, since the two are drawn at different sizes.

A planted fp8-step job's loss chart and amax chart are replaced by charts drawn here from a dataset with a gap, rings,
a log axis and sweep-style x ticks; a planted overlap-trace job's windowed trace and timeline by two steps of spans
with overlap windows on both ranks. Screenshots: test-artifacts/screenshots/both-ways-*.png."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest
from playwright.sync_api import expect

from labs.trace import chart, svgplot
from labs.trace.chart import Series
from labs.trace.chrome import chrome_trace_json
from labs.trace.timeline import Span
from tests.browser.conftest import SIZES, screenshot
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser

SVG = "{http://www.w3.org/2000/svg}"
EMAIL = "both-ways@example.org"
CLOSE = 0.004  # of the plot frame: the SVG's coordinates are written to 0.1 px

LOSS = [
    Series("reference", [0, 1, 2, 3, 4, 5, 6, 7], [2.31, 2.05, 1.7, 1.52, 1.31, 1.2, 1.12, 1.05]),
    Series("FP8", [0, 1, 2, 3, 4, 5, 6, 7], [2.33, 2.1, None, 1.6, 1.38, 1.22, 1.18, 1.07], dashed=True, rings=[1, 4]),
    Series("gap", [0, 1, 2, 3, 4, 5, 6, 7], [0.02, 0.05, 0.0, 0.08, 0.07, 0.02, 0.06, 0.02]),
]
SWEEP = [
    Series("step", [1, 2, 4, 8], [3.2, 1.9, 1.4, 1.6]),
    Series("collective", [1, 2, 4, 8], [None, 0.4, 0.7, 1.1]),
    Series("exposed comm", [1, 2, 4, 8], [None, 0.4, 0.7, 1.1]),  # coincides with the collective: shapes nest
    Series("local GEMM", [1, 2, 4, 8], [2.9, 1.45, 0.72, 0.36]),
]


def _step(rank: int, t0: float, step: int) -> list[Span]:
    """One step of a rank: two GEMMs, an all-gather under the first, a reduce-scatter partly under the second."""
    at = [(0.0, 6.0, 4.0, 9.0), (0.0, 3.0, 1.5, 7.5)][rank]
    c0, c1, m0, m1 = (t0 + v for v in at)
    args = {"step": step}
    return [
        Span(rank, "compute", "fc1 GEMM", c0, c1, dict(args)),
        Span(rank, "communication", "all-gather", m0, m1, {**args, "bytes": 4096}),
        Span(rank, "compute", "fc2 GEMM", t0 + 8.0, t0 + 11.0, dict(args)),
        Span(rank, "communication", "reduce-scatter", t0 + 10.2, t0 + 12.4, dict(args)),
        Span(rank, "wait", "wait", m1, max(m1, t0 + 9.3), dict(args)),
    ]


SPANS = [s for k in range(2) for r in range(2) for s in _step(r, 1000.0 + 20.0 * k, k)]


@pytest.fixture(scope="module")
def planted(live_server) -> dict:
    s = Seeder(live_server.data)
    uid = s.user(EMAIL, name="Bo")
    plots, trace = s.job(uid, "fp8-step"), s.job(uid, "overlap-trace")
    s.close()
    drawn = {
        "loss.svg": svgplot.line_chart(LOSS, title="Loss, drawn both ways", xlabel="step", ylabel="loss"),
        "amax_scale.svg": svgplot.line_chart(
            SWEEP,
            title="Sweep, drawn both ways",
            xlabel="TP degree",
            ylabel="ms",
            log_x=True,
            log_y=True,
            xticks=[1, 2, 4, 8],
        ),
    }
    for name, text in drawn.items():
        (live_server.data / f"jobs/{plots}/attempt-1/{name}").write_text(text)
    last = [sp for sp in SPANS if sp.args["step"] == 1]
    timeline = svgplot.svg_timeline(last, title="Timeline, drawn both ways")
    folder = live_server.data / f"jobs/{trace}/attempt-1"
    (folder / "timeline_windowed.svg").write_text(timeline)
    (folder / "trace_windowed.json").write_text(chrome_trace_json(SPANS))
    return {"plots": plots, "trace": trace, "svg": drawn, "timeline": timeline}


# ---- reading a drawing: the same classes in both (tick-x, tick-y, frame, marker, ring) --------------------------


def _translate(value: str) -> tuple[float, float]:
    x, y = value.removeprefix("translate(").removesuffix(")").replace(",", " ").split()
    return float(x), float(y)


def _read_svg(text: str) -> dict:
    """Ticks, markers and rings of a Python-drawn chart, positioned in its frame (0..1 across, 0..1 down)."""
    root = ET.fromstring(text)
    frame = next(r for r in root.iter(f"{SVG}rect") if r.get("class") == "frame")
    fx, fy, fw, fh = (float(frame.get(k)) for k in ("x", "y", "width", "height"))
    texts = list(root.iter(f"{SVG}text"))
    out: dict = {
        "y": [(t.text, (float(t.get("y")) - 4 - fy) / fh) for t in texts if t.get("class") == "tick-y"],
        "x": [(t.text, (float(t.get("x")) - fx) / fw) for t in texts if t.get("class") == "tick-x"],
        "markers": [],
        "rings": [],
    }
    for g in root.iter(f"{SVG}g"):
        if g.get("class") == "marker":
            x, y = _translate(g.get("transform"))
            shape = next(iter(g))
            out["markers"].append(
                (
                    g.get("data-shape"),
                    shape.get("r") or shape.get("points"),
                    shape.get("stroke"),
                    (x - fx) / fw,
                    (y - fy) / fh,
                )
            )
    for c in root.iter(f"{SVG}circle"):
        if c.get("class") == "ring":
            out["rings"].append(((float(c.get("cx")) - fx) / fw, (float(c.get("cy")) - fy) / fh))
    return out


READ_PAGE = """(chart) => {
  const svg = chart.querySelector('svg'), frame = svg.querySelector('rect.frame');
  const [fx, fy, fw, fh] = ['x', 'y', 'width', 'height'].map(k => +frame.getAttribute(k));
  const texts = cls => [...svg.querySelectorAll('text.' + cls)];
  const at = g => g.getAttribute('transform').replace('translate(', '').replace(')', '').split(' ').map(Number);
  return {
    y: texts('tick-y').map(t => [t.textContent, (+t.getAttribute('y') - 4 - fy) / fh]),
    x: texts('tick-x').map(t => [t.textContent, (+t.getAttribute('x') - fx) / fw]),
    markers: [...svg.querySelectorAll('g.marker')].map(g => {
      const s = g.firstElementChild, [x, y] = at(g);
      return [g.getAttribute('data-shape'), s.getAttribute('r') || s.getAttribute('points'), s.getAttribute('stroke'),
              (x - fx) / fw, (y - fy) / fh];
    }),
    rings: [...svg.querySelectorAll('circle.ring')].map(c => [(+c.getAttribute('cx') - fx) / fw,
                                                             (+c.getAttribute('cy') - fy) / fh]),
  };
}"""


def _same_places(ours: list, theirs: list) -> None:
    """Each item's last two values are where it is (fractions of the frame); the others must be equal."""
    assert len(ours) == len(theirs), (ours, theirs)
    for a, b in zip(ours, theirs):
        assert tuple(a[:-2]) == tuple(b[:-2]), (a, b)
        assert abs(a[-2] - b[-2]) < CLOSE and abs(a[-1] - b[-1]) < CLOSE, (a, b)


def _same_ticks(ours: list, theirs: list) -> None:
    assert [label for label, _ in ours] == [label for label, _ in theirs]
    assert all(abs(a - b) < CLOSE for (_, a), (_, b) in zip(ours, theirs)), (ours, theirs)


def _points(markers: list) -> list:
    """A polygon's points as numbers, so "4.5,0" and "4.5,0" written by Python and by the browser compare."""
    out = []
    for shape, outline, colour, x, y in markers:
        pts = (
            tuple(tuple(float(v) for v in p.split(",")) for p in outline.split()) if " " in outline else float(outline)
        )
        out.append((shape, pts, colour, x, y))
    return sorted(out, key=lambda m: (m[3], m[4], m[0]))


@pytest.mark.parametrize("size", list(SIZES))
def test_a_line_chart_draws_the_same_ticks_and_markers_both_ways(open_page, live_server, planted, size):
    page = open_page(size, EMAIL)
    page.goto(f"{live_server.url}/jobs/{planted['plots']}")
    figures = page.locator("figure.plot[data-plot-src]")
    for k, name in enumerate(("loss.svg", "amax_scale.svg")):
        charts = figures.nth(k).locator(".plotv-chart")
        expect(charts).to_have_count(1)
        expect(charts.locator("svg path").first).to_be_attached()
        ours, theirs = _read_svg(planted["svg"][name]), charts.evaluate(READ_PAGE)
        _same_ticks(ours["y"], theirs["y"])
        _same_ticks(ours["x"], theirs["x"])
        assert ours["markers"], name  # few points: every series is marked
        _same_places(_points(ours["markers"]), _points(theirs["markers"]))
        _same_places(sorted(ours["rings"]), sorted(theirs["rings"]))
    # the loss chart: ticks from 0 to 7 inside the data, a gap where FP8 has no value, two ringed steps
    loss = _read_svg(planted["svg"]["loss.svg"])
    assert [label for label, _ in loss["x"]] == ["0", "2", "4", "6"] and len(loss["rings"]) == 2
    assert len([m for m in loss["markers"] if m[2] == chart.PALETTE[1]]) == 7  # 8 steps, one without a value
    # the sweep: degrees as ticks, decades on y, four shapes growing so the coinciding two both show
    sweep = _read_svg(planted["svg"]["amax_scale.svg"])
    assert [label for label, _ in sweep["x"]] == ["1", "2", "4", "8"]
    assert [label for label, _ in sweep["y"]] == ["0.1", "1", "10"]
    assert sorted({m[0] for m in sweep["markers"]}) == sorted(chart.SHAPES)
    legend = figures.nth(1).locator(".plotv-legend li")
    expect(legend).to_have_text(["step", "collective", "exposed comm", "local GEMM"])
    keys = legend.locator("line").evaluate_all("ls => ls.map(l => l.getAttribute('stroke'))")
    assert keys == chart.PALETTE[:4]
    figures.nth(1).scroll_into_view_if_needed()
    screenshot(page, f"both-ways-plot-{size}", full_page=False)


def _rgb(colour: str) -> str:
    return f"rgb({int(colour[1:3], 16)}, {int(colour[3:5], 16)}, {int(colour[5:7], 16)})"


READ_VIEWER = """(v) => ({
  ticks: [...v.querySelectorAll('.tlv-plot .tlv-tick')].map(t => [t.textContent, parseFloat(t.style.left) / 100]),
  bands: [...v.querySelectorAll('.tlv-rank')].map(r => [...r.querySelectorAll('.tlv-band')].map(
    b => [parseFloat(b.style.left) / 100, parseFloat(b.style.width) / 100])),
  colours: Object.fromEntries([...v.querySelectorAll('.tlv-span')].map(s => [s.className.split('tlv-').pop(),
                                                                            s.style.backgroundColor])),
})"""


@pytest.mark.parametrize("size", list(SIZES))
def test_a_timeline_draws_the_same_ticks_and_overlap_windows_both_ways(open_page, live_server, planted, size):
    page = open_page(size, EMAIL)
    page.goto(f"{live_server.url}/jobs/{planted['trace']}")
    viewer = page.locator("section.tlv")
    expect(viewer.locator(".tlv-span").first).to_be_visible()
    viewer.get_by_label("Trace", exact=True).select_option(label="windowed")
    expect(viewer.locator(".tlv-title")).to_have_text("windowed · step 2 of 2")

    root = ET.fromstring(planted["timeline"])
    axis = next(el for el in root.iter(f"{SVG}line") if el.get("class") == "axis")
    x0, x1 = float(axis.get("x1")), float(axis.get("x2"))
    ours_ticks = [
        (t.text, (float(t.get("x")) - x0) / (x1 - x0)) for t in root.iter(f"{SVG}text") if t.get("class") == "tick-x"
    ]
    bands = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "overlap"]
    ours_bands = [
        [
            ((float(b.get("x")) - x0) / (x1 - x0), float(b.get("width")) / (x1 - x0))
            for b in bands
            if b.get("data-rank") == r
        ]
        for r in ("0", "1")
    ]
    theirs = viewer.evaluate(READ_VIEWER)
    _same_ticks(ours_ticks, [(label.removesuffix(" ms"), at) for label, at in theirs["ticks"]])
    assert [len(b) for b in ours_bands] == [3, 2]  # the all-gather and reduce-scatter under GEMMs, per rank
    for ours_rank, their_rank in zip(ours_bands, theirs["bands"]):
        _same_places(sorted(ours_rank), sorted(tuple(b) for b in their_rank))
    assert theirs["colours"] == {lane: _rgb(c) for lane, c in chart.LANE_COLOURS.items()}
    screenshot(page, f"both-ways-timeline-{size}", full_page=False)

    # zoomed in, the axis shows the ticks the server chooses for the window it shows
    plot = viewer.locator(".tlv-plot")
    plot.focus()
    for _ in range(4):
        page.keyboard.press("+")
    page.keyboard.press("ArrowRight")

    def ticks_for_the_window() -> bool:
        ticks = viewer.evaluate(READ_VIEWER)["ticks"]
        if len(ticks) < 2:
            return False
        (a, fa), (b, fb) = [(float(label.split()[0].replace(",", "")), at) for label, at in ticks[:2]]
        per = (b - a) / (fb - fa)  # ms per width of the window
        v0, v1 = a - fa * per, a + (1 - fa) * per
        wanted = [t.label for t in chart.time_ticks(v0, v1).ticks if v0 - 1e-9 <= t.at <= v1 + 1e-9]
        return [label for label, _ in ticks] == wanted

    deadline = page.evaluate("Date.now()") + 5000
    while not ticks_for_the_window():
        assert page.evaluate("Date.now()") < deadline, viewer.evaluate(READ_VIEWER)["ticks"]
        page.wait_for_timeout(100)
    assert not math.isnan(plot.bounding_box()["width"])
    screenshot(page, f"both-ways-timeline-zoomed-{size}", full_page=False)
