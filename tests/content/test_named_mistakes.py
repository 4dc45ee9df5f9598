"""Every numeric question of lessons 07 to 09 names the common mistakes behind a wrong answer, as lesson 06's do:
at least two wrong values, each told apart from the key by the question's tolerance, in every learner's draw.

A named mistake counts as a try and its feedback says which idea went wrong; a named slip (a unit read wrong) gets
a hint. Fixed questions name theirs in the YAML (`mistakes:`), generators compute theirs
(app/content/practice/)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.content.loader import validate_lesson_texts
from app.content.practice import grade, make_variant
from app.content.practice.grading import step_question
from app.content.schema import MultiStep, Numeric
from tests.content.test_practice import numeric

LESSONS = ("precision-by-numbers", "planning-at-scale", "parallelism-measured")
SEEDS = range(24)


def numeric_questions(course):
    """(lesson id, question id or "question:step", question) for every numeric question and numeric step."""
    for lid in LESSONS:
        lesson = course.lesson(lid)
        for qid, q in sorted(lesson.questions.items()):
            if isinstance(q.body, Numeric):
                yield lid, qid, q
            elif isinstance(q.body, MultiStep):
                for st in q.body.steps:
                    if st.kind == "numeric":
                        yield lid, f"{qid}:{st.id}", step_question(q, st.id)


def named_wrong_values(q, v) -> list[float]:
    """The distinct wrong values a variant names that its tolerance tells apart from the key and from each other."""
    tol = q.body.tolerance
    out: list[float] = []
    for value, _ in [*v.values.get("mistakes", ()), *v.values.get("slips", ())]:
        w = float(value)
        if not tol.accepts(w, v.answer) and not any(tol.accepts(w, x) for x in out):
            out.append(w)
    return out


def test_every_numeric_question_names_two_mistakes_in_every_draw(course):
    short, count = [], 0
    for lid, name, q in numeric_questions(course):
        count += 1
        for seed in SEEDS:
            v = make_variant(q, seed)
            if len(named_wrong_values(q, v)) < 2:
                short.append(f"{lid}/{name} (seed {seed}, params {v.params}): {named_wrong_values(q, v)}")
                break
    assert count >= 50, count  # the three lessons' numeric questions and steps were all read
    assert short == [], "fewer than two named mistakes:\n" + "\n".join(short)


def test_a_named_mistake_is_graded_wrong_with_its_reason(course):
    """Each named wrong value, typed as a learner would, is a try graded incorrect whose message is not the bare
    "too low"; a named slip is a hint."""
    for lid, name, q in numeric_questions(course):
        v = make_variant(q, 0)
        for value, _why in v.values.get("mistakes", ()):
            if q.body.tolerance.accepts(float(value), v.answer):
                continue
            fb = grade(q, v, repr(float(value)))
            assert fb.status in ("incorrect", "hint"), (lid, name, value, fb.message)
            if fb.status == "incorrect":
                assert "accepted range" not in fb.message and "is not the answer" not in fb.message, (name, fb)


@pytest.mark.parametrize(
    ("qid", "typed", "says"),
    [
        ("coll-busbw", "100", "algorithm bandwidth"),  # algbw given where busbw is asked
        ("coll-alpha", "900", "whole intercept"),
        ("coll-egress", "38.3", "flat ring over all 24 GPUs"),
        ("coll-egress", "213", "one 50 GB/s NIC"),
        ("cp-ring-bytes", "128", "N − 1"),
        ("pp-gpipe-memory", "48", "GPipe's peak alone"),
        ("pp-interleave-sends", "96", "7 boundaries"),
        ("zf-fsdp-sent", "3000000", "DDP's all-reduce"),
        ("zf-zero1-optim", "3764224", "DDP's"),
        ("cp-contiguous-work", "30", "last rank's chunk pairs"),
    ],
)
def test_lesson09s_fixed_questions_name_their_mistakes(course, qid, typed, says):
    q = course.lesson("parallelism-measured").questions[qid]
    fb = grade(q, make_variant(q, 0), typed)
    assert fb.status == "incorrect" and fb.counts_as_attempt and says in fb.message, fb.message


def test_the_egress_questions_key_and_mistakes_are_calcs(course):
    """coll-egress types its key and its mistakes (a fixed question): each is the course model's number."""
    lesson = course.lesson("parallelism-measured")
    q, r = lesson.questions["coll-egress"], lesson.values["coll-egress"]
    tol = q.body.tolerance
    assert tol.accepts(q.body.answer, r["network_ms"]) and r["node_out_gb"] == pytest.approx(2 * 2 / 3 * 8)
    named = {m.value for m in q.body.mistakes}
    assert any(tol.accepts(x, r["flat_network_ms"]) for x in named)  # 2 × 23/24 × 8 GB ÷ 400 GB/s
    assert any(tol.accepts(x, 1e3 * r["node_out_gb"] / 50) for x in named)  # the node's bytes through one NIC
    assert any(tol.accepts(x, r["network_ms"] / 2) for x in named)  # one phase


