"""Publishing a lesson version, and what must follow it: grades recomputed for a changed rubric.

Both ways a version is published go through here: the instructor's editor (`publish`) and the lesson
files on disk at start-up (`sync_from_files`). Pages never recompute rubrics on GET.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.content import ContentError
from app.content.loader import read_lesson_texts
from app.content.schema import MAX_ID, is_id
from app.core.models import PartProgress, User
from app.services.grading import rubric_sync
from app.services.learning import lessons as lesson_service

log = logging.getLogger(__name__)


def publish(
    db: Session, *, lesson_id: str, files: dict[str, str], source: str, author: User | None = None, note: str = ""
) -> tuple[int | None, list[ContentError]]:
    """Validate and store a new version, then bring every grade of the lesson onto its rubric."""
    version, errors = lesson_service.publish(
        db, lesson_id=lesson_id, files=files, source=source, author=author, note=note
    )
    if version is not None:
        touched = rubric_sync.sync_rubric(db, lesson_id=lesson_id)
        log.info(
            "lesson %s version %s published (%s); %d grade(s) recomputed", lesson_id, version, source, len(touched)
        )
    return version, errors


TEMPLATE = "_template"  # lessons/_template/: the skeleton a new lesson starts from (its README explains each file)


def new_lesson_problems(db: Session, *, lesson_id: str, title: str, number: int | None) -> dict[str, str]:
    """What is wrong with a new lesson's id, title and number, by field; empty when it can be created."""
    problems = {}
    if not is_id(lesson_id):
        problems["lesson_id"] = (
            f"{lesson_id[:80]!r} is not a lesson id: lower-case letters, digits and dashes, at most {MAX_ID} "
            "characters (it becomes the lesson's address, e.g. my-new-lesson)"
        )
    elif lesson_service.latest_row(db, lesson_id=lesson_id) is not None:
        problems["lesson_id"] = f"a lesson {lesson_id!r} exists already; choose another id"
    if not title.strip() or len(title) > 120:
        problems["title"] = "a title of 1 to 120 characters"
    taken = {les.number: les.id for les, _ in lesson_service.catalogue(db)}
    if number is None or not 1 <= number <= 99:
        problems["number"] = "a whole number from 1 to 99 (its place in the course)"
    elif number in taken:
        problems["number"] = f"{number} is lesson {taken[number]!r}'s number; numbers are unique in the course"
    return problems


def create_from_template(
    db: Session, *, lessons_dir: Path, lesson_id: str, title: str, number: int, author: User
) -> tuple[int | None, list[ContentError]]:
    """Publish lessons/_template/ as version 1 of a new lesson with this id, title and number: a lesson made in the
    browser, without file access or a restart (its files download as a zip like any version's)."""
    files = read_lesson_texts(lessons_dir / TEMPLATE)
    text = files["lesson.yaml"]
    # JSON strings are YAML double-quoted scalars: any title is one valid line
    text = re.sub(
        r"(?m)^title: .*$", lambda _: f"title: {json.dumps(title.strip(), ensure_ascii=False)}", text, count=1
    )
    text = re.sub(r"(?m)^number: .*$", f"number: {number}", text, count=1)
    files["lesson.yaml"] = text
    return publish(
        db, lesson_id=lesson_id, files=files, source="editor", author=author, note="Created from lessons/_template"
    )


def readers(db: Session, *, lesson_id: str) -> int:
    """How many learners have opened a part of the lesson: whom a newly published version reaches at once."""
    q = select(func.count(func.distinct(PartProgress.user_id))).where(PartProgress.lesson_id == lesson_id)
    return int(db.scalar(q) or 0)


def sync_from_files(db: Session, lessons_dir: Path) -> dict[str, list[ContentError]]:
    """Publish changed lesson folders, then sync every lesson's grades with its current rubric.

    Every lesson, not only the changed ones: a version published while an older server ran (or a
    recompute that lost a race) is caught up here, at start-up.
    """
    problems = lesson_service.sync_from_files(db, lessons_dir)
    for lesson, _ in lesson_service.catalogue(db):
        touched = rubric_sync.sync_rubric(db, lesson_id=lesson.id)
        if touched:
            log.info("lesson %s: %d grade(s) recomputed for its current rubric", lesson.id, len(touched))
    for folder, errors in problems.items():
        log.error(
            "lesson folder %s does not validate (%d error(s)); its last good version stays current", folder, len(errors)
        )
    return problems
