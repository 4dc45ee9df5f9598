"""Every lesson in lessons/ validates, renders and has working questions."""

import io

import pytest

from app.content.cli import validate_command
from app.content.loader import validate_lesson_dir
from app.content.markdown import render_markdown
from app.content.practice import grade, grade_step, make_variant, step_question

from .conftest import LESSONS

SHIPPED = sorted(p.name for p in LESSONS.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def test_course_loads_without_errors(course):
    assert [str(e) for e in course.errors] == []
    assert set(course.lessons) == set(SHIPPED)
    assert {"transformer-scaling", "precision-by-numbers", "planning-at-scale"} <= set(SHIPPED)


@pytest.mark.parametrize("lesson_id", SHIPPED)
def test_lesson_dir_validates(lesson_id):
    assert [str(e) for e in validate_lesson_dir(LESSONS / lesson_id)] == []


@pytest.mark.parametrize("lesson_id", SHIPPED)
def test_every_question_makes_variants_and_grades_its_own_answer(course, lesson_id):
    lesson = course.lesson(lesson_id)
    for qid, q in lesson.questions.items():
        for seed in range(10):
            v = make_variant(q, seed)
            assert "{{" not in v.prompt and "{{" not in v.explanation and "{{" not in v.hint, qid
            if q.kind == "numeric":
                fb = grade(q, v, f"{v.answer!r} {v.unit}")
                assert fb.correct, (qid, seed, fb)
        if q.kind == "multi_step":
            for step in q.body.steps:
                assert "{{" not in step.prompt and "{{" not in (step.explanation or ""), (qid, step.id)
                sub = step_question(q, step.id)
                if step.kind == "numeric":
                    v = make_variant(sub, 0)
                    assert grade_step(q, step.id, f"{v.answer!r} {v.unit}").correct, (qid, step.id)
                else:
                    right = next(o.id for o in step.options if o.correct)
                    assert grade_step(q, step.id, right).correct and step.explanation, (qid, step.id)


@pytest.mark.parametrize("lesson_id", SHIPPED)
def test_no_placeholder_survives_and_markdown_renders(course, lesson_id):
    lesson = course.lesson(lesson_id)
    dump = lesson.model_dump_json()
    assert "{{calc:" not in dump
    for part in lesson.parts:
        for block in part.blocks:
            for text in (getattr(block, "body", None), getattr(getattr(block, "pause", None), "answer", None)):
                if text:
                    assert "<script" not in render_markdown(text)


def test_lesson_06_shape(l06):
    assert l06.number == 6 and l06.title == "Transformer Scaling"
    assert [(p.number, p.id) for p in l06.parts] == [
        (1, "orient"),
        (2, "mental-model"),
        (3, "deep-dives"),
        (4, "code-trace"),
        (5, "history"),
        (6, "practice"),
    ]
    # minutes come from the content (test_timing.py); the deep dives carry most of the reading, core and optional
    assert max(l06.parts, key=lambda p: p.minutes + p.optional_minutes).id == "deep-dives"
    assert l06.header.anchor.year == 2022 and "Transformer Engine" in l06.header.anchor.label
    assert l06.header.path.name == "Parallel Horizons" and l06.header.path.number == 6


def test_every_lesson_06_part_ends_with_something_the_learner_does(l06):
    """A pause to write, questions to answer: no part ends on reading alone."""
    for part in l06.parts:
        last = part.blocks[-1]
        does = last.kind == "questions" or (last.kind == "section" and last.pause is not None)
        assert does, (part.id, last.kind)


def test_second_lesson_is_short(course):
    lesson = course.lesson("precision-by-numbers")
    assert lesson.read_time_minutes < course.lesson("transformer-scaling").read_time_minutes
    assert sum(q.kind == "numeric" for q in lesson.questions.values()) >= 5


def test_cli_validate_command(tmp_path):
    out = io.StringIO()
    assert validate_command(LESSONS, out=out) == 0
    assert "lessons valid" in out.getvalue()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "lesson.yaml").write_text("title: x\n")
    out = io.StringIO()
    assert validate_command(tmp_path, out=out) == 1
    assert "bad/lesson.yaml:1: number: expected a value (required field)" in out.getvalue()


def test_python_m_app_lessons_validate_over_shipped_lessons():
    """The exact command instructors run, as a subprocess, over every shipped lesson."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "app", "lessons", "validate"],
        cwd=LESSONS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    shipped = [p.name for p in LESSONS.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    for lesson_id in shipped:
        assert f"ok  {lesson_id}" in out.stdout


def test_lessons_validate_takes_a_folder_of_lessons(tmp_path):
    """`python -m app lessons validate ROOT` checks ROOT (an author's own checkout), not the course's lessons."""
    import shutil
    import subprocess
    import sys

    shutil.copytree(LESSONS / "_template", tmp_path / "my-lesson")
    out = subprocess.run(
        [sys.executable, "-m", "app", "lessons", "validate", str(tmp_path)],
        cwd=LESSONS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok  my-lesson" in out.stdout and "1 lesson valid" in out.stdout
    assert "transformer-scaling" not in out.stdout
