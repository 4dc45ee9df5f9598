"""The grading queue: the reports a grader works through in one class, in one stable order, and one report's place
in it.

    queue(db, scope=…, lesson_id=…, status=…, grader=…)       -> [QueueRow], oldest submission first (ties by id)
    neighbours(db, scope=…, report=…, <the same filters>)     -> Neighbours(previous, next, position, total) | None
    own_in_queue(db, scope=…)                                  -> lessons where the user's own report would be queued

What a scope's user may see at all is grades.visible_where (their class's learners, its lessons, their
assignments); the queue adds the statuses and the page's filters (`_queue_where`), once, for both the list and the
review page's previous/next, so the two always agree. Each reads a fixed number of statements, however long the
queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.orm import Session

from app.core.digits import whole_number
from app.core.models import Grade, LabReport, ReportVersion, User
from app.services.classes.scopes import Scope
from app.services.grading.grades import graded_lessons, visible_where
from app.services.grading.reports import summary as check_summary

QUEUE_STATUSES = ("submitted", "claimed", "graded")


@dataclass
class QueueRow:
    report: LabReport
    owner: User
    version: ReportVersion
    grader: User | None
    grade: Grade | None  # the latest version's
    earlier: tuple[ReportVersion, Grade] | None = None  # a resubmission not graded yet: the last graded version

    @property
    def check_counts(self) -> dict[str, int]:
        """The version's items counted by status, an optional item left empty apart from a missing one."""
        return check_summary(self.version.checks or {})


def _queue_where(
    scope: Scope, *, lesson_id: str | None, status: str | None, grader: str | None
) -> list[ColumnElement[bool]]:
    """The conditions of the queue the scope's user sees with these filters, with no statement of its own: `queue`
    lists the reports they pick and `neighbours` finds one report's place among them, so both read the same queue."""
    user = scope.user
    where: list[ColumnElement[bool]] = [
        *visible_where(scope),
        LabReport.status.in_(QUEUE_STATUSES),
        LabReport.submitted_at.is_not(None),  # the order's key; set with the status at every submit
        select(ReportVersion.id).where(ReportVersion.report_id == LabReport.id).exists(),
    ]
    if lesson_id:
        where.append(LabReport.lesson_id == lesson_id)
    if status in QUEUE_STATUSES:
        where.append(LabReport.status == status)
    if grader == "me":
        where.append(LabReport.claimed_by_id == user.id)
    elif grader == "none":
        where.append(LabReport.claimed_by_id.is_(None))
    elif (grader_id := whole_number(grader)) is not None:
        where.append(LabReport.claimed_by_id == grader_id)
    return where


def queue(
    db: Session, *, scope: Scope, lesson_id: str | None = None, status: str | None = None, grader: str | None = None
) -> list[QueueRow]:
    """Submitted reports of the scope's class its user may grade (never their own), oldest submission first (ties
    by id): a stable order.

    grader: 'me', 'none' (unclaimed) or a user id as text.
    """
    where = _queue_where(scope, lesson_id=lesson_id, status=status, grader=grader)
    reports = db.scalars(select(LabReport).where(*where).order_by(LabReport.submitted_at, LabReport.id)).all()
    if not reports:
        return []
    # Each read below covers every queued report at once, so the page costs the same few statements for 2
    # reports or 200: the versions with their grades, the latest version's row, and the people.
    in_queue = select(LabReport.id).where(*where).scalar_subquery()
    numbers: dict[int, list[tuple[int, int]]] = {}  # report id -> [(version number, version id)], newest first
    for report_id, number, version_id in db.execute(
        select(ReportVersion.report_id, ReportVersion.number, ReportVersion.id)
        .where(ReportVersion.report_id.in_(in_queue))
        .order_by(ReportVersion.report_id, ReportVersion.number.desc())
    ):
        numbers.setdefault(report_id, []).append((number, version_id))
    grades: dict[int, Grade] = {}  # version id -> its latest grade
    for g in db.scalars(
        select(Grade)
        .join(ReportVersion, Grade.version_id == ReportVersion.id)
        .where(ReportVersion.report_id.in_(in_queue))
        .order_by(Grade.version_id, Grade.revision)
    ):
        grades[g.version_id] = g
    wanted: set[int] = set()  # the versions a row shows: the latest, and a resubmission's last graded one
    earlier_of: dict[int, int] = {}
    for report_id, versions in numbers.items():
        latest_id = versions[0][1]
        wanted.add(latest_id)
        if latest_id not in grades:
            graded = next((vid for _, vid in versions[1:] if vid in grades), None)
            if graded is not None:
                wanted.add(graded)
                earlier_of[report_id] = graded
    rows_of = {v.id: v for v in db.scalars(select(ReportVersion).where(ReportVersion.id.in_(wanted)))}
    people_ids = {r.owner_id for r in reports} | {r.claimed_by_id for r in reports if r.claimed_by_id}
    people = {u.id: u for u in db.scalars(select(User).where(User.id.in_(people_ids)))}
    rows = []
    for r in reports:
        if r.id not in numbers:
            continue
        v = rows_of[numbers[r.id][0][1]]
        owner = people.get(r.owner_id)
        if owner is None:  # deleted meanwhile (reports cascade with their owner)
            continue
        earlier = earlier_of.get(r.id)
        rows.append(
            QueueRow(
                r,
                owner,
                v,
                people.get(r.claimed_by_id) if r.claimed_by_id else None,
                grades.get(v.id),
                (rows_of[earlier], grades[earlier]) if earlier is not None else None,
            )
        )
    return rows


