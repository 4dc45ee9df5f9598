"""What a learner is told on whatever page they are on: a job of theirs finished, a report of theirs was graded.

The pages keep the pending notices in the signed session cookie (a few short dicts), so showing them costs
no query; the database is asked only by the small `/notices` poll: every few seconds while the learner has
a job in flight, and at most every GRADE_CHECK_S otherwise (for grades). This module holds the queries;
app/web/routes/pages.py keeps the session.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import and_, or_, select
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


def cursor(grade: Grade) -> str:
    """Where the learner's notices stand after this grade: its release time, then its id (for grades released at the
    same instant), as one string the session cookie keeps."""
    assert grade.released_at is not None
    return f"{grade.released_at.isoformat()}|{grade.id}"


def _read_cursor(after: str | int | None) -> tuple[datetime, int] | int | None:
    if isinstance(after, int):
        return after  # a cookie from before release times were the cursor: a grade id
    if not isinstance(after, str) or "|" not in after:
        return None
    when, _, gid = after.partition("|")
    try:
        at = datetime.fromisoformat(when)
    except ValueError:
        return None
    return (at if at.tzinfo else at.replace(tzinfo=UTC)), int(gid) if gid.isdigit() else 0


def new_grades(db: Session, *, owner: User, after: str | int | None) -> list[tuple[Grade, LabReport, ReportVersion]]:
    """Grades a grader saved on the learner's reports, released since the cursor `after` (None: within
    GRADE_WINDOW), newest per report, in release order. A lesson that holds grades tells its learners at the
    release, so the cursor is the release time, not the grade's id: a grade saved (and held) before another that
    was announced is still news when it is released later. Recomputations after a rubric change (no grader) are not
    news."""
    q = (
        select(Grade, LabReport, ReportVersion)
        .join(ReportVersion, Grade.version_id == ReportVersion.id)
        .join(LabReport, ReportVersion.report_id == LabReport.id)
        .where(LabReport.owner_id == owner.id, Grade.grader_id.is_not(None), Grade.released_at.is_not(None))
    )
    mark = _read_cursor(after)
    if mark is None:
        q = q.where(Grade.released_at >= utcnow() - GRADE_WINDOW)
    elif isinstance(mark, int):
        q = q.where(Grade.id > mark)
    else:
        at, gid = mark
        q = q.where(or_(Grade.released_at > at, and_(Grade.released_at == at, Grade.id > gid)))
    newest: dict[int, tuple[Grade, LabReport, ReportVersion]] = {}
    for grade, report, version in db.execute(q.order_by(Grade.released_at, Grade.id)):
        newest[report.id] = (grade, report, version)
    return sorted(newest.values(), key=lambda row: (row[0].released_at, row[0].id))


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
