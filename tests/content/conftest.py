from pathlib import Path

import pytest

from app.content.loader import load_course, read_lesson_texts

ROOT = Path(__file__).resolve().parents[2]
LESSONS = ROOT / "lessons"


@pytest.fixture(scope="session")
def course():
    return load_course(LESSONS)


@pytest.fixture(scope="session")
def l06(course):
    lesson = course.lesson("transformer-scaling")
    assert lesson is not None, [str(e) for e in course.errors]
    return lesson


@pytest.fixture()
def template_texts():
    return read_lesson_texts(LESSONS / "_template")
