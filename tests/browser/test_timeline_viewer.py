"""The timeline viewer of a lab result and the Perfetto hand-off, in real Chromium against a live server.

A planted overlap-trace job holds the golden run (labs/overlap_trace/golden) with its windowed trace laid out as three measured
steps (the golden run has one), so the step selector has something to choose, and with each rank's independent work
moved inside its all-gather, so there is an overlap window to shade whatever the golden run measured. Boxes are measured at 1280x800 and
390x844; the viewer is walked by keyboard alone; ui.perfetto.dev is never reached: a stand-in page, served by the
browser context's router, answers Perfetto's documented PING/PONG in its place and says what it was sent.
Screenshots: test-artifacts/screenshots/timeline-*.png.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from labs.api import time_ticks
from tests.browser.conftest import SHOTS, SIZES, screenshot
from tests.browser.seed import Seeder
from tests.browser.test_lesson_quality import serious_violations

pytestmark = pytest.mark.browser

STEPS = 3

# Stands in for ui.perfetto.dev: answers PING with PONG as Perfetto UI does, then shows what the trace message held.
STAND_IN = """<!doctype html><title>stand-in</title><body><p id="got">nothing yet</p><script>
addEventListener('message', e => {
  if (e.data === 'PING') { e.source.postMessage('PONG', '*'); return; }
  const p = e.data && e.data.perfetto;
  if (p) document.getElementById('got').textContent =
    JSON.stringify({title: p.title, fileName: p.fileName, bytes: p.buffer.byteLength, origin: e.origin});
});
</script></body>"""


def _plant_overlap(spans: list[dict]) -> None:
    """Each rank's independent linear moved into the middle half of its all-gather, so every rank has an overlap
    window to shade whatever the golden run's timing happened to be."""
    for pid in {e["pid"] for e in spans}:
        comm = next(e for e in spans if e["pid"] == pid and e["cat"] == "communication")
        ind = next(e for e in spans if e["pid"] == pid and e["name"].startswith("independent"))
        ind["ts"], ind["dur"] = comm["ts"] + comm["dur"] / 4, comm["dur"] / 2


def _three_steps(path) -> None:
    """The trace's one measured step, with an overlap planted on each rank, repeated as steps 0, 1, 2 (each starting
    1 ms after the last ends)."""
    trace = json.loads(path.read_text())
    meta = [e for e in trace["traceEvents"] if e["ph"] != "X"]
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    _plant_overlap(spans)
    t0, t1 = min(e["ts"] for e in spans), max(e["ts"] + e["dur"] for e in spans)
    events = list(meta)
    for k in range(STEPS):
        events += [{**e, "ts": e["ts"] + k * (t1 - t0 + 1000), "args": {**e["args"], "step": k}} for e in spans]
    path.write_text(json.dumps({**trace, "traceEvents": events}))


@pytest.fixture(scope="module")
def planted(live_server):
    s = Seeder(live_server.data)
    uid = s.user("timeline@example.org", name="Tim")
    job = s.job(uid, "overlap-trace")
    s.close()
    _three_steps(live_server.data / f"jobs/{job}/attempt-1/trace_windowed.json")
    return job


def _open(open_page, live_server, planted, size):
    page = open_page(size, "timeline@example.org")
    page.context.route(
        "https://ui.perfetto.dev/**", lambda route: route.fulfill(body=STAND_IN, content_type="text/html")
    )
    page.goto(f"{live_server.url}/jobs/{planted}")
    viewer = page.locator("section.tlv")
    expect(viewer).to_be_visible()
    expect(viewer.locator(".tlv-span").first).to_be_visible()
    return page, viewer


# Each tick of the first timeline: its label and the x of its mark (a label near the plot's edge is moved by --shift,
# its mark is not), and the label's box.
READ_TICKS = """(plot) => [...plot.querySelectorAll('.tlv-tick')].map(t => {
  const b = t.getBoundingClientRect(), shift = parseFloat(t.style.getPropertyValue('--shift')) || 0;
  return {label: t.textContent, mark: b.left + b.width / 2 - shift, left: b.left, right: b.right};
})"""


