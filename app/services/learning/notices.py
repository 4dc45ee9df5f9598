"""What a learner is told on whatever page they are on: a job of theirs finished, a report of theirs was graded.

The pages keep the pending notices in the signed session cookie (a few short dicts), so showing them costs
no query; the database is asked only by the small `/notices` poll: every few seconds while the learner has
a job in flight, and at most every GRADE_CHECK_S otherwise (for grades). This module holds the queries;
app/web/routes/pages.py keeps the session.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.models import Grade, Job, LabReport, ReportVersion, User, utcnow

GRADE_CHECK_S = 120  # how often, at most, a session asks whether a new grade arrived
GRADE_WINDOW = timedelta(days=14)  # a fresh session is told about grades this recent (it has no "seen" mark yet)
MAX_NOTICES = 5  # kept in the session cookie, so a handful at most


def finished_jobs(db: Session, *, owner: User, ids: list[int]) -> list[Job]:
    """The learner's jobs among `ids` that have finished (succeeded, failed or cancelled), oldest first."""
    if not ids:
        return []
    done = ("succeeded", "failed", "cancelled")
    q = select(Job).where(Job.owner_id == owner.id, Job.id.in_(ids), Job.status.in_(done))
    return list(db.scalars(q.order_by(Job.id)))


def new_grades(db: Session, *, owner: User, after_id: int | None) -> list[tuple[Grade, LabReport, ReportVersion]]:
    """Grades a grader saved on the learner's reports since `after_id` (None: within GRADE_WINDOW), newest
    per report, once released (a lesson that holds grades tells its learners at the release). Recomputations after
    a rubric change (no grader) are not news."""
    q = (
        select(Grade, LabReport, ReportVersion)
        .join(ReportVersion, Grade.version_id == ReportVersion.id)
        .join(LabReport, ReportVersion.report_id == LabReport.id)
        .where(LabReport.owner_id == owner.id, Grade.grader_id.is_not(None), Grade.released_at.is_not(None))
    )
    if after_id is None:
        q = q.where(Grade.released_at >= utcnow() - GRADE_WINDOW)
    else:
        q = q.where(Grade.id > after_id)
    newest: dict[int, tuple[Grade, LabReport, ReportVersion]] = {}
    for grade, report, version in db.execute(q.order_by(Grade.id)):
        newest[report.id] = (grade, report, version)
    return list(newest.values())


def grade_of(db: Session, *, owner: User, grade_id: int) -> tuple[Grade, LabReport, ReportVersion] | None:
    """One released grade on one of the learner's own reports, or None (a held one is not theirs to read yet)."""
    row = db.execute(
        select(Grade, LabReport, ReportVersion)
        .join(ReportVersion, Grade.version_id == ReportVersion.id)
        .join(LabReport, ReportVersion.report_id == LabReport.id)
        .where(Grade.id == grade_id, LabReport.owner_id == owner.id, Grade.released_at.is_not(None))
    ).first()
    if row is None:
        return None
    grade, report, version = row
    return grade, report, version
