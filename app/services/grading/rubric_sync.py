"""A published rubric that changed an item's points or a level's fraction: every grade of the lesson whose rubric
differs gets a recomputed revision (grading's module docstring says why grades are append-only revisions)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.models import Grade, LabReport, ReportVersion, utcnow
from app.services.grading.grades import rubric_hash, score
from app.services.learning import lessons as lesson_service


def sync_rubric(db: Session, *, lesson_id: str) -> list[int]:
    """Recompute every grade of `lesson_id` whose rubric differs from the current one; returns version ids touched.

    Each recompute is a new revision by nobody (grader_id None), with the reason, so history keeps the old totals.
    """
    cur = lesson_service.current(db, lesson_id=lesson_id)
    if cur is None or cur.lesson.rubric is None:
        return []
    rubric, lesson_version = cur.lesson.rubric, cur.version
    want = rubric_hash(rubric)
    latest_rev = (
        select(Grade.version_id, func.max(Grade.revision).label("rev"))
        .join(ReportVersion, ReportVersion.id == Grade.version_id)
        .join(LabReport, LabReport.id == ReportVersion.report_id)
        .where(LabReport.lesson_id == lesson_id)
        .group_by(Grade.version_id)
        .subquery()
    )
    stale = db.scalars(
        select(Grade)
        .join(latest_rev, (Grade.version_id == latest_rev.c.version_id) & (Grade.revision == latest_rev.c.rev))
        .where(Grade.rubric_hash != want)
    ).all()
    touched = []
    for g in stale:
        scores, total, unscored = score(rubric, g.scores or {})
        reason = f"recomputed for rubric of lesson version {lesson_version}: total {g.total:g} -> {total:g} of {rubric.max_points:g}"
        if unscored:
            reason += f"; new lines not scored yet: {', '.join(unscored)}"
        db.add(
            Grade(
                version_id=g.version_id,
                revision=g.revision + 1,
                grader_id=None,
                rubric_version=lesson_version,
                rubric_hash=want,
                scores=scores,
                total=total,
                max_total=rubric.max_points,
                feedback=g.feedback,
                notes=g.notes,
                reason=reason,
                # a recompute of what the learner sees is seen at once; of a held grade, stays held with it
                released_at=utcnow() if g.released_at is not None else None,
            )
        )
        try:
            db.commit()
            touched.append(g.version_id)
        except IntegrityError:  # a grader's save or another recompute took that revision: it will be seen next time
            db.rollback()
    return touched