def _ticks(viewer) -> list[dict]:
    return viewer.locator(".tlv-plot").first.evaluate(READ_TICKS)


def _px_per_ms(viewer) -> float:
    """The axis scale, from two tick marks' positions and labels ("0.25 ms")."""
    a, b = _ticks(viewer)[:2]
    (x0, x1), (t0, t1) = (a["mark"], b["mark"]), [float(t["label"].split()[0].replace(",", "")) for t in (a, b)]
    return (x1 - x0) / (t1 - t0)


def _settled(viewer) -> None:
    """Wait for the axis the server chose for the view: while its answer is on the way the timelines are aria-busy
    and still show the ticks held before (static/timeline.js)."""
    expect(viewer.locator("[data-role=panels]")).not_to_have_attribute("aria-busy", "true")


def _tick_x(viewer) -> dict[str, float]:
    """Each tick label of the first timeline and the x of its mark."""
    return {t["label"]: t["mark"] for t in _ticks(viewer)}


def _pick_trace(viewer, label: str) -> None:
    viewer.get_by_label("Trace", exact=True).select_option(label=label)
    expect(viewer.locator(".tlv-title").first).to_contain_text(label)


@pytest.mark.parametrize("size", list(SIZES))
def test_the_viewer_fits_its_box_and_answers_hover(open_page, live_server, planted, size):
    page, viewer = _open(open_page, live_server, planted, size)
    width = SIZES[size][0]
    _pick_trace(viewer, "windowed")
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") == 0
    box = viewer.bounding_box()
    plot = viewer.locator(".tlv-plot").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width
    assert plot["x"] >= box["x"] and plot["x"] + plot["width"] <= box["x"] + box["width"] + 0.5
    # every span of the step lies inside the plot: nothing is cut off at either width
    for span in viewer.locator(".tlv-span").all():
        b = span.bounding_box()
        assert plot["x"] <= b["x"] and b["x"] + b["width"] <= plot["x"] + plot["width"] + 0.5
    # all ranks on one axis, the overlap window shaded, the server's timelines hidden behind the viewer
    expect(viewer.locator(".tlv-rank-name")).to_have_text(["rank 0", "rank 1"])
    assert viewer.locator(".tlv-band").count() == 2  # the planted overlap of each rank in the step shown
    expect(page.locator("figure.plot.wide").first).to_be_hidden()
    # the step selector: three steps and "all"; the last is shown first, as the drawn timeline does
    step = viewer.get_by_label("Step", exact=True)
    assert step.locator("option").count() == STEPS + 1
    expect(viewer.locator(".tlv-title")).to_contain_text(f"step {STEPS} of {STEPS}")
    step.select_option(index=0)
    expect(viewer.locator(".tlv-title")).to_contain_text("step 1")
    # hover: name, start, length in the status line
    comm = viewer.locator(".tlv-span.tlv-communication").first
    comm.hover()
    readout = viewer.locator("[data-role=readout]")
    expect(readout).to_contain_text("all-gather (async)")
    expect(readout).to_contain_text("starts ")
    expect(readout).to_contain_text("lasts ")
    # zoom in with the button: a millisecond takes 1.5 times the pixels it took
    before = _px_per_ms(viewer)
    viewer.get_by_role("button", name="Zoom in").click()
    _settled(viewer)
    assert _px_per_ms(viewer) == pytest.approx(1.5 * before, rel=0.02)
    viewer.get_by_role("button", name="Fit").click()
    screenshot(page, f"timeline-viewer-{size}")
    viewer.screenshot(path=str(SHOTS / f"timeline-viewer-{size}-box.png"))
    assert serious_violations(page) == []


