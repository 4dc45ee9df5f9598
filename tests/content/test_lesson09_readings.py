"""Lesson 09's three readings: network topology, overlap in real systems, low precision at scale.

Each is a part of its own with a pause per section, a source for every section, and two to four practice
questions whose numeric keys come from a generator (app/content/practice/atscale.py), never a typed answer.
"""

import pytest

from app.content.practice import grade, make_variant

READINGS = {
    "network-topology": {"topo-all-gather", "topo-all-to-all", "topo-which-bound"},
    "overlap-in-practice": {"ov-ddp-buckets", "ov-fsdp-prefetch", "ov-async-tp"},
    "low-precision-at-scale": {"lp-bits-per-element", "lp-both-copies", "lp-transpose"},
}


@pytest.fixture(scope="module")
def l09(course):
    lesson = course.lesson("parallelism-measured")
    assert lesson is not None, [str(e) for e in course.errors]
    return lesson


@pytest.mark.parametrize("part_id", sorted(READINGS))
def test_each_reading_pauses_cites_and_practises(l09, part_id):
    part = l09.part(part_id)
    sections = [b for b in part.blocks if b.kind == "section"]
    assert sections and all(s.pause for s in sections)
    assert all(s.source for s in sections if s.id != "topo-your-nodes"), "a reading cites where its facts come from"
    asked = {q for b in part.blocks if b.kind == "questions" for q in b.ids}
    assert asked == READINGS[part_id] and 2 <= len(asked) <= 4
    for qid in asked:
        body = l09.questions[qid].body
        if body.kind == "numeric":
            assert body.generator and body.answer is None, f"{qid}: a computed key, not a typed one"


def test_readings_follow_the_labs(l09):
    ids = [p.id for p in l09.parts]
    assert ids[-3:] == ["network-topology", "overlap-in-practice", "low-precision-at-scale"]
    assert ids.index("collectives-lab") < ids.index("network-topology")


@pytest.mark.parametrize(
    ("qid", "says"),
    [
        ("topo-all-gather", "ring per rail"),
        ("topo-all-to-all", "whole node's egress"),
        ("ov-fsdp-prefetch", "no prefetch"),
        ("ov-async-tp", "whole all-gather"),
    ],
)
def test_the_known_mistake_is_named(l09, qid, says):
    """The first mistake a generator names (the price the reading warns about) is graded wrong, with its reason."""
    q = l09.questions[qid]
    for seed in range(8):
        v = make_variant(q, seed)
        assert grade(q, v, f"{v.answer!r}").correct
        mistakes = v.values["mistakes"]
        value = mistakes[0][0]
        if abs(value - v.answer) > 0.05 * abs(v.answer):
            fb = grade(q, v, f"{value!r}")
            assert not fb.correct and says in fb.message, (seed, fb.message)