def test_a_wrong_absmax_code_is_told_why(course):
    q = course.lesson("precision-by-numbers").questions["absmax-int8-code"]
    v = make_variant(q, 0)
    step = v.values["step"]
    read_back = grade(q, v, repr(v.answer * step))
    assert read_back.status == "incorrect" and "value read back" in read_back.message
    unsigned = grade(q, v, str(round(v.values["x"] / (step * 127 / 255))))
    assert unsigned.status == "incorrect" and "unsigned grid" in unsigned.message


def test_a_fixed_value_belongs_to_a_fixed_question_and_every_rule_must_be_told_apart():
    """A generated question's answer differs per learner, so its rules are multiples of it (`times_answer`); a fixed
    question may name either kind. Each refusal names the rule's own field, what to write and what it found."""
    with pytest.raises(ValidationError) as exc:
        numeric("fp8_step_time", mistakes=[{"times_answer": 2, "feedback": "Yes."}, {"value": 20, "feedback": "No."}])
    assert "mistakes[1].value: `times_answer` on a generated question, whose answer differs per learner" in str(
        exc.value
    ) and "found value: 20" in str(exc.value), str(exc.value)
    assert numeric("fp8_step_time", mistakes=[{"times_answer": 2, "feedback": "Yes."}]).body.mistakes
    told_apart = "a wrong answer the tolerance tells apart from the right one (one it accepts is graded correct)"
    with pytest.raises(ValidationError) as exc:
        numeric(answer=100, tolerance={"rel": 0.02}, mistakes=[{"value": 101, "feedback": "No."}])
    assert f"mistakes[0].value: {told_apart}; found 101, which the tolerance accepts as the answer 100" in str(
        exc.value
    )
    with pytest.raises(ValidationError) as exc:
        numeric(answer=100, tolerance={"rel": 0.02}, mistakes=[{"times_answer": 1.01, "feedback": "No."}])
    assert f"mistakes[0].times_answer: {told_apart}; found 1.01 × 100, which the tolerance accepts" in str(exc.value)
    with pytest.raises(ValidationError) as exc:
        numeric("fp8_step_time", tolerance={"rel": 0.02}, mistakes=[{"times_answer": 1.01, "feedback": "No."}])
    assert f"mistakes[0].times_answer: {told_apart}; found 1.01 × the answer, which the tolerance (±2%) accepts" in (
        str(exc.value)
    )
    q = numeric(answer=100, tolerance={"rel": 0.02}, mistakes=[{"value": 50, "feedback": "That is half."}])
    fb = grade(q, make_variant(q, 0), "50")
    assert fb.status == "incorrect" and fb.message == "Not quite: 50. That is half."
    assert grade(q, make_variant(q, 0), "70").message.endswith("outside the accepted range (±2%).")
    q = numeric(answer=100, tolerance={"rel": 0.02}, mistakes=[{"times_answer": 0.5, "feedback": "That is half."}])
    assert grade(q, make_variant(q, 0), "50").message == "Not quite: 50. That is half."


def test_the_editor_shows_a_rules_error_at_that_rules_field_and_line(template_texts):
    """The loader puts a refused rule's error on the rule's own field and its YAML line, not on the question file as
    a whole: what the editor lists and points at."""
    fixed = template_texts["questions/example-fixed-numeric.yaml"].replace("  - value: 16\n", "  - value: 8\n")
    generated = template_texts["questions/example-numeric.yaml"] + "mistakes:\n  - value: 20\n    feedback: No.\n"
    files = {
        **template_texts,
        "questions/example-fixed-numeric.yaml": fixed,
        "questions/example-numeric.yaml": generated,
    }
    lesson, errors = validate_lesson_texts(files, lesson_id="t")
    assert lesson is None
    found = {(e.file, e.field, e.line): (e.expected, e.found) for e in errors}
    told_apart = "a wrong answer the tolerance tells apart from the right one (one it accepts is graded correct)"
    assert found[("t/questions/example-fixed-numeric.yaml", "mistakes[1].value", 10)] == (
        told_apart,
        "8, which the tolerance accepts as the answer 8",
    ), found
    expected, what = found[("t/questions/example-numeric.yaml", "mistakes[0].value", 10)]
    assert expected.startswith("`times_answer` on a generated question") and what == "value: 20", found