def test_keyboard_alone_zooms_pans_and_reads_every_span(open_page, live_server, planted):
    page, viewer = _open(open_page, live_server, planted, "laptop")
    _pick_trace(viewer, "windowed")
    viewer.get_by_role("button", name="Fit").focus()
    page.keyboard.press("Tab")  # from the last control to the timeline itself
    plot = viewer.locator(".tlv-plot")
    expect(plot).to_be_focused()
    _settled(viewer)
    ticks, scale = viewer.locator(".tlv-tick").all_inner_texts(), _px_per_ms(viewer)
    page.keyboard.press("+")
    expect(plot).to_be_focused()
    _settled(viewer)
    assert _px_per_ms(viewer) == pytest.approx(1.5 * scale, rel=0.02)  # the window narrowed
    # to the ticks the server chose for it (the middle two thirds of the step, asked for with a width either side)
    dur = page.context.request.get(f"{live_server.url}/jobs/{planted}/artifacts/trace_windowed?as=timeline").json()
    dur = dur["steps"][-1]["dur_ms"]
    v0, v1 = dur / 6, dur * 5 / 6
    wanted = [t.label for t in time_ticks(0.0, v1 + (v1 - v0), width=v1 - v0).ticks if v0 <= t.at <= v1]
    assert viewer.locator(".tlv-tick").all_inner_texts() == wanted != ticks
    zoomed, track = _tick_x(viewer), viewer.locator(".tlv-track").first.bounding_box()["width"]
    page.keyboard.press("ArrowRight")
    _settled(viewer)
    panned = _tick_x(viewer)
    both = zoomed.keys() & panned.keys()
    assert both, (zoomed, panned)
    for label in both:  # and moved later by a fifth of its width: each time shown is drawn that much further left
        assert panned[label] - zoomed[label] == pytest.approx(-0.2 * track, abs=1.5), label
    page.keyboard.press("0")
    _settled(viewer)
    assert viewer.locator(".tlv-tick").all_inner_texts() == ticks  # fit again
    page.keyboard.press("Tab")  # into the spans: one tab stop
    focused = page.locator(".tlv-span:focus")
    expect(focused).to_have_count(1)
    readout = viewer.locator("[data-role=readout]")
    first = readout.inner_text()
    assert first == focused.get_attribute("aria-label") and "rank 0" in first and "lasts" in first
    page.keyboard.press("ArrowRight")  # the next span along the lane
    expect(readout).not_to_have_text(first)
    seen = {readout.inner_text()}
    for _ in range(6):  # down through the lanes and ranks: every lane is reachable
        page.keyboard.press("ArrowDown")
        seen.add(readout.inner_text())
    assert any("rank 1" in t for t in seen) and any("communication" in t for t in seen)
    page.keyboard.press("Tab")  # one press leaves the spans for the next control
    expect(page.locator(".tlv-span:focus")).to_have_count(0)
    screenshot(page, "timeline-keyboard-laptop", full_page=False)


@pytest.mark.parametrize("size", list(SIZES))
def test_two_traces_stack_on_aligned_axes(open_page, live_server, planted, size):
    page, viewer = _open(open_page, live_server, planted, size)
    _pick_trace(viewer, "windowed")
    viewer.get_by_label("Compare with", exact=True).select_option(label="immediate")
    expect(viewer.locator(".tlv-panel")).to_have_count(2)
    _settled(viewer)
    tracks = [p.locator(".tlv-track").first.bounding_box() for p in viewer.locator(".tlv-panel").all()]
    assert abs(tracks[0]["x"] - tracks[1]["x"]) < 0.5 and abs(tracks[0]["width"] - tracks[1]["width"]) < 0.5
    axes = [p.locator(".tlv-tick").all_inner_texts() for p in viewer.locator(".tlv-panel").all()]
    assert axes[0] == axes[1]  # one time window for both
    screenshot(page, f"timeline-compare-{size}")
    viewer.screenshot(path=str(SHOTS / f"timeline-compare-{size}-box.png"))
    viewer.get_by_role("button", name="Zoom in").click()
    _settled(viewer)
    axes = [p.locator(".tlv-tick").all_inner_texts() for p in viewer.locator(".tlv-panel").all()]
    assert axes[0] == axes[1] and len(axes[0]) >= 2


