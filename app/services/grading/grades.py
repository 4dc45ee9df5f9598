"""Grading: who may see which reports, claims, saving grades (the queue: app/services/grading/queue.py; rubric
recompute: rubric_sync.py; CSV export: export.py; holds and releases: release.py).

Visibility is per class (app/services/classes/scopes.py): a learner sees only their own reports; staff see the
reports of their class's learners in the lessons the class offers, an instructor all of them, a grader those of
the lessons the class assigns them (GraderAssignment). Nobody grades their own report.

A grade stores, per rubric item, the level the grader picked and that level's fraction of the item's
points. Totals are always fraction x the rubric's *current* points, so when a published rubric changes
an item's points (or a level's fraction), rubric_sync.sync_rubric appends a recomputed revision of each affected
grade. Grades are append-only revisions with (version_id, revision) unique: a save names the revision it
started from, and of two saves from the same revision the database accepts exactly one.
"""

from __future__ import annotations

import hashlib
import json
from typing import cast

from sqlalchemy import ColumnElement, CursorResult, case, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.content.schema import Rubric
from app.core.models import (
    ClassMember,
    CourseClass,
    Grade,
    GraderAssignment,
    Job,
    LabReport,
    ReportVersion,
    User,
    utcnow,
)
from app.services.classes.scopes import Scope, staff_scopes
from app.services.grading import release as grade_release
from app.services.grading.evidence import slots

MAX_TEXT = 20_000
OWN_REPORT = "This is your own report: another grader or an instructor grades it."


class GradingError(ValueError):
    """A refused action; the message says why and what to do. `unscored`: the rubric lines (item ids) a refused
    save left without a level, for the form to mark. `newer`: the version a save was refused for, because the learner
    submitted it after the grader opened the one they scored (the form carries their work over to it). `conflict`: a
    save refused because another save came first (the page links to the saved grade)."""

    def __init__(
        self, message: str, *, unscored: tuple[str, ...] = (), newer: int | None = None, conflict: bool = False
    ):
        super().__init__(message)
        self.unscored = unscored
        self.newer = newer
        self.conflict = conflict


# ---------------------------------------------------------------- who sees what


def _assignment(db: Session, *, klass: CourseClass, grader: User, lesson_id: str) -> GraderAssignment | None:
    return db.scalar(
        select(GraderAssignment).where(
            GraderAssignment.class_id == klass.id,
            GraderAssignment.user_id == grader.id,
            GraderAssignment.lesson_id == lesson_id,
        )
    )


def assign(db: Session, *, klass: CourseClass, grader: User, lesson_id: str) -> bool:
    """Let `grader` grade `lesson_id` in `klass`; False if already assigned."""
    if _assignment(db, klass=klass, grader=grader, lesson_id=lesson_id):
        return False
    db.add(GraderAssignment(class_id=klass.id, user_id=grader.id, lesson_id=lesson_id))
    try:
        db.commit()
    except IntegrityError:
        db.rollback()
        return False
    return True


def unassign(db: Session, *, klass: CourseClass, grader: User, lesson_id: str) -> bool:
    """Stop `grader` grading `lesson_id` in `klass`; False if they did not."""
    row = _assignment(db, klass=klass, grader=grader, lesson_id=lesson_id)
    if row is None:
        return False
    db.delete(row)
    db.commit()
    return True


def assignments(db: Session, *, klass: CourseClass) -> list[tuple[User, str]]:
    rows = db.execute(
        select(User, GraderAssignment.lesson_id)
        .join(GraderAssignment, GraderAssignment.user_id == User.id)
        .where(GraderAssignment.class_id == klass.id)
        .order_by(GraderAssignment.lesson_id, User.email)
    ).all()
    return [(u, lid) for u, lid in rows]


def graders(db: Session, *, klass: CourseClass) -> list[User]:
    """The class's staff: whom a report may be claimed by."""
    return list(
        db.scalars(
            select(User)
            .join(ClassMember, ClassMember.user_id == User.id)
            .where(
                ClassMember.class_id == klass.id,
                ClassMember.role.in_(("grader", "instructor")),
                ClassMember.left_at.is_(None),
            )
            .order_by(User.email)
        )
    )


