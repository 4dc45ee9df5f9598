"""Published lesson versions: files on disk and the browser editor both publish into one table.

A version is immutable (the text of every file), so the built `Lesson` for (id, version) is
cached per process; publishing never needs a restart, and old versions stay readable.
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.content import ContentError, validate_lesson_texts
from app.content.loader import read_lesson_texts
from app.content.schema import Lesson
from app.core.models import LessonVersion, User

MAX_FILE_CHARS = 200_000


def content_hash(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


_built: dict[tuple[str, int, str], Lesson | None] = {}


def build(row: LessonVersion) -> Lesson | None:
    """The validated Lesson of a version row, built once per process (versions never change)."""
    key = (row.lesson_id, row.version, row.content_hash)
    if key not in _built:
        if len(_built) > 64:
            _built.clear()
        _built[key] = validate_lesson_texts(row.files, lesson_id=row.lesson_id)[0]
    return _built[key]


def latest_row(db: Session, *, lesson_id: str, source: str | None = None) -> LessonVersion | None:
    q = select(LessonVersion).where(LessonVersion.lesson_id == lesson_id)
    if source:
        q = q.where(LessonVersion.source == source)
    return db.scalar(q.order_by(LessonVersion.version.desc()).limit(1))


def version_row(db: Session, *, lesson_id: str, version: int) -> LessonVersion | None:
    return db.scalar(
        select(LessonVersion).where(LessonVersion.lesson_id == lesson_id, LessonVersion.version == version)
    )


def versions(db: Session, *, lesson_id: str) -> list[LessonVersion]:
    return list(
        db.scalars(
            select(LessonVersion).where(LessonVersion.lesson_id == lesson_id).order_by(LessonVersion.version.desc())
        )
    )


class Update(NamedTuple):
    """What changed in a lesson since a learner last read it: from their version to the current one, when the
    current one was published, and the authors' notes of the versions in between (newest first, non-empty)."""

    seen: int
    version: int
    published_at: datetime
    notes: list[tuple[int, str]]  # (version, its note)

    @property
    def published_on(self) -> str:
        """The day the current version came out, short: "2 Dec" (with the year when it is not this year's)."""
        day = f"{self.published_at.day} {self.published_at:%b}"
        return (
            day
            if self.published_at.year == datetime.now(self.published_at.tzinfo).year
            else f"{day} {self.published_at.year}"
        )


UPDATE_NOTES_SHOWN = 3


def update_since(db: Session, *, lesson_id: str, seen: int, version: int) -> Update | None:
    """The update from version `seen` to `version` (the current one), in one query of a few short columns: the
    current version's row and the newest UPDATE_NOTES_SHOWN versions after `seen` that carry a note. A page asks
    only when the learner's last-read version is older than the current one, which is rare."""
    rows = db.execute(
        select(LessonVersion.version, LessonVersion.note, LessonVersion.created_at)
        .where(
            LessonVersion.lesson_id == lesson_id,
            LessonVersion.version > seen,
            LessonVersion.version <= version,
            or_(LessonVersion.version == version, LessonVersion.note != ""),
        )
        .order_by(LessonVersion.version.desc())
        .limit(UPDATE_NOTES_SHOWN + 1)
    ).all()
    if not rows or rows[0].version != version:
        return None
    notes = [(r.version, r.note.strip()) for r in rows if r.note.strip()][:UPDATE_NOTES_SHOWN]
    return Update(seen, version, rows[0].created_at, notes)


class Current(NamedTuple):
    """A published version of a lesson, built (the current one, unless asked for another)."""

    lesson: Lesson
    version: int
    key: tuple[str, int, str] = ("", 0, "")  # (lesson id, version, content hash): names its content for caches


# Which version is current, per database and lesson, remembered this long by each web process: every page
# of a lesson asks, and a publish changes it rarely. The publishing process forgets at once; the other web
# processes of a deployment show the new version within this many seconds.
CURRENT_TTL_S = 2.0
_current: dict[tuple[str, str], tuple[float, tuple[str, int, str]]] = {}


def _db_key(db: Session) -> str:
    """Which database a session talks to (tests run many in one process; caches must not mix them)."""
    return str(db.get_bind().engine.url)


def _forget_current(db: Session, lesson_id: str) -> None:
    _current.pop((_db_key(db), lesson_id), None)
    _catalogue.pop(_db_key(db), None)


def current(db: Session, *, lesson_id: str) -> Current | None:
    key = (_db_key(db), lesson_id)
    now = time.monotonic()
    hit = _current.get(key)
    if hit is not None and now - hit[0] < CURRENT_TTL_S and hit[1] in _built:
        lesson = _built[hit[1]]
        return Current(lesson, hit[1][1], hit[1]) if lesson else None
    row = latest_row(db, lesson_id=lesson_id)
    if row is None:
        return None
    lesson = build(row)
    built = (row.lesson_id, row.version, row.content_hash)
    _current[key] = (now, built)
    return Current(lesson, row.version, built) if lesson else None


