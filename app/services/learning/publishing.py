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


def template_files(lessons_dir: Path, *, title: str, number: int) -> dict[str, str]:
    """lessons/_template/'s files with this title and number in lesson.yaml: a new lesson's first draft."""
    files = read_lesson_texts(lessons_dir / TEMPLATE)
    text = files["lesson.yaml"]
    # JSON strings are YAML double-quoted scalars: any title is one valid line
    text = re.sub(
        r"(?m)^title: .*$", lambda _: f"title: {json.dumps(title.strip(), ensure_ascii=False)}", text, count=1
    )
    text = re.sub(r"(?m)^number: .*$", f"number: {number}", text, count=1)
    files["lesson.yaml"] = text
    return files


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
