"""The grader's review page (templates/grader/review.html), as one typed object.

    page = ReviewPage.load(db, settings, grader=user, report=report, number=v, filters=filters, notice=notice)
    render(request, "grader/review.html", page.context(), block="review")

A route does what was asked (claim, release, grade, regrade), then loads the page with what that post has to say
(`ReviewNotice`): a message or an error, and after a refused save the grader's own picks and words (`GradeDraft`),
shown again unsaved. `filters` are the queue's (lesson, status, grader) the grader came from: the page's previous
and next links walk that same queue.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlencode

from sqlalchemy.orm import Session

from app.content.schema import Lesson, Rubric
from app.core.config import Settings
from app.core.models import Grade, LabReport, ReportVersion, User
from app.services.classes.scopes import Scope
from app.services.errors import NotFound
from app.services.grading import evidence as evidence_service
from app.services.grading import grades as grading
from app.services.grading import queue as grading_queue
from app.services.grading import reports as report_service
from app.services.grading.evidence import EvidenceView
from app.services.learning import lessons as lesson_service

# Where a review page's message may be shown instead of its top: beside the control that was used, where the page
# opens (the rubric's foot is thousands of pixels below the top on a phone).
NOTICE_PLACES = ("rubric",)


@dataclass(frozen=True)
class GradeDraft:
    """A grade as the grader posted it: shown again, unsaved, when the save is refused."""

    levels: dict[str, str]  # rubric item id -> level id ("" for none picked)
    feedback: str
    notes: str
    base_revision: int  # the saved grade's revision the grader started from


@dataclass(frozen=True)
class ReviewNotice:
    """What the post a page answers has to say on it."""

    error: str = ""
    message: str = ""
    posted: GradeDraft | None = None  # a refused save: keep everything the grader typed and picked
    unscored: tuple[str, ...] = ()  # a save refused for lines left without a level: marked, the first one focused
    conflict: bool = False  # a save refused because another came first: a link to the saved grade (no reload)
    at: str = ""  # where the control used sits ("rubric": the claim at the rubric's foot): its notice shows there


@dataclass(frozen=True)
class ReviewPage:
    report: LabReport
    owner: User | None
    holder: User | None  # the grader holding the claim
    versions: list[ReportVersion]  # newest first
    version: ReportVersion  # the one reviewed
    is_latest: bool
    lesson: Lesson  # as published now: its rubric scores
    lesson_then: Lesson  # as the learner submitted against: its evidence items
    lesson_version: int
    evidence: list[EvidenceView]
    rubric: Rubric | None
    keys: tuple[bool, dict[str, list[str]]]  # grading.level_keys: keyboard shortcuts per rubric line
    grade: Grade | None  # the latest saved
    resubmitted: dict | None  # what a resubmission replaces, how that was graded, and what changed since
    history: list[Grade]
    graders: dict[int, User]
    picked: dict[str, Any]  # rubric item id -> level id the form shows picked
    total: float
    feedback: str
    notes: str
    base_revision: int
    unsaved: bool  # a refused save: what the form shows is not saved yet
    unscored: tuple[str, ...]
    conflict: bool
    mine: bool  # the grader holds the claim
    error: str
    message: str
    notice_at: str
    query: str  # the queue's filters, carried by every link back to it
    next_id: int | None
    prev_id: int | None
    position: tuple[int, int] | None  # (this report's place, of how many) in the filtered queue

    def context(self) -> dict[str, Any]:
        """The template's variables: one per field (a shallow copy, so results are not copied)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def load(
        cls,
        db: Session,
        settings: Settings,
        *,
        scope: Scope,
        report: LabReport,
        number: int | None,
        filters: dict[str, str],
        notice: ReviewNotice,
    ) -> ReviewPage:
        """Version `number` of `report` (the latest when None) for the scope's grader in its class; NotFound when it
        has no such version."""
        grader = scope.user
        versions = report_service.versions(db, report=report)
        if number:
            version = next((v for v in versions if v.number == number), None)
        else:
            version = versions[0] if versions else None
        if version is None:
            raise NotFound(f"Report {report.id} has no version {number}.")
        lesson_then = evidence_service.lesson_of_version(db, report, version)
        cur = lesson_service.current(db, lesson_id=report.lesson_id)
        lesson, lesson_version = (cur.lesson, cur.version) if cur else (lesson_then, version.lesson_version)
        grade = grading.latest_saved(db, version=version)
        draft = notice.posted or _saved(grade)
        total = grade.total if grade else 0
        if notice.posted is not None:
            # the total of those picks, not of the saved grade: without JavaScript nothing recounts it on the page
            picks: dict[str, str | dict] = {k: v for k, v in draft.levels.items() if v}
            total = grading.score(lesson.rubric, picks)[1] if lesson.rubric else 0
        place = grading_queue.neighbours(
            db,
            scope=scope,
            report=report,
            lesson_id=filters.get("lesson"),
            status=filters.get("status"),
            grader=filters.get("grader"),
        )
        return cls(
            report=report,
            owner=db.get(User, report.owner_id),
            holder=db.get(User, report.claimed_by_id) if report.claimed_by_id else None,
            versions=versions,
            version=version,
            is_latest=version.number == versions[0].number,
            lesson=lesson,
            lesson_then=lesson_then,
            lesson_version=lesson_version,
            evidence=evidence_service.evidence_views(db, settings, report, version, lesson_then),
            rubric=lesson.rubric,
            keys=grading.level_keys(lesson.rubric) if lesson.rubric else (False, {}),
            grade=grade,
            resubmitted=grading.resubmission(db, version=version, versions=versions, lesson=lesson_then),
            history=grading.grade_history(db, version=version),
            graders={u.id: u for u in grading.graders(db, klass=scope.klass)},
            picked=dict(draft.levels),
            total=total,
            feedback=draft.feedback,
            notes=draft.notes,
            base_revision=draft.base_revision,
            unsaved=notice.posted is not None,
            unscored=notice.unscored,
            conflict=notice.conflict,
            mine=report.claimed_by_id == grader.id,
            error=notice.error,
            message=notice.message,
            notice_at=notice.at if notice.at in NOTICE_PLACES else "",
            query=urlencode(filters),
            next_id=place.next if place else None,
            prev_id=place.previous if place else None,
            position=(place.position, place.total) if place else None,
        )


def _saved(grade: Grade | None) -> GradeDraft:
    """The saved grade as the form shows it (an empty form before the first save)."""
    if grade is None:
        return GradeDraft({}, "", "", 0)
    return GradeDraft({k: v.get("level") for k, v in grade.scores.items()}, grade.feedback, grade.notes, grade.revision)
