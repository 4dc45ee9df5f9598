"""Part times come from the parts' content through one formula (app/content/timing.py), never typed."""

import math
import shutil

import pytest

from app.content import timing
from app.content.loader import load_course
from app.content.schema import Part

from .conftest import LESSONS


def _part(blocks, intro=None):
    return Part.model_validate({"id": "p", "number": 1, "title": "T", "intro": intro, "blocks": blocks})


def test_the_formula_by_hand():
    body = " ".join(["word"] * 320)  # two minutes of reading at 160 words a minute
    section = {
        "kind": "section",
        "id": "s",
        "title": "Two words",
        "body": body,
        "figures": [{"id": "f", "name": "ring-traffic", "caption": "four words of caption"}],
        "pause": {"id": "q", "prompt": "one two three", "answer": "four five"},
    }
    est = timing.part_minutes(_part([section], intro="six words of intro right here"), {}, {})
    words = 2 + 320 + 4 + 3 + 2 + 6
    assert est.words == words and est.figures == 1 and est.pauses == 1
    expected = words / timing.READING_WPM + timing.FIGURE_MIN + timing.PAUSE_MIN
    assert est.minutes == math.ceil(expected) == 6
    # ids, figure names and parameters are not prose; a code trace is timed by its lines
    trace = {
        "kind": "code_trace",
        "id": "t",
        "title": "A trace",
        "code": "a = 1\nb = 2\nc = 3\nd = 4\n",
        "steps": [{"id": "x", "label": "L", "title": "Step", "body": "read it", "lines": [1]}],
    }
    t = timing.part_minutes(_part([trace]), {}, {})
    assert (t.words, t.code_lines) == (2 + 1 + 2, 4)
    assert t.minutes == math.ceil(5 / timing.READING_WPM + 4 * timing.TRACE_LINE_MIN) == 2


def test_every_shipped_part_is_timed_by_the_formula(course):
    assert course.lessons
    for lesson in course.lessons.values():
        assert timing.typed_mismatches(lesson) == []
        assert lesson.read_time_minutes == sum(p.minutes for p in lesson.parts)


def test_a_typed_minutes_that_disagrees_is_caught(tmp_path):
    shutil.copytree(LESSONS / "transformer-scaling", tmp_path / "transformer-scaling")
    part = tmp_path / "transformer-scaling" / "parts" / "mental-model.yaml"
    part.write_text(part.read_text().replace("title: Mental model\n", "title: Mental model\nminutes: 8\n", 1))
    lesson = load_course(tmp_path).lesson("transformer-scaling")
    assert lesson.part("mental-model").minutes == 8  # as typed
    (problem,) = timing.typed_mismatches(lesson)
    assert problem.startswith("transformer-scaling/parts/mental-model.yaml: minutes 8, but its core takes")
    assert "words at 160 a minute" in problem


@pytest.mark.parametrize("part_id", ["deep-dives", "mental-model"])
def test_more_content_takes_more_time(l06, part_id):
    part = l06.part(part_id)
    grown = part.model_copy(
        update={"blocks": [*part.blocks, _part([{"kind": "markdown", "body": " ".join(["w"] * 480)}]).blocks[0]]}
    )
    assert timing.part_minutes(grown, l06.questions, {}).minutes == part.minutes + 3


def test_optional_depth_is_timed_apart(l06):
    body = " ".join(["word"] * 480)  # three minutes of reading
    core = {"kind": "section", "id": "a", "title": "T", "body": body}
    depth = {**core, "id": "b", "label": "Optional depth"}
    est = timing.part_minutes(_part([core, depth]), {}, {})
    assert est.minutes == math.ceil((480 + 1) / timing.READING_WPM) and est.optional == est.minutes
    # lesson 06: its deep dives hold the optional sections; the header's read time is the core alone
    deep = l06.part("deep-dives")
    assert deep.optional_minutes > deep.minutes / 2 > 0
    assert all(p.optional_minutes == 0 for p in l06.parts if p.id != "deep-dives")
    assert l06.read_time_minutes == sum(p.minutes for p in l06.parts)
    assert l06.optional_minutes == deep.optional_minutes