def graded_lessons(db: Session, *, scope: Scope) -> set[str] | None:
    """Lesson ids whose reports the scope's user may grade in its class; None: every lesson the class offers."""
    if scope.instructor:
        return None
    q = select(GraderAssignment.lesson_id).where(
        GraderAssignment.class_id == scope.class_id, GraderAssignment.user_id == scope.user.id
    )
    return set(db.scalars(q))


def visible_where(scope: Scope) -> list[ColumnElement[bool]]:
    """The reports the scope's user sees as staff of its class: handed in (never a draft), by one of the class's
    learners, in a lesson the class offers (and, for a grader, assigned to them there); never their own."""
    where: list[ColumnElement[bool]] = [
        LabReport.status != "draft",
        LabReport.owner_id != scope.user.id,
        LabReport.owner_id.in_(scope.learners()),
        scope.lessons_where(LabReport.lesson_id),
    ]
    if not scope.instructor:
        where.append(
            LabReport.lesson_id.in_(
                select(GraderAssignment.lesson_id).where(
                    GraderAssignment.class_id == scope.class_id, GraderAssignment.user_id == scope.user.id
                )
            )
        )
    return where


def report_for_grader(db: Session, *, report_id: int, scope: Scope) -> LabReport | None:
    """The submitted report if the scope's user may grade it in its class; None (a 404, leaking nothing)
    otherwise. Nobody grades their own report, instructors included."""
    return db.scalar(select(LabReport).where(LabReport.id == report_id, *visible_where(scope)))


def grader_sees_job(db: Session, *, user: User, job: Job) -> bool:
    """Whether a submitted version of a report `user` sees as staff of some class (not their own) cites `job`."""
    for scope in staff_scopes(db, user=user):
        q = (
            select(ReportVersion.evidence)
            .join(LabReport, LabReport.id == ReportVersion.report_id)
            .where(LabReport.owner_id == job.owner_id, *visible_where(scope))
        )
        for evidence in db.scalars(q):  # a learner has a handful of versions per lesson: read them, no JSON SQL
            for pick in (evidence or {}).values():
                if isinstance(pick, dict) and pick.get("job") == job.id:
                    return True
    return False


def resubmission(db: Session, *, version: ReportVersion, versions: list[ReportVersion], lesson) -> dict | None:
    """What a resubmitted `version` replaces: the version before it among `versions`, that one's grade, and the
    evidence slots and report questions the learner changed since (`lesson`: the version the report was made
    under). None for a first version."""
    previous = next((v for v in versions if v.number < version.number), None)
    if previous is None:
        return None
    before, after = previous.evidence or {}, version.evidence or {}
    was, now = previous.answers or {}, version.answers or {}
    questions = lesson.lab.report_questions if lesson.lab else []
    return {
        "previous": previous,
        "grade": latest_saved(db, version=previous),
        "evidence": [s.id for s in slots(lesson) if before.get(s.id) != after.get(s.id)],
        "answers": [q.id for q in questions if (was.get(q.id) or "") != (now.get(q.id) or "")],
    }


def report_for_viewer(db: Session, *, report_id: int, user: User, as_learner: bool = False) -> LabReport | None:
    """Owner, or staff of a class who sees it (unless `as_learner`: then the owner only)."""
    report = db.get(LabReport, report_id)
    if report is None:
        return None
    if report.owner_id == user.id:
        return report
    if as_learner:
        return None
    if any(report_for_grader(db, report_id=report_id, scope=s) is not None for s in staff_scopes(db, user=user)):
        return report
    return None


# ---------------------------------------------------------------- claims