def at_version(db: Session, *, lesson_id: str, version: int) -> Current | None:
    """A published version of a lesson, built; None if it has no such version."""
    row = version_row(db, lesson_id=lesson_id, version=version)
    lesson = build(row) if row else None
    if row is None or lesson is None:
        return None
    return Current(lesson, row.version, (row.lesson_id, row.version, row.content_hash))


_catalogue: dict[str, tuple[float, list[tuple[str, int, str]]]] = {}


def catalogue(db: Session) -> list[tuple[Lesson, int]]:
    """The current version of every lesson, in lesson-number order (remembered CURRENT_TTL_S, like `current`)."""
    url, now = _db_key(db), time.monotonic()
    hit = _catalogue.get(url)
    if hit is not None and now - hit[0] < CURRENT_TTL_S and all(k in _built for k in hit[1]):
        lessons = [(_built[k], k[1]) for k in hit[1]]
    else:
        latest = (
            select(LessonVersion.lesson_id, func.max(LessonVersion.version).label("v"))
            .group_by(LessonVersion.lesson_id)
            .subquery()
        )
        rows = db.scalars(
            select(LessonVersion).join(
                latest, (LessonVersion.lesson_id == latest.c.lesson_id) & (LessonVersion.version == latest.c.v)
            )
        ).all()
        lessons = [(build(r), r.version) for r in rows]
        _catalogue[url] = (now, [(r.lesson_id, r.version, r.content_hash) for r in rows])
    built = [(les, v) for les, v in lessons if les]
    return sorted(built, key=lambda lv: (lv[0].number, lv[0].id))


def using_lab(db: Session, *, lab: str) -> list[Lesson]:
    """Lessons whose hands-on lab asks for `lab` (evidence, procedure or stretch), so its page can link back."""
    out = []
    for lesson, _ in catalogue(db):
        if lesson.lab is None:
            continue
        used = {e.lab for e in lesson.lab.evidence} | {s.lab for s in lesson.lab.procedure if s.lab}
        if lesson.lab.stretch:
            used.add(lesson.lab.stretch.lab)
        if lab in used:
            out.append(lesson)
    return out


def oversized(lesson_id: str, files: dict[str, str]) -> list[ContentError]:
    """An error per file longer than MAX_FILE_CHARS."""
    return [
        ContentError(f"{lesson_id}/{p}", "", f"at most {MAX_FILE_CHARS} characters", f"{len(t)} characters")
        for p, t in files.items()
        if len(t) > MAX_FILE_CHARS
    ]


def publish(
    db: Session, *, lesson_id: str, files: dict[str, str], source: str, author: User | None = None, note: str = ""
) -> tuple[int | None, list[ContentError]]:
    """Validate and store a new version. Returns (version, []) or (None, errors); nothing is stored on errors."""
    too_big = oversized(lesson_id, files)
    if too_big:
        return None, too_big
    lesson, errors = validate_lesson_texts(files, lesson_id=lesson_id)
    if lesson is None:
        return None, errors
    prev = latest_row(db, lesson_id=lesson_id)
    row = LessonVersion(
        lesson_id=lesson_id,
        version=(prev.version + 1) if prev else 1,
        files=files,
        content_hash=content_hash(files),
        source=source,
        author_id=author.id if author else None,
        note=note[:500],
    )
    db.add(row)
    try:
        db.commit()
        _forget_current(db, lesson_id)
    except IntegrityError:  # another publish took that number at the same moment
        db.rollback()
        return None, [
            ContentError(lesson_id, "", "the current version", "a newer version was published meanwhile; reload")
        ]
    return row.version, []


def sync_from_files(db: Session, lessons_dir: Path) -> dict[str, list[ContentError]]:
    """Publish each lesson folder whose files changed since they were last published from disk.

    Returns the errors of folders that did not validate (their last good version stays current).
    """
    problems: dict[str, list[ContentError]] = {}
    if not lessons_dir.is_dir():
        return {"(lessons)": [ContentError(str(lessons_dir), "", "a lessons folder", "no such folder")]}
    for folder in sorted(p for p in lessons_dir.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        files = read_lesson_texts(folder)
        last_from_files = latest_row(db, lesson_id=folder.name, source="files")
        if last_from_files and last_from_files.content_hash == content_hash(files):
            continue
        version, errors = publish(
            db, lesson_id=folder.name, files=files, source="files", note="published from lessons/"
        )
        if errors:
            problems[folder.name] = errors
    return problems


def folder_errors(lessons_dir: Path) -> dict[str, list[ContentError]]:
    """The errors of each lesson folder that does not validate, without publishing anything."""
    if not lessons_dir.is_dir():
        return {"(lessons)": [ContentError(str(lessons_dir), "", "a lessons folder", "no such folder")]}
    problems: dict[str, list[ContentError]] = {}
    for folder in sorted(p for p in lessons_dir.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        lesson, errors = validate_lesson_texts(read_lesson_texts(folder), lesson_id=folder.name)
        if lesson is None:
            problems[folder.name] = errors
    return problems