@pytest.mark.parametrize("size", list(SIZES))
def test_tick_labels_stay_apart_and_inside_the_plot(open_page, live_server, planted, size):
    """However far the learner zooms, the axis's labels neither overlap nor run past the plot's edges: the server's
    tick rule leaves them room on the narrowest axis, and the page moves an edge label inside."""
    page, viewer = _open(open_page, live_server, planted, size)
    _pick_trace(viewer, "windowed")
    plot = viewer.locator(".tlv-plot").first
    seen: set[str] = set()

    def check(view: str) -> None:
        _settled(viewer)
        inner = plot.evaluate(
            "p => { const b = p.getBoundingClientRect(); return [b.left + p.clientLeft, "
            "b.left + p.clientLeft + p.clientWidth]; }"
        )
        ticks = _ticks(viewer)
        assert len(ticks) >= 2, (view, ticks)
        for a, b in zip(ticks, ticks[1:]):
            assert a["right"] + 4 <= b["left"], (view, a, b)  # a gap of a few px between neighbours
        assert inner[0] - 0.5 <= ticks[0]["left"] and ticks[-1]["right"] <= inner[1] + 0.5, (view, inner, ticks)
        seen.update(t["label"] for t in ticks)

    for step in ("last", "all"):
        if step == "all":
            viewer.get_by_label("Step", exact=True).select_option(value="all")
        plot.focus()
        page.keyboard.press("0")
        check(f"{step}, fitted")
        for k in range(1, 13):
            page.keyboard.press("+")
            page.keyboard.press("ArrowRight" if k % 2 else "ArrowLeft")
            check(f"{step}, zoomed {k} times")
    assert any("." in label for label in seen)  # windows narrow enough for decimals were among them
    screenshot(page, f"timeline-zoomed-{size}", full_page=False)


def test_download_is_a_named_json_file(open_page, live_server, planted):
    page, viewer = _open(open_page, live_server, planted, "laptop")
    _pick_trace(viewer, "windowed")
    with page.expect_download() as dl:
        viewer.get_by_role("link", name="Download trace (.json)").click()
    assert dl.value.suggested_filename == f"overlap-trace-job{planted}-windowed.json"


def test_open_in_perfetto_opens_ui_perfetto_dev(open_page, live_server, planted):
    page, viewer = _open(open_page, live_server, planted, "laptop")
    _pick_trace(viewer, "windowed")
    button = viewer.get_by_role("button", name="Open in Perfetto UI (needs the internet)")
    with page.expect_popup() as popup:
        button.click()
    assert popup.value.url == "https://ui.perfetto.dev/"


def test_perfetto_ui_receives_the_trace_by_ping_pong(open_page, live_server, planted):
    page, viewer = _open(open_page, live_server, planted, "laptop")
    _pick_trace(viewer, "windowed")
    size = len(page.context.request.get(f"{live_server.url}/jobs/{planted}/artifacts/trace_windowed").body())
    with page.expect_popup() as popup:
        viewer.get_by_role("button", name="Open in Perfetto UI (needs the internet)").click()
    expect(popup.value.locator("#got")).not_to_have_text("nothing yet", timeout=5_000)
    got = json.loads(popup.value.locator("#got").inner_text())
    assert got["fileName"] == f"overlap-trace-job{planted}-windowed.json"
    assert got["title"] == f"overlap-trace · job {planted} · windowed" and got["bytes"] == size
    expect(viewer.locator("[data-role=perfetto-status]")).to_contain_text("Sent ")


def test_without_javascript_the_drawn_timelines_stay(open_page, live_server, planted):
    page = open_page("phone", "timeline@example.org", js=False)
    page.goto(f"{live_server.url}/jobs/{planted}")
    expect(page.locator("section.tlv")).to_be_hidden()
    expect(page.locator("figure.plot.wide").first).to_be_visible()
