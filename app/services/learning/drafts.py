"""Lesson drafts: the next version of a lesson, saved in the editor and seen by staff only until it is published.

    get(db, lesson_id=…)                         -> LessonDraft | None
    save(db, lesson_id=…, files=…, base_version=…, author=…)
                                                 -> ([] | errors): a draft validates like a version; nothing
                                                    is saved on errors
    build(draft)                                 -> the draft's Lesson (for the staff preview)
    publish(db, lesson_id=…, author=…, note=…)   -> (version, []) | (None, errors): the draft becomes the next
                                                    version (publishing.publish) and is deleted
    discard(db, lesson_id=…)                     -> whether there was one
    new_lessons(db)                              -> drafts of lessons with no published version yet
    new_lesson_problems(db, lesson_id=…, title=…, number=…) -> {field: what is wrong}
    create_lesson(db, lessons_dir=…, lesson_id=…, title=…, number=…, author=…)
                                                 -> errors: lessons/_template/ as the new lesson's draft

A draft is not a LessonVersion: every page a learner reads asks lesson_service for published versions only, so
a draft cannot reach them by any path. A lesson made in the browser starts as a draft (`base_version` None): its
id and number are taken, and it appears nowhere but the instructor's pages until its first publish.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.content import ContentError, validate_lesson_texts
from app.content.schema import MAX_ID, Lesson, is_id
from app.core.models import LessonDraft, User, utcnow
from app.services.learning import lessons as lesson_service
from app.services.learning import publishing


def get(db: Session, *, lesson_id: str) -> LessonDraft | None:
    return db.scalar(select(LessonDraft).where(LessonDraft.lesson_id == lesson_id))


def all_drafts(db: Session) -> list[LessonDraft]:
    return list(db.scalars(select(LessonDraft).order_by(LessonDraft.id)))


def new_lessons(db: Session) -> list[LessonDraft]:
    """Drafts of lessons made in the browser and not published yet, oldest first."""
    return list(db.scalars(select(LessonDraft).where(LessonDraft.base_version.is_(None)).order_by(LessonDraft.id)))


_built: dict[tuple[str, str], Lesson | None] = {}


def build(draft: LessonDraft) -> Lesson | None:
    """The validated Lesson of a draft (remembered per content, as versions are)."""
    key = (draft.lesson_id, lesson_service.content_hash(draft.files))
    if key not in _built:
        if len(_built) > 16:
            _built.clear()
        _built[key] = validate_lesson_texts(draft.files, lesson_id=draft.lesson_id)[0]
    return _built[key]


def save(
    db: Session, *, lesson_id: str, files: dict[str, str], base_version: int | None, author: User | None
) -> list[ContentError]:
    """Validate `files` and keep them as the lesson's draft (replacing an earlier draft); the errors, and nothing
    saved, when they do not validate."""
    too_big = lesson_service.oversized(lesson_id, files)
    if too_big:
        return too_big
    lesson, errors = validate_lesson_texts(files, lesson_id=lesson_id)
    if lesson is None:
        return errors
    draft = get(db, lesson_id=lesson_id)
    if draft is None:
        draft = LessonDraft(lesson_id=lesson_id, base_version=base_version)
        db.add(draft)
    draft.files = dict(files)
    draft.author_id = author.id if author else None
    draft.updated_at = utcnow()
    try:
        db.commit()
    except IntegrityError:  # another author started this lesson's draft at the same moment
        db.rollback()
        return [ContentError(lesson_id, "", "one draft per lesson", "a draft was saved meanwhile; reload")]
    return []


def publish(db: Session, *, lesson_id: str, author: User | None, note: str = "") -> tuple[int | None, list]:
    """Publish the lesson's draft as its next version and delete the draft; (None, errors) changes nothing."""
    draft = get(db, lesson_id=lesson_id)
    if draft is None:
        return None, [ContentError(lesson_id, "", "a draft to publish", "no draft (published or discarded)")]
    version, errors = publishing.publish(
        db, lesson_id=lesson_id, files=dict(draft.files), source="editor", author=author, note=note
    )
    if version is not None:
        db.delete(draft)
        db.commit()
    return version, errors


def taken_numbers(db: Session) -> dict[int, str]:
    """Lesson number -> the lesson holding it: the published lessons' and the new lessons' drafts'."""
    taken = {les.number: les.id for les, _ in lesson_service.catalogue(db)}
    for draft in new_lessons(db):
        lesson = build(draft)
        if lesson is not None:
            taken.setdefault(lesson.number, draft.lesson_id)
    return taken


def new_lesson_problems(db: Session, *, lesson_id: str, title: str, number: int | None) -> dict[str, str]:
    """What is wrong with a new lesson's id, title and number, by field; empty when it can be created."""
    problems = {}
    if not is_id(lesson_id):
        problems["lesson_id"] = (
            f"{lesson_id[:80]!r} is not a lesson id: lower-case letters, digits and dashes, at most {MAX_ID} "
            "characters (it becomes the lesson's address, e.g. my-new-lesson)"
        )
    elif lesson_service.latest_row(db, lesson_id=lesson_id) is not None or get(db, lesson_id=lesson_id) is not None:
        problems["lesson_id"] = f"a lesson {lesson_id!r} exists already; choose another id"
    if not title.strip() or len(title) > 120:
        problems["title"] = "a title of 1 to 120 characters"
    taken = taken_numbers(db)
    if number is None or not 1 <= number <= 99:
        problems["number"] = "a whole number from 1 to 99 (its place in the course)"
    elif number in taken:
        problems["number"] = f"{number} is lesson {taken[number]!r}'s number; numbers are unique in the course"
    return problems


def create_lesson(
    db: Session, *, lessons_dir: Path, lesson_id: str, title: str, number: int, author: User
) -> list[ContentError]:
    """A new lesson with this id, title and number from lessons/_template/, as a draft: no file access or restart
    needed, and no learner sees it until it is published."""
    files = publishing.template_files(lessons_dir, title=title, number=number)
    return save(db, lesson_id=lesson_id, files=files, base_version=None, author=author)


def discard(db: Session, *, lesson_id: str) -> bool:
    draft = get(db, lesson_id=lesson_id)
    if draft is None:
        return False
    db.delete(draft)
    db.commit()
    return True
