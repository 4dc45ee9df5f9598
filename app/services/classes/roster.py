"""An instructor's view of one class: one row per learner with their progress, and one learner's trail.

    rows(db, scope=…, lessons=…, lesson_id=…)  -> [LearnerRow]: parts done, time, questions right/attempted, runs,
                                                report status and grade, who is stuck and why, who left
    sort_rows(rows, key=…, descending=…), filter_rows(rows, text=…, stuck=…)
    csv_text(rows)                              -> the same table as CSV (what the page shows, one row per learner)
    learner(db, scope=…, lessons=…, user_id=…)  -> LearnerTrail: their answers, attempts, runs and report history

Each figure is one grouped query over the whole class (not one per learner), so the page costs the same few
queries for 10 learners or 500. "Learners" are the class's members with the learner role; `lessons` are the
lessons the class offers, and only what a learner did in those counts (they may learn in another class too).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.content.schema import Lesson
from app.core.models import (
    Attempt,
    ClassMember,
    Grade,
    Job,
    LabReport,
    PartProgress,
    ReportVersion,
    Response,
    User,
)
from app.services import csvcells
from app.services.classes.scopes import Scope

# A part counts as "long" once a learner has spent this many times its planned minutes on it without finishing.
STUCK_PART_FACTOR = 2
STUCK_PART_DEFAULT_S = 30 * 60  # a part with no planned minutes: half an hour
# Wrong tries at one question, none right yet: past this many the learner is likely stuck on an idea.
STUCK_WRONG_TRIES = 3

SORT_KEYS = (
    "name",
    "email",
    "parts",
    "time",
    "right",
    "attempted",
    "wrong",
    "runs",
    "failed",
    "report",
    "grade",
    "seen",
)


@dataclass
class LearnerRow:
    id: int
    name: str
    email: str
    parts_done: int = 0
    parts_total: int = 0
    seconds: int = 0
    right: int = 0  # distinct questions answered right at least once
    attempted: int = 0  # distinct questions tried
    wrong: int = 0  # incorrect tries in all
    runs: int = 0  # lab jobs
    runs_failed: int = 0
    report_status: str = ""  # "" | draft | submitted | claimed | graded (the lesson's, or the latest of any)
    grade_total: float | None = None
    grade_max: float | None = None
    last_seen: datetime | None = None
    stuck: list[str] = field(default_factory=list)  # why, in words: "38 min on 'Orient' (planned 8)"
    left_at: datetime | None = None  # left the class (its LMS course no longer lists them); their work stays

    def sort_value(self, key: str):
        values = {
            "name": self.name.lower(),
            "email": self.email,
            "parts": self.parts_done,
            "time": self.seconds,
            "right": self.right,
            "attempted": self.attempted,
            "wrong": self.wrong,
            "runs": self.runs,
            "failed": self.runs_failed,
            "report": self.report_status,
            "grade": -1.0 if self.grade_total is None else self.grade_total,
            "seen": self.last_seen.timestamp() if self.last_seen else 0.0,
        }
        return values[key]


def _learners(db: Session, scope: Scope) -> dict[int, LearnerRow]:
    q = (
        select(User.id, User.display_name, User.email, ClassMember.left_at)
        .join(ClassMember, ClassMember.user_id == User.id)
        .where(ClassMember.class_id == scope.class_id, ClassMember.role == "learner")
        .order_by(User.id)
    )
    return {uid: LearnerRow(uid, name, email, left_at=left) for uid, name, email, left in db.execute(q)}


def labs_of(lessons: list[Lesson]) -> list[str]:
    """The labs whose runs the lessons' reports may cite: what a class's runs are counted over."""
    return sorted({e.lab for les in lessons if les.lab for e in les.lab.evidence})


def _parts(lessons: list[Lesson]) -> dict[tuple[str, str], tuple[str, int]]:
    """(lesson id, part id) -> (part title, seconds after which a learner on it counts as stuck)."""
    out = {}
    for lesson in lessons:
        for part in lesson.parts:
            limit = (part.minutes or 0) * 60 * STUCK_PART_FACTOR or STUCK_PART_DEFAULT_S
            out[(lesson.id, part.id)] = (part.title, limit)
    return out


def rows(db: Session, *, scope: Scope, lessons: list[Lesson], lesson_id: str | None = None) -> list[LearnerRow]:
    """Every learner of the class's row, counted within `lessons` (the class's); with `lesson_id`, within that lesson
    (its parts, questions, labs, report)."""
    every_lab = scope.klass.lesson_ids is None and lesson_id is None  # the class offers every lesson: every run counts
    if lesson_id is not None:
        lessons = [les for les in lessons if les.id == lesson_id]
    table = _learners(db, scope)
    learners = scope.learners()
    parts = _parts(lessons)
    total = len(parts)
    for learner_row in table.values():
        learner_row.parts_total = total
    lesson_ids = [les.id for les in lessons]

    progress = select(PartProgress).where(PartProgress.lesson_id.in_(lesson_ids), PartProgress.user_id.in_(learners))
    for p in db.scalars(progress):
        found = table.get(p.user_id)
        if found is None or (p.lesson_id, p.part_id) not in parts:
            continue
        row = found
        row.seconds += p.seconds_spent
        row.last_seen = max(filter(None, (row.last_seen, p.last_seen_at, p.time_reported_at)), default=None)
        title, limit = parts[(p.lesson_id, p.part_id)]
        if p.done_at is not None:
            row.parts_done += 1
        elif p.seconds_spent >= limit:
            row.stuck.append(f"{p.seconds_spent // 60} min on “{title}”, not finished")

    # per learner and question: tries, right tries, wrong tries
    right = func.sum(case((Attempt.status == "correct", 1), else_=0))
    wrong = func.sum(case((Attempt.status == "incorrect", 1), else_=0))
    per_q = (
        select(
            Attempt.user_id,
            Attempt.question_id,
            right.label("right"),
            wrong.label("wrong"),
            func.max(Attempt.created_at).label("last"),
        )
        .where(Attempt.lesson_id.in_(lesson_ids), Attempt.user_id.in_(learners))
        .group_by(Attempt.user_id, Attempt.question_id)
    )
    for uid, qid, n_right, n_wrong, last in db.execute(per_q):
        if uid not in table:
            continue
        row = table[uid]
        row.last_seen = max(filter(None, (row.last_seen, _aware(last))), default=None)
        row.attempted += 1
        row.right += 1 if n_right else 0
        row.wrong += int(n_wrong or 0)
        if not n_right and (n_wrong or 0) >= STUCK_WRONG_TRIES:
            row.stuck.append(f"{n_wrong} wrong tries at “{qid}”, none right")

    failed = func.sum(case((Job.status == "failed", 1), else_=0))
    jobs = select(Job.owner_id, func.count(Job.id), failed).where(Job.owner_id.in_(learners)).group_by(Job.owner_id)
    if not every_lab:
        jobs = jobs.where(Job.lab.in_(labs_of(lessons) or [""]))
    for uid, n, n_failed in db.execute(jobs):
        if uid in table:
            table[uid].runs, table[uid].runs_failed = int(n), int(n_failed or 0)

    reports = (
        select(LabReport)
        .where(LabReport.lesson_id.in_(lesson_ids), LabReport.owner_id.in_(learners))
        .order_by(LabReport.updated_at)
    )
    for report in db.scalars(reports):
        if report.owner_id in table:
            table[report.owner_id].report_status = report.status
    for uid, grade in _latest_grades(db, lesson_ids, learners):
        if uid in table:
            table[uid].grade_total, table[uid].grade_max = grade.total, grade.max_total
    return list(table.values())


def _aware(value: datetime | None) -> datetime | None:
    """MAX() of a timestamp column comes back as the dialect's raw value (naive, or a string on SQLite), not
    through the column's UTC type: read it as UTC like the column itself would."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _latest_grades(db: Session, lesson_ids: list[str], learners) -> list[tuple[int, Grade]]:
    """Each learner's newest grade (of their newest graded version), in ascending id so the newest wins."""
    q = (
        select(LabReport.owner_id, Grade)
        .join(ReportVersion, Grade.version_id == ReportVersion.id)
        .join(LabReport, ReportVersion.report_id == LabReport.id)
        .where(LabReport.lesson_id.in_(lesson_ids), LabReport.owner_id.in_(learners))
        .order_by(Grade.id)
    )
    return [(uid, grade) for uid, grade in db.execute(q)]


