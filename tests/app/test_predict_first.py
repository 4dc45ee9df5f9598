"""Predict, then check: a calculator opened from a pause keeps its answer back until the learner's number is in."""

import re

import pytest

SCENARIO = {"compute_ms": 12, "comm_ms": 5, "window_ms": 0, "predicts": "total"}


def _out(page: str, tool: str) -> str:
    m = re.search(rf'<div id="out-{tool}" aria-live="polite">(.*?)</section>', page, re.S)
    assert m, tool
    return re.sub(r"\s+", " ", m.group(1))


@pytest.fixture
def learner(client):
    client.register("ann@example.org")
    return client


def test_the_answer_waits_for_the_prediction(learner):
    page = learner.get("/play/overlap-window", params=SCENARIO).text
    out = _out(page, "overlap-window")
    assert "appears once your number is in" in out and "the step time" in out
    assert "17 ms" not in out and "step time =" not in out  # neither the verdict box nor the tool's own answer
    assert 'name="predict"' in page  # the field to type it in is there

    typed = _out(learner.get("/play/overlap-window", params={**SCENARIO, "predict": "16"}).text, "overlap-window")
    assert "appears once your number is in" not in typed
    assert "You predicted the step time: <strong>16 ms</strong>" in typed and "17 ms" in typed

    # the htmx answer to the form (the learner typing) follows the same rule
    hx = learner.get("/play/overlap-window", params=SCENARIO, headers={"HX-Request": "true"}).text
    assert "appears once your number is in" in hx and "17 ms" not in hx


def test_without_a_pause_the_calculator_answers_at_once(learner):
    out = _out(
        learner.get("/play/overlap-window", params={"compute_ms": 12, "comm_ms": 5, "window_ms": 0}).text,
        "overlap-window",
    )
    assert "appears once your number is in" not in out and "17 ms" in out
