"""Grades as CSV for a class's instructors and graders: one row per submitted report they may grade there, the
points of every rubric line, and cells a spreadsheet will not run as formulas however it splits them
(app/services/csvcells.py)."""

from __future__ import annotations

import io

from sqlalchemy.orm import Session

from app.content.schema import Rubric
from app.services import csvcells
from app.services.classes.scopes import Scope
from app.services.grading.queue import queue
from app.services.learning import lessons as lesson_service


def _when(dt) -> str:
    """UTC to the second, in the form spreadsheets read as a date and time."""
    return dt.strftime("%Y-%m-%d %H:%M:%S") if dt else ""


def export_csv(db: Session, *, scope: Scope, lesson_id: str | None = None) -> str:
    """One row per report: its latest version, and the grade that counts now. A resubmission not graded yet keeps
    the last graded version's grade, with `graded_version` saying which version that was. Starts with a UTF-8
    byte-order mark so spreadsheet programs read names with accents right."""
    rows = queue(db, scope=scope, lesson_id=lesson_id)
    items: dict[str, float] = {}  # rubric line id -> its points, in first-seen order
    rubrics: dict[str, Rubric | None] = {}
    for row in rows:
        lid = row.report.lesson_id
        if lid not in rubrics:
            cur = lesson_service.current(db, lesson_id=lid)
            rubric = rubrics[lid] = cur.lesson.rubric if cur else None
            for item in rubric.items if rubric else []:
                items.setdefault(item.id, item.points)
    out = io.StringIO()
    out.write("\ufeff")
    w = csvcells.writer(out)
    w.writerow(
        [
            "report",
            "lesson",
            "learner_email",
            "learner_name",
            "latest_version",
            "submitted_at_utc",
            "status",
            "grader_email",
            "graded_version",
            "total",
            "max_total",
            *[f"{i} (of {points:g})" for i, points in items.items()],
            "graded_at_utc",
            "feedback",
        ]
    )
    for row in rows:
        if row.grade is not None:
            graded_version, g = row.version.number, row.grade
        elif row.earlier is not None:  # resubmitted, not graded again yet
            graded_version, g = row.earlier[0].number, row.earlier[1]
        else:
            graded_version, g = None, None
        scores = (g.scores if g else {}) or {}
        w.writerow(
            csvcells.row(
                (
                    row.report.id,
                    row.report.lesson_id,
                    row.owner.email,
                    row.owner.display_name,
                    row.version.number,
                    _when(row.version.submitted_at),
                    row.report.status,
                    row.grader.email if row.grader else "",
                    graded_version if g else "",
                    g.total if g else "",
                    g.max_total if g else "",
                    *[(scores.get(i) or {}).get("points", "") for i in items],
                    _when(g.created_at) if g else "",
                    g.feedback if g else "",
                )
            )
        )
    return out.getvalue()