def claim(db: Session, *, report: LabReport, grader: User) -> None:
    """Take the report; GradingError if it is the grader's own or someone else holds it. A conditional UPDATE
    decides a race."""
    if report.owner_id == grader.id:
        raise GradingError(OWN_REPORT)
    res = db.execute(
        update(LabReport)
        .where(
            LabReport.id == report.id, LabReport.status.in_(("submitted", "graded")), LabReport.claimed_by_id.is_(None)
        )
        .values(
            status=case((LabReport.status == "submitted", "claimed"), else_=LabReport.status),
            claimed_by_id=grader.id,
            claimed_at=utcnow(),
            revision=LabReport.revision + 1,
        )
    )
    db.commit()
    db.refresh(report)
    if cast(CursorResult, res).rowcount != 1 and report.claimed_by_id != grader.id:
        holder = db.get(User, report.claimed_by_id) if report.claimed_by_id else None
        if holder:
            raise GradingError(f"{holder.display_name} ({holder.email}) claimed this report first; it stays with them.")
        raise GradingError(f"This report is {report.status} and cannot be claimed now.")


def release(db: Session, *, report: LabReport, scope: Scope) -> None:
    """Give a claim back to the queue: the holder, or an instructor of the class, may."""
    if report.claimed_by_id is None:
        return
    if report.claimed_by_id != scope.user.id and not scope.instructor:
        raise GradingError("Only the grader holding the claim, or an instructor, can release it.")
    db.execute(
        update(LabReport)
        .where(LabReport.id == report.id, LabReport.claimed_by_id == report.claimed_by_id)
        .values(
            claimed_by_id=None,
            claimed_at=None,
            revision=LabReport.revision + 1,
            status=("submitted" if report.status == "claimed" else report.status),
        )
    )
    db.commit()
    db.refresh(report)


# ---------------------------------------------------------------- grades


def level_keys(rubric: Rubric) -> tuple[bool, dict[str, list[str]]]:
    """The number key that picks each level of each line, and whether keys name points.

    Where every level of every line is worth a whole number of points from 0 to 9, distinct within its line, the
    key is that number ("3" gives 3 points); otherwise keys count the levels in order (1 for the first). One rule
    for the whole rubric, so a grader never has to ask which kind of line they are on."""
    by_points: dict[str, list[str]] = {}
    for item in rubric.items:
        points = [lv.fraction * item.points for lv in item.levels]
        whole = [round(p) for p in points]
        if any(abs(p - w) > 1e-9 or not 0 <= w <= 9 for p, w in zip(points, whole, strict=True)):
            break
        if len(set(whole)) != len(whole):
            break
        by_points[item.id] = [str(w) for w in whole]
    else:
        return True, by_points
    return False, {item.id: [str(i + 1) if i < 9 else "" for i in range(len(item.levels))] for item in rubric.items}


def rubric_hash(rubric: Rubric) -> str:
    """What a total depends on: item ids and points, level ids and fractions (not the wording)."""
    shape = [[i.id, i.points, [[lv.id, lv.fraction] for lv in i.levels]] for i in rubric.items]
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()


def latest_saved(db: Session, *, version: ReportVersion) -> Grade | None:
    """The newest revision of the version's grade, released or not: what graders and instructors work from."""
    return db.scalar(select(Grade).where(Grade.version_id == version.id).order_by(Grade.revision.desc()).limit(1))


def latest_grade(db: Session, *, version: ReportVersion) -> Grade | None:
    """The grade the learner sees: the newest released revision (a lesson that holds grades shows none until the
    release; a revision saved after a release stays unseen until the next one)."""
    return db.scalar(
        select(Grade)
        .where(Grade.version_id == version.id, Grade.released_at.is_not(None))
        .order_by(Grade.revision.desc())
        .limit(1)
    )


def last_graded(db: Session, *, report_id: int, before: int) -> tuple[ReportVersion, Grade] | None:
    """The newest version numbered below `before` that has a grade, with that grade."""
    for v in db.scalars(
        select(ReportVersion)
        .where(ReportVersion.report_id == report_id, ReportVersion.number < before)
        .order_by(ReportVersion.number.desc())
    ):
        g = latest_grade(db, version=v)
        if g is not None:
            return v, g
    return None


def grade_history(db: Session, *, version: ReportVersion) -> list[Grade]:
    return list(db.scalars(select(Grade).where(Grade.version_id == version.id).order_by(Grade.revision.desc())))


