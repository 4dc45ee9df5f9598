"""What the page's plots and timeline viewer draw comes from the server, computed by the code that drew the lab's
SVGs: `?as=chart` plans a chart artifact (one run, or two runs on one axis with `with=`), `?as=timeline` carries
lane colours, overlap windows and each view's ticks, and /api/v1/charts/time-ticks answers a zoomed window. Jobs hold
the committed golden runs (labs/<lab>/golden)."""

from __future__ import annotations

import pytest

from app.services.accounts import users
from labs.api import LANE_COLOURS, overlap_windows, plan_line_chart, read_specs, time_ticks
from labs.trace.timeline import Span
from tests.app import labruns
from tests.app.reporting import finished_job


@pytest.fixture
def ann(client, db):
    from app.core.models import User

    client.register("ann@example.org")
    return db.query(User).filter_by(email="ann@example.org").one()


def test_a_chart_is_served_as_planned_from_its_svg(client, db, settings, ann):
    job = finished_job(db, settings, ann, "fp8-step")
    r = client.get(f"/jobs/{job.id}/artifacts/loss_curves?as=chart")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    (panel,) = r.json()["panels"]
    (spec,) = read_specs((labruns.bundle("fp8-step") / "loss.svg").read_text())
    planned = plan_line_chart(spec).to_json()
    assert panel["y"]["ticks"] == [{"at": t["at"], "label": t["label"]} for t in planned["y"]["ticks"]]
    assert [line["name"] for line in panel["lines"]] == ["BF16 reference", "FP8 delayed"]
    assert all(line["colour"].startswith("#") and len(line["values"]) == len(line["points"]) for line in panel["lines"])
    assert [s["label"] for s in panel["steps"]] == ["0", "1", "2", "3"]
    # the page rings the clipped steps as the drawing does, as many as the result counts (all of them, at 4 steps)
    clipped = labruns.result("fp8-step")["results"]["clipping"]["steps_with_clipping"]
    assert clipped and panel["lines"][1]["rings"] == clipped and panel["ring"]["label"] == "clipped step"


def test_a_sweep_chart_is_two_panels(client, db, settings, ann):
    job = finished_job(db, settings, ann, "tp-sweep")
    panels = client.get(f"/jobs/{job.id}/artifacts/sweep_plot?as=chart").json()["panels"]
    assert [p["title"].split(" ")[0] for p in panels] == ["Measured", "Predicted"]
    # one margin and one set of degrees as x ticks, so a degree sits at one x in both panels
    assert panels[0]["left"] == panels[1]["left"] and panels[0]["x"] == panels[1]["x"]
    assert {"1", "2"} <= {t["label"] for t in panels[0]["x"]["ticks"]}
    assert all(line["marker"]["shape"] for p in panels for line in p["lines"])  # a few degrees: every line marked


def test_two_runs_of_one_chart_overlay_on_one_axis(client, db, settings, ann):
    a, b = (finished_job(db, settings, ann, "fp8-step") for _ in range(2))
    r = client.get(f"/jobs/{a.id}/artifacts/loss_curves?as=chart&with={b.id}")
    (panel,) = r.json()["panels"]
    assert [line["name"] for line in panel["lines"]] == [
        f"A · #{a.id} · BF16 reference",
        f"A · #{a.id} · FP8 delayed",
        f"B · #{b.id} · BF16 reference",
        f"B · #{b.id} · FP8 delayed",
    ]
    assert [line["dash"] != "" for line in panel["lines"]] == [False, False, True, True]
    # another learner's run is not one to overlay, and says so as a missing one would
    bob = users.create_user(db, email="bob@example.org", password="correct horse", display_name="Bob")
    theirs = finished_job(db, settings, bob, "fp8-step")
    r = client.get(f"/jobs/{a.id}/artifacts/loss_curves?as=chart&with={theirs.id}")
    assert r.status_code == 404 and f"No job {theirs.id} that you can see" in r.text


def test_a_file_that_is_no_chart_is_refused_in_words(client, db, settings, ann):
    job = finished_job(db, settings, ann, "fp8-step")
    r = client.get(f"/jobs/{job.id}/artifacts/result.json?as=chart")
    assert r.status_code == 404 and "not a chart" in r.text
    (settings.data_dir / job.bundle_dir / "loss.svg").write_text(
        '<svg><metadata data-plot="line-chart">{</metadata></svg>'
    )
    r = client.get(f"/jobs/{job.id}/artifacts/loss_curves?as=chart")
    assert r.status_code == 404 and "not JSON" in r.text


def test_the_timeline_carries_colours_overlap_windows_and_ticks(client, db, settings, ann):
    job = finished_job(db, settings, ann, "overlap-trace")
    data = client.get(f"/jobs/{job.id}/artifacts/trace_windowed?as=timeline").json()
    assert {lane["name"]: lane["colour"] for lane in data["lanes"]} == {
        lane: LANE_COLOURS[lane] for lane in (lane["name"] for lane in data["lanes"])
    }
    (step,) = data["steps"]
    assert step["name"] == "step 1 of 1" and step["offset_ms"] == 0
    assert step["ticks"] == time_ticks(0.0, step["dur_ms"]).to_json()
    assert data["all"]["dur_ms"] == step["dur_ms"]
    for rank in data["ranks"]:
        mine = [s for s in data["spans"] if s["rank"] == rank["rank"]]
        spans = [Span(s["rank"], s["lane"], s["name"], s["start_ms"], s["start_ms"] + s["dur_ms"]) for s in mine]
        windows = next(o["windows"] for o in step["overlap"] if o["rank"] == rank["rank"])
        assert windows == [list(w) for w in overlap_windows(spans, rank["rank"])]


def test_a_zoomed_window_asks_for_its_ticks(client):
    r = client.get("/api/v1/charts/time-ticks?lo=1.13&hi=1.87")
    assert r.status_code == 200
    ticks = r.json()
    assert ticks["step"] == 0.2 and ticks["min_width"] < 0.74 <= ticks["max_width"]
    assert ticks["lo"] <= 1.13 and ticks["hi"] >= 1.87  # and a window's width either side, for panning
    assert "1.4 ms" in [t["label"] for t in ticks["ticks"]]
    # short of 10 ms the answer stops there: its labels, one digit each, are spaced as the window's own need (with
    # the two-digit "10.5 ms" in it, they would be a whole millisecond apart)
    near = client.get("/api/v1/charts/time-ticks?lo=5.5&hi=8").json()
    assert near == time_ticks(3.0, 10.0, width=2.5).to_json() and near["step"] == 0.5
    assert [t["label"] for t in near["ticks"] if 5.5 <= t["at"] <= 8] == [t.label for t in time_ticks(5.5, 8).ticks]
    for query, field in [("lo=2&hi=1", "hi"), ("lo=-1&hi=1", "lo"), ("lo=0&hi=nan", "hi"), ("lo=0", "hi")]:
        r = client.get(f"/api/v1/charts/time-ticks?{query}", headers={"Accept": "application/json"})
        assert r.status_code == 422 and field in r.text, (query, r.text)
