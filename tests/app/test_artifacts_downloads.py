"""A lab's Chrome trace downloads as `<lab>-job<N>-<schedule>.json` (an attachment, so the browser saves it for
Perfetto instead of showing raw JSON), plots and result.json still open in the tab, and `?as=timeline` answers the
trace as the page's timeline viewer reads it. Jobs hold the committed golden runs (labs/<lab>/golden)."""

from __future__ import annotations

import json

import pytest

from app.services.jobs import artifacts, timelines
from tests.app import labruns
from tests.app.reporting import finished_job


@pytest.fixture
def ann(client, db):
    from app.core.models import User

    client.register("ann@example.org")
    return db.query(User).filter_by(email="ann@example.org").one()


@pytest.mark.parametrize(
    "lab,name,saved_as",
    [
        ("overlap-trace", "trace_windowed", "overlap-trace-job{id}-windowed.json"),
        ("overlap-trace", "trace_windowed.json", "overlap-trace-job{id}-windowed.json"),  # by its path, the same
        ("tp-sweep", "trace_tp2", "tp-sweep-job{id}-tp2.json"),
    ],
)
def test_a_trace_downloads_as_a_named_attachment(client, db, settings, ann, lab, name, saved_as):
    job = finished_job(db, settings, ann, lab)
    for path in (f"/jobs/{job.id}/artifacts/{name}", f"/api/v1/jobs/{job.id}/artifacts/{name}"):
        r = client.get(path)
        assert r.status_code == 200
        assert r.headers["content-disposition"] == f'attachment; filename="{saved_as.format(id=job.id)}"'
        assert r.headers["content-type"].startswith("application/json")
        assert r.headers["content-security-policy"].startswith("default-src 'none'")  # still sandboxed
        assert r.content == (labruns.bundle(lab) / name.removesuffix(".json")).with_suffix(".json").read_bytes()


def test_plots_and_result_json_still_open_in_the_tab(client, db, settings, ann):
    job = finished_job(db, settings, ann, "overlap-trace")
    for name in ("timeline_windowed", "result.json"):
        r = client.get(f"/jobs/{job.id}/artifacts/{name}")
        assert r.status_code == 200 and "content-disposition" not in r.headers


def test_the_viewer_reads_a_trace_by_step_with_its_words(client, db, settings, ann):
    job = finished_job(db, settings, ann, "tp-sweep")
    r = client.get(f"/jobs/{job.id}/artifacts/trace_tp2?as=timeline")
    assert r.status_code == 200 and "content-disposition" not in r.headers
    data = r.json()
    assert data["title"] == f"tp-sweep · job {job.id} · tp2"
    assert data["file_name"] == f"tp-sweep-job{job.id}-tp2.json"
    assert [r["name"] for r in data["ranks"]] == ["rank 0", "rank 1"]
    assert [lane["name"] for lane in data["lanes"]] == ["compute", "communication", "wait"]
    trace = json.loads((labruns.bundle("tp-sweep") / "trace_tp2.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(data["spans"]) == len(spans)
    # times from the step's start, on one clock for both ranks: the earliest span of the step starts at 0
    assert min(s["start_ms"] for s in data["spans"]) == 0
    reduce_y = next(s for s in data["spans"] if s["rank"] == 0 and s["name"].startswith("all-reduce Y"))
    event = next(e for e in spans if e["pid"] == 0 and e["name"].startswith("all-reduce Y"))
    assert reduce_y["dur_ms"] == pytest.approx(event["dur"] / 1000)
    assert reduce_y["words"]["bytes"] == "2.0 KiB"  # labs.api.byte_size(2048): the one formatter
    assert reduce_y["words"]["duration"].endswith(" ms")


def test_bad_view_names_the_parameter(client, db, settings, ann):
    job = finished_job(db, settings, ann, "tp-sweep")
    r = client.get(f"/jobs/{job.id}/artifacts/trace_tp2?as=flamegraph")
    assert r.status_code == 422
    assert "as" in r.text and "timeline" in r.text and "chart" in r.text


def test_a_trace_that_is_not_one_is_refused_in_words(tmp_path):
    root = labruns.copy_to("overlap-trace", tmp_path / "b")
    result = labruns.result("overlap-trace")
    (root / "trace_windowed.json").write_text('{"traceEvents": [{"ph": "X", "name": "no times"}]}')
    found = artifacts.in_folder(root, result, "trace_windowed", "Upload 1", "upload1")
    assert found.download_name == "overlap-trace-upload1-windowed.json"
    with pytest.raises(artifacts.NotFound, match="holds no spans to draw"):
        timelines.timeline(found, title="t")
    (root / "trace_windowed.json").write_text("[1, 2")
    with pytest.raises(artifacts.NotFound, match="trace_windowed.json is not valid JSON: Expecting"):
        timelines.timeline(found, title="t")


def test_the_compare_partial_stacks_run_b_under_run_a_by_trace_name(db, settings, ann):
    """templates/jobs/_timeline_compare.html, for the lab page's "Compare two runs": A's first trace on top, B's
    trace of the same name below, each with its run named."""
    from app.web.templates import templates

    a, b = (finished_job(db, settings, ann, "overlap-trace") for _ in range(2))
    html = templates.env.get_template("jobs/_timeline_compare.html").render(a=a, b=b)
    section = html[html.index("<section") :]
    traces = json.loads(section.split("data-traces='", 1)[1].split("'", 1)[0])
    first, second = (int(section.split(f'data-{k}="', 1)[1].split('"', 1)[0]) for k in ("first", "second"))
    assert traces[first]["source"] == f"A · #{a.id}" and traces[second]["source"] == f"B · #{b.id}"
    assert traces[first]["key"] == traces[second]["key"] == "trace_immediate"
    assert traces[second]["data"] == f"/jobs/{b.id}/artifacts/trace_immediate?as=timeline"


def test_the_lab_pages_comparison_stacks_the_two_runs_timelines(client, db, settings, ann):
    """/labs/<lab>/compare shows the two runs' traces in the viewer under the table, whole page and htmx."""
    a, b = (finished_job(db, settings, ann, "overlap-trace") for _ in range(2))
    for headers in ({}, {"HX-Request": "true"}):
        r = client.get(f"/labs/overlap-trace/compare?a={a.id}&b={b.id}", headers=headers)
        assert r.status_code == 200
        assert 'data-testid="comparison"' in r.text
        viewer = r.text[r.text.index('data-testid="comparison"') :]
        assert f"/jobs/{b.id}/artifacts/trace_immediate?as=timeline" in viewer, viewer[:3000]