def score(rubric: Rubric, levels: dict[str, str | dict]) -> tuple[dict, float, list[str]]:
    """(scores, total, unscored item ids) for picked levels {item: level id} (or stored {item: {level, fraction}})."""
    scores, total, unscored = {}, 0.0, []
    for item in rubric.items:
        picked = levels.get(item.id)
        level_id = picked.get("level") if isinstance(picked, dict) else picked
        level = item.level(level_id) if level_id else None
        if level is not None:
            fraction = level.fraction
        elif isinstance(picked, dict) and isinstance(picked.get("fraction"), (int, float)):
            fraction = float(picked["fraction"])  # a level the rubric no longer has: keep what was awarded
        else:
            unscored.append(item.id)
            continue
        points = round(fraction * item.points, 4)
        scores[item.id] = {"level": level_id, "fraction": fraction, "points": points}
        total += points
    return scores, round(total, 4), unscored


def save_grade(
    db: Session,
    *,
    report: LabReport,
    version: ReportVersion,
    grader: User,
    base_revision: int,
    levels: dict[str, str],
    feedback: str,
    notes: str,
    rubric: Rubric,
    rubric_version: int,
) -> Grade:
    """Append a grade revision; GradingError if the report is not claimed by `grader`, a line is unscored,
    the version is not the latest, or another save (or a rubric recompute) came first."""
    if report.owner_id == grader.id:
        raise GradingError(OWN_REPORT)
    if report.claimed_by_id != grader.id:
        raise GradingError("Claim the report before saving a grade (another grader may hold it).")
    latest = db.scalar(select(func.max(ReportVersion.number)).where(ReportVersion.report_id == report.id))
    if version.number != latest:
        raise GradingError(
            f"Not saved: the learner submitted version {latest} after you opened version {version.number}. "
            f"This is version {latest}, with your scores and text carried over from version {version.number}: check "
            "them against what changed, then save.",
            newer=latest,
        )
    bad = []
    for item_id, level in levels.items():
        item = rubric.item(item_id)
        if item is None or (level and item.level(level) is None):
            bad.append(f"{item_id}: {level!r}")
    if bad:
        raise GradingError("Unknown rubric lines or levels: " + ", ".join(bad) + ".")
    scores, total, unscored = score(rubric, {k: v for k, v in levels.items() if v})
    if unscored:
        titles = ", ".join(item.title for item in rubric.items if item.id in unscored)
        raise GradingError(
            f"Pick a level for every rubric line before saving; missing: {titles}.", unscored=tuple(unscored)
        )
    if len(feedback) > MAX_TEXT or len(notes) > MAX_TEXT:
        raise GradingError(f"Feedback and notes may be at most {MAX_TEXT} characters each.")
    current = latest_saved(db, version=version)
    current_rev = current.revision if current else 0
    if base_revision != current_rev:
        raise GradingError(_conflict_message(db, current), conflict=True)
    grade = Grade(
        version_id=version.id,
        revision=current_rev + 1,
        grader_id=grader.id,
        rubric_version=rubric_version,
        rubric_hash=rubric_hash(rubric),
        scores=scores,
        total=total,
        max_total=rubric.max_points,
        feedback=feedback,
        notes=notes,
        reason="saved by grader",
        released_at=None
        if grade_release.held_for(db, owner_id=report.owner_id, lesson_id=report.lesson_id)
        else utcnow(),
    )
    db.add(grade)
    try:
        db.flush()
    except IntegrityError:  # another save from the same revision got there between our read and insert
        db.rollback()
        raise GradingError(_conflict_message(db, latest_saved(db, version=version)), conflict=True) from None
    db.execute(
        update(LabReport)
        .where(LabReport.id == report.id)
        .values(status="graded", updated_at=utcnow(), revision=LabReport.revision + 1)
    )
    db.commit()
    db.refresh(report)
    return grade


def _conflict_message(db: Session, current: Grade | None) -> str:
    if current is None:
        return (
            "Not saved: the grade changed while you were editing. Your scores and text are kept below; open the saved "
            "grade before saving again."
        )
    grader = db.get(User, current.grader_id) if current.grader_id else None
    who = grader.display_name if grader else "a rubric recompute"
    return (
        f"Not saved: this grade was saved meanwhile (revision {current.revision}, by {who}). Nothing was overwritten; "
        "your scores and text are kept below. Open the saved grade to read it, then save again if you still disagree."
    )
