"""Grades as CSV for instructors and graders: one row per submitted report they may grade, the points of
every rubric line, and cells a spreadsheet will not run as formulas."""

from __future__ import annotations

import csv
import io

from sqlalchemy.orm import Session

from app.content.schema import Rubric
from app.models import User
from app.services import lessons as lesson_service
from app.services.grading import queue


def _cell(value) -> str:
    """A CSV cell a spreadsheet will not run as a formula (CSV injection: leading = + - @ tab CR)."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def export_csv(db: Session, *, user: User, lesson_id: str | None = None) -> str:
    rows = queue(db, user=user, lesson_id=lesson_id)
    item_ids: list[str] = []
    rubrics: dict[str, Rubric | None] = {}
    for row in rows:
        lid = row.report.lesson_id
        if lid not in rubrics:
            cur = lesson_service.current(db, lesson_id=lid)
            rubric = rubrics[lid] = cur.lesson.rubric if cur else None
            for item in rubric.items if rubric else []:
                if item.id not in item_ids:
                    item_ids.append(item.id)
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(
        [
            "report",
            "lesson",
            "learner_email",
            "learner_name",
            "version",
            "submitted_at",
            "status",
            "grader",
            "total",
            "max_total",
            *item_ids,
            "graded_at",
            "feedback",
        ]
    )
    for row in rows:
        g = row.grade
        scores = (g.scores if g else {}) or {}
        w.writerow(
            [
                _cell(v)
                for v in (
                    row.report.id,
                    row.report.lesson_id,
                    row.owner.email,
                    row.owner.display_name,
                    row.version.number,
                    row.version.submitted_at.isoformat() if row.version.submitted_at else "",
                    row.report.status,
                    row.grader.email if row.grader else "",
                    g.total if g else "",
                    g.max_total if g else "",
                    *[(scores.get(i) or {}).get("points", "") for i in item_ids],
                    g.created_at.isoformat() if g else "",
                    g.feedback if g else "",
                )
            ]
        )
    return out.getvalue()
