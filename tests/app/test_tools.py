"""The interactive lesson's calculators: seed numbers, bad input named, page and API agree."""

import pytest


@pytest.fixture
def learner(client):
    client.register("ann@example.org")
    return client


def test_fp8_range_reproduces_the_worked_example(learner):
    fits = learner.get("/api/v1/tools/fp8-range", params={"amax": 240, "value": 120}).json()["result"]
    assert fits["scale"] == pytest.approx(448 / 240, rel=1e-6)
    assert fits["stored"] == pytest.approx(224, abs=8) and not fits["clipped"]
    spike = learner.get("/api/v1/tools/fp8-range", params={"amax": 240, "value": 300}).json()["result"]
    assert spike["scaled"] == pytest.approx(560, rel=1e-3) and spike["clipped"] and spike["stored"] == 448


def test_overlap_window_step_identity(learner):
    r = learner.get("/api/v1/tools/overlap-window", params={"compute_ms": 12, "comm_ms": 5, "window_ms": 3}).json()
    assert r["result"]["total"] == 14 and r["result"]["exposed"] == 2
    r = learner.get(
        "/api/v1/tools/overlap-window",
        params={"compute_ms": 12, "comm_ms": 5, "window_ms": 3, "consumer_reads_result": "true"},
    ).json()
    assert r["result"]["total"] == 17 and r["result"]["unsafe"] is True


def test_parallel_axis_prediction_is_labeled(learner):
    r = learner.get("/api/v1/tools/parallel-axis", params={"tokens": 512, "hidden": 1024, "ffn": 4096}).json()["result"]
    assert r["label"] == "predicted" and [row["degree"] for row in r["per_degree"]] == [1, 2, 4, 8]
    page = learner.get(
        "/play/parallel-axis", params={"tokens": 512, "hidden": 1024, "ffn": 4096}, headers={"HX-Request": "true"}
    ).text
    assert "Predicted, not measured" in page


@pytest.mark.parametrize(
    "tool,params,field",
    [
        ("fp8-range", {"amax": -1}, "amax"),
        ("fp8-range", {"fmt": "E3M4"}, "fmt"),
        ("overlap-window", {"compute_ms": 2, "window_ms": 3}, "window_ms"),
        ("parallel-axis", {"tokens": "many"}, "tokens"),
    ],
)
def test_bad_input_names_the_field(learner, tool, params, field):
    r = learner.get(f"/api/v1/tools/{tool}", params=params)
    assert r.status_code == 422 and field in r.json()["detail"]
    page = learner.get(f"/play/{tool}", params=params, headers={"HX-Request": "true"})
    assert page.status_code == 422 and 'role="alert"' in page.text


def test_play_page_and_unknown_tool(learner):
    assert "Play the interactive lesson" in learner.get("/play").text
    assert learner.get("/api/v1/tools/warp").status_code == 404


def test_without_htmx_the_whole_page_comes_back(learner):
    """The forms work without JavaScript (noscript submit): the full page with that tool's answer."""
    page = learner.get("/play/fp8-range", params={"amax": 240, "value": 120})
    assert page.status_code == 200 and "<html" in page.text and "Play the interactive lesson" in page.text
    assert 'value="120.0"' in page.text
    fragment = learner.get("/play/fp8-range", params={"amax": 240, "value": 120}, headers={"HX-Request": "true"})
    assert "<form" not in fragment.text and "scaled value" in fragment.text
