"""Holding a lesson's grades in one class until they are released (grade_holds), and releasing them: all at once,
or as saved again. While a lesson is held, a grade saved for one of the class's learners keeps `released_at` empty
and that learner does not see it (grading.latest_grade is the learner's view; app/services/learning/notices.py
lists released grades only, so learners are told on release). A learner in two classes that offer the same lesson
has one report: their grade is held while either class holds the lesson."""

from __future__ import annotations

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from app.core.models import ClassMember, CourseClass, Grade, GradeHold, LabReport, ReportVersion, User, utcnow


def holds(db: Session, *, klass: CourseClass, lesson_id: str) -> bool:
    q = select(GradeHold.id).where(GradeHold.class_id == klass.id, GradeHold.lesson_id == lesson_id)
    return db.scalar(q) is not None


def held_lessons(db: Session, *, klass: CourseClass) -> set[str]:
    return set(db.scalars(select(GradeHold.lesson_id).where(GradeHold.class_id == klass.id)))


def _holding_classes(owner_id, lesson_id):
    """The classes where `owner_id` learns that hold `lesson_id` (a SELECT of class ids)."""
    return (
        select(GradeHold.class_id)
        .join(ClassMember, ClassMember.class_id == GradeHold.class_id)
        .where(ClassMember.user_id == owner_id, ClassMember.role == "learner", GradeHold.lesson_id == lesson_id)
    )


def held_for(db: Session, *, owner_id: int, lesson_id: str) -> bool:
    """Whether a grade saved now on `owner_id`'s report of `lesson_id` waits for a release."""
    return db.scalar(select(_holding_classes(owner_id, lesson_id).exists())) or False


def _class_grades(klass: CourseClass, lesson_id: str):
    """The grades of the class's learners' reports of the lesson (a SELECT of grade ids)."""
    learners = select(ClassMember.user_id).where(ClassMember.class_id == klass.id, ClassMember.role == "learner")
    return (
        select(Grade.id)
        .join(ReportVersion, Grade.version_id == ReportVersion.id)
        .join(LabReport, ReportVersion.report_id == LabReport.id)
        .where(LabReport.lesson_id == lesson_id, LabReport.owner_id.in_(learners))
    )


def waiting(db: Session, *, klass: CourseClass, lesson_id: str) -> int:
    """Saved revisions of the class's grades of the lesson that no learner sees yet (each report counted once)."""
    q = (
        select(func.count(func.distinct(ReportVersion.report_id)))
        .select_from(Grade)
        .join(ReportVersion, Grade.version_id == ReportVersion.id)
        .where(Grade.id.in_(_class_grades(klass, lesson_id)), Grade.released_at.is_(None))
    )
    return int(db.scalar(q) or 0)


def release_all(db: Session, *, klass: CourseClass, lesson_id: str) -> int:
    """Release every held grade of the class's learners in the lesson at once, except where another class of the
    learner still holds it; returns how many reports' learners now see a new grade (each is told by
    app/services/learning/notices.py, which lists released grades only)."""
    other = aliased(GradeHold)
    member = aliased(ClassMember)
    still_held = (
        select(LabReport.id)
        .join(member, member.user_id == LabReport.owner_id)
        .join(other, other.class_id == member.class_id)
        .where(
            member.role == "learner",
            other.lesson_id == lesson_id,
            other.class_id != klass.id,
            LabReport.lesson_id == lesson_id,
        )
    )
    releasable = (
        select(Grade.id)
        .join(ReportVersion, Grade.version_id == ReportVersion.id)
        .where(
            Grade.id.in_(_class_grades(klass, lesson_id)),
            Grade.released_at.is_(None),
            ReportVersion.report_id.not_in(still_held),
        )
    )
    n = int(
        db.scalar(
            select(func.count(func.distinct(ReportVersion.report_id)))
            .select_from(Grade)
            .join(ReportVersion, Grade.version_id == ReportVersion.id)
            .where(Grade.id.in_(releasable))
        )
        or 0
    )
    db.execute(
        update(Grade)
        .where(Grade.id.in_(releasable.scalar_subquery()))
        .values(released_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    db.commit()
    return n


def set_hold(db: Session, *, klass: CourseClass, lesson_id: str, hold: bool, user: User) -> int:
    """Hold the lesson's grades in the class from now on, or release them as saved again; going back to "as saved"
    releases what was held (nothing stays hidden without a hold). Returns how many reports that released."""
    if hold:
        if not holds(db, klass=klass, lesson_id=lesson_id):
            db.add(GradeHold(class_id=klass.id, lesson_id=lesson_id, held_by_id=user.id))
            try:
                db.commit()
            except IntegrityError:  # another instructor held it at the same moment: held either way
                db.rollback()
        return 0
    db.execute(delete(GradeHold).where(GradeHold.class_id == klass.id, GradeHold.lesson_id == lesson_id))
    return release_all(db, klass=klass, lesson_id=lesson_id)
