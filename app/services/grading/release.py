"""Holding a lesson's grades until they are released (grade_holds), and releasing them: all at once, or as saved
again. While a lesson is held, a saved grade keeps `released_at` empty and no learner sees it (grading.latest_grade
is the learner's view; app/services/learning/notices.py lists released grades only, so learners are told on release)."""

from __future__ import annotations

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.models import Grade, GradeHold, LabReport, ReportVersion, User, utcnow


def holds(db: Session, *, lesson_id: str) -> bool:
    return db.scalar(select(GradeHold.id).where(GradeHold.lesson_id == lesson_id)) is not None


def held_lessons(db: Session) -> set[str]:
    return set(db.scalars(select(GradeHold.lesson_id)))


def _lesson_grades(lesson_id: str):
    return (
        select(Grade.id)
        .join(ReportVersion, Grade.version_id == ReportVersion.id)
        .join(LabReport, ReportVersion.report_id == LabReport.id)
        .where(LabReport.lesson_id == lesson_id)
    )


def waiting(db: Session, *, lesson_id: str) -> int:
    """Saved revisions of the lesson's grades that no learner sees yet (each report counted once)."""
    q = (
        select(func.count(func.distinct(ReportVersion.report_id)))
        .select_from(Grade)
        .join(ReportVersion, Grade.version_id == ReportVersion.id)
        .join(LabReport, ReportVersion.report_id == LabReport.id)
        .where(LabReport.lesson_id == lesson_id, Grade.released_at.is_(None))
    )
    return int(db.scalar(q) or 0)


def release_all(db: Session, *, lesson_id: str) -> int:
    """Release every held grade of the lesson at once; returns how many reports' learners now see a new grade
    (each learner is told by app/services/learning/notices.py, which lists released grades only)."""
    n = waiting(db, lesson_id=lesson_id)
    db.execute(
        update(Grade)
        .where(Grade.id.in_(_lesson_grades(lesson_id)), Grade.released_at.is_(None))
        .values(released_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    db.commit()
    return n


def set_hold(db: Session, *, lesson_id: str, hold: bool, user: User) -> int:
    """Hold the lesson's grades from now on, or release them as saved again; going back to "as saved" releases
    what was held (nothing stays hidden without a hold). Returns how many reports that released."""
    if hold:
        if not holds(db, lesson_id=lesson_id):
            db.add(GradeHold(lesson_id=lesson_id, held_by_id=user.id))
            try:
                db.commit()
            except IntegrityError:  # another instructor held it at the same moment: held either way
                db.rollback()
        return 0
    db.execute(delete(GradeHold).where(GradeHold.lesson_id == lesson_id))
    return release_all(db, lesson_id=lesson_id)