def sort_rows(table: list[LearnerRow], *, key: str, descending: bool = False) -> list[LearnerRow]:
    if key not in SORT_KEYS:
        raise ValueError(f"sort: {key!r} is not a column; use one of {', '.join(SORT_KEYS)}")
    return sorted(table, key=lambda r: (r.sort_value(key), r.id), reverse=descending)


def filter_rows(table: list[LearnerRow], *, text: str = "", stuck: bool = False) -> list[LearnerRow]:
    needle = text.strip().lower()
    return [
        r for r in table if (not needle or needle in r.name.lower() or needle in r.email) and (not stuck or r.stuck)
    ]


CSV_HEADER = (
    "user_id",
    "name",
    "email",
    "parts_done",
    "parts_total",
    "minutes",
    "questions_right",
    "questions_attempted",
    "wrong_tries",
    "lab_runs",
    "lab_runs_failed",
    "report_status",
    "grade",
    "grade_max",
    "last_seen",
    "stuck",
)


def csv_text(table: list[LearnerRow]) -> str:
    out = io.StringIO()
    w = csvcells.writer(out, lineterminator="\n")
    w.writerow(CSV_HEADER)
    for r in table:
        w.writerow(
            csvcells.row(
                [
                    r.id,
                    r.name,
                    r.email,
                    r.parts_done,
                    r.parts_total,
                    round(r.seconds / 60, 1),
                    r.right,
                    r.attempted,
                    r.wrong,
                    r.runs,
                    r.runs_failed,
                    r.report_status,
                    "" if r.grade_total is None else r.grade_total,
                    "" if r.grade_max is None else r.grade_max,
                    r.last_seen.isoformat(timespec="seconds") if r.last_seen else "",
                    "; ".join(r.stuck),
                ]
            )
        )
    return out.getvalue()


