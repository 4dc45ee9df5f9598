"""Lessons a browser test makes for itself from lessons/_template on the shared live server, and takes away again,
so the suite's other tests read only the shipped lessons (an extra lesson would sit on every learner's home page)."""

from __future__ import annotations

import json
import re

from app.content.loader import read_lesson_texts
from app.core.models import LessonVersion
from app.services.learning import lessons as lesson_service
from tests.browser.seed import Seeder
from tests.conftest import ROOT


def template_files(title: str, number: int) -> dict[str, str]:
    files = read_lesson_texts(ROOT / "lessons" / "_template")
    text = re.sub(r"(?m)^title: .*$", lambda _: f"title: {json.dumps(title)}", files["lesson.yaml"], count=1)
    files["lesson.yaml"] = re.sub(r"(?m)^number: .*$", f"number: {number}", text, count=1)
    return files


def publish(seeder: Seeder, lesson_id: str, title: str, number: int) -> None:
    """Version 1 of a lesson from the template, published as the browser editor publishes one."""
    with seeder.sessions() as db:
        version, errors = lesson_service.publish(
            db, lesson_id=lesson_id, files=template_files(title, number), source="editor"
        )
        assert version == 1 and not errors, errors


def remove(seeder: Seeder, *lesson_ids: str) -> None:
    """Every version and draft of these lessons (the learners' tries stay: no page lists a lesson that is gone)."""
    from app.core.models import LessonDraft

    with seeder.sessions() as db:
        for model in (LessonVersion, LessonDraft):
            db.query(model).filter(model.lesson_id.in_(lesson_ids)).delete(synchronize_session=False)
        db.commit()
