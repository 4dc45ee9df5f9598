"""Lesson 07's figures (ring all-reduce phases, ZeRO stages, a pipeline schedule): drawn at a phone's width,
with a text alternative, and every number the one calc computes."""

import xml.etree.ElementTree as ET

import pytest

from app.content import calc
from app.content.figures import pipeline_schedule, ring_phases, zero_stages

SVG = "{http://www.w3.org/2000/svg}"
MODULES = [ring_phases, zero_stages, pipeline_schedule]


def _draw(module, **params):
    return module.SPEC.draw(module.SPEC.params.model_validate(params))


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.SPEC.name)
def test_drawn_for_a_phone_with_a_text_alternative(module):
    d = _draw(module)
    root = ET.fromstring(d.svg)
    assert root.get("viewBox").startswith("0 0 340 ") and d.width == 340  # no sideways scrolling at 390 px
    kids = list(root)
    assert kids[0].tag == f"{SVG}title" and len(kids[1].text) > 60 and root.get("role") == "img"
    assert d.rows and all(len(r) == len(d.columns) for r in d.rows) and d.numbers
    # every label stays inside the drawing: text x within [0, 340] (end-anchored text ends at x)
    for t in root.iter(f"{SVG}text"):
        assert 0 <= float(t.get("x")) <= 340, "".join(t.itertext())


@pytest.mark.parametrize("gpus", [2, 4, 5])
def test_ring_phases_end_in_the_full_sum_having_sent_2_n_minus_1_over_n(gpus):
    states = ring_phases.ring_states(gpus)
    assert len(states) == 1 + 2 * (gpus - 1)
    after_rs = states[gpus - 1][1]  # GPU g holds the full sum of chunk g + 1 and partial sums elsewhere
    assert [row.index(gpus) for row in after_rs] == [(g + 1) % gpus for g in range(gpus)]
    assert all(row.count(gpus) == 1 for row in after_rs)
    assert all(k == gpus for row in states[-1][1] for k in row)
    d = _draw(ring_phases, gpus=gpus)
    assert d.numbers["chunks_sent_per_gpu"] == calc.ring_allreduce(gpus, gpus)["per_gpu"] == 2 * (gpus - 1)
    assert d.numbers["all_done"] == 1


def test_zero_stages_match_calc_and_the_lesson():
    d = _draw(zero_stages, params=7e9, gpus=4)
    assert [d.numbers[f"total_{s}"] for s in range(4)] == [calc.zero_memory(7e9, 4, s)["gb"] for s in range(4)]
    assert [d.numbers[f"total_{s}"] for s in range(4)] == pytest.approx([112, 49, 38.5, 28])
    assert [r[0] for r in d.rows] == ["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"] and d.rows[1][3] == "21.0"  # 12 B ÷ 4


@pytest.mark.parametrize(("stages", "microbatches"), [(4, 8), (2, 1), (8, 4)])
def test_pipeline_bubble_counted_from_the_drawing_is_calcs(stages, microbatches):
    d = _draw(pipeline_schedule, stages=stages, microbatches=microbatches)
    assert d.numbers["idle_fraction"] == pytest.approx(calc.pipeline_bubble(stages, microbatches)["fraction"])
    cells = pipeline_schedule.schedule(stages, microbatches)
    for s, row in enumerate(cells):  # a stage runs microbatch k's backward only after the next stage's
        for k in range(1, microbatches + 1):
            assert row.index(f"F{k}") < row.index(f"B{k}")
            if s + 1 < stages:
                assert cells[s + 1].index(f"F{k}") > row.index(f"F{k}")
                assert cells[s + 1].index(f"B{k}") < row.index(f"B{k}")


def test_pipeline_too_wide_for_a_phone_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="at most 30 time slots"):
        pipeline_schedule.SPEC.params.model_validate({"stages": 8, "microbatches": 16})