# ---------------------------------------------------------------- one learner


@dataclass
class LearnerTrail:
    user: User
    member: ClassMember
    progress: list[PartProgress]
    responses: list[Response]
    attempts: list[Attempt]
    jobs: list[Job]
    reports: list[tuple[LabReport, list[tuple[ReportVersion, Grade | None]]]]


def learner(db: Session, *, scope: Scope, lessons: list[Lesson], user_id: int) -> LearnerTrail | None:
    """Everything one learner of the class did in its lessons (`lessons`), newest first; None if the class has no
    such learner."""
    row = db.execute(
        select(User, ClassMember)
        .join(ClassMember, ClassMember.user_id == User.id)
        .where(ClassMember.class_id == scope.class_id, ClassMember.role == "learner", User.id == user_id)
    ).first()
    if row is None:
        return None
    user, member = row
    ids = [les.id for les in lessons] or [""]
    progress = list(
        db.scalars(
            select(PartProgress)
            .where(PartProgress.user_id == user_id, PartProgress.lesson_id.in_(ids))
            .order_by(PartProgress.lesson_id)
        )
    )
    responses = list(
        db.scalars(
            select(Response)
            .where(Response.user_id == user_id, Response.lesson_id.in_(ids))
            .order_by(Response.id.desc())
            .limit(200)
        )
    )
    attempts = list(
        db.scalars(
            select(Attempt)
            .where(Attempt.user_id == user_id, Attempt.lesson_id.in_(ids))
            .order_by(Attempt.id.desc())
            .limit(200)
        )
    )
    jobs_q = select(Job).where(Job.owner_id == user_id)
    if scope.klass.lesson_ids is not None:
        jobs_q = jobs_q.where(Job.lab.in_(labs_of(lessons) or [""]))
    jobs = list(db.scalars(jobs_q.order_by(Job.id.desc()).limit(100)))
    reports = []
    for report in db.scalars(
        select(LabReport).where(LabReport.owner_id == user_id, LabReport.lesson_id.in_(ids)).order_by(LabReport.id)
    ):
        versions = db.scalars(
            select(ReportVersion).where(ReportVersion.report_id == report.id).order_by(ReportVersion.number.desc())
        )
        history = []
        for v in versions:
            grade = db.scalar(select(Grade).where(Grade.version_id == v.id).order_by(Grade.revision.desc()).limit(1))
            history.append((v, grade))
        reports.append((report, history))
    return LearnerTrail(user, member, progress, responses, attempts, jobs, reports)