@dataclass(frozen=True)
class Neighbours:
    """A report's place in a queue: the reports before and after it (None at the ends), and "position of total"."""

    previous: int | None
    next: int | None
    position: int  # from 1
    total: int


def neighbours(
    db: Session,
    *,
    scope: Scope,
    report: LabReport,
    lesson_id: str | None = None,
    status: str | None = None,
    grader: str | None = None,
) -> Neighbours | None:
    """Where `report` stands in the queue `queue` lists for the same user and filters; None when they leave it out.

    One statement, whatever the queue's length: the queue's order is (submitted_at, id), so the report's key finds
    its neighbours by keyset (the last row before it, the first after it) and its position by counting the rows
    before it, each a subquery over the same conditions; the review page reads it for every report it shows.
    """
    where = _queue_where(scope, lesson_id=lesson_id, status=status, grader=grader)
    at, rid = report.submitted_at, report.id
    if at is None:
        return None
    before = or_(LabReport.submitted_at < at, and_(LabReport.submitted_at == at, LabReport.id < rid))
    after = or_(LabReport.submitted_at > at, and_(LabReport.submitted_at == at, LabReport.id > rid))
    counted = select(func.count()).select_from(LabReport)
    row = db.execute(
        select(
            select(LabReport.id)
            .where(*where, before)
            .order_by(LabReport.submitted_at.desc(), LabReport.id.desc())
            .limit(1)
            .scalar_subquery(),
            select(LabReport.id)
            .where(*where, after)
            .order_by(LabReport.submitted_at, LabReport.id)
            .limit(1)
            .scalar_subquery(),
            counted.where(*where, before).scalar_subquery(),
            counted.where(*where).scalar_subquery(),
            counted.where(*where, LabReport.id == rid).scalar_subquery(),
        )
    ).one()
    previous, following, earlier, total, present = row
    if not present:
        return None
    return Neighbours(previous=previous, next=following, position=earlier + 1, total=total)


def own_in_queue(db: Session, *, scope: Scope) -> list[str]:
    """Lesson ids where the scope's user handed in a report of their own that would be in their queue of this class
    but for being theirs (a person who learns in the class they grade: another grader takes it)."""
    lessons = graded_lessons(db, scope=scope)
    q = select(LabReport.lesson_id).where(
        LabReport.owner_id == scope.user.id,
        LabReport.status.in_(QUEUE_STATUSES),
        scope.lessons_where(LabReport.lesson_id),
    )
    if lessons is not None:
        q = q.where(LabReport.lesson_id.in_(sorted(lessons) or [""]))
    return list(db.scalars(q.order_by(LabReport.lesson_id)))
