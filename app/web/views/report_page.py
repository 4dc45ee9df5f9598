"""The learner's lab report page (templates/reports/report.html), as one typed object.

    page = ReportPage.load(db, settings, owner=user, cur=cur, report=report, notice=Notice(message="Draft saved."))
    render(request, "reports/report.html", page.context(), block="report")

A route does what was asked (save, submit, upload), then loads the page with what that post has to say
(`Notice`: a message, the refused fields, the gaps of an incomplete report) and renders it. One submitted
version is shown in full (the latest, or `show`); the others are a line each, so the page costs one version's
results however often the learner submitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from sqlalchemy.orm import Session

from app.content.schema import Lesson, Rubric
from app.core.config import Settings
from app.core.models import Grade, LabReport, ReportVersion, User
from app.services.errors import NotFound
from app.services.grading import evidence as evidence_service
from app.services.grading import grades as grading
from app.services.grading import reports as report_service
from app.services.grading.evidence import EvidenceView, Slot
from app.services.grading.reports import Gap
from app.services.jobs import bundles as bundle_service
from app.services.learning.lessons import Current
from labs import catalog

MAX_VERSIONS_LISTED = 20  # submitted versions listed with their grade; earlier ones as bare links


@dataclass(frozen=True)
class Notice:
    """What the post a page answers has to say on it."""

    message: str = ""
    upload_error: str = ""
    errors: dict[str, str] = field(default_factory=dict)  # field -> why it was refused
    form: dict[str, str] | None = None  # a refused post: what the learner sent, shown instead of the stored draft
    gaps: list[Gap] = field(default_factory=list)  # "Submit" on an incomplete draft: what it lacks
    unconfirmed: frozenset[str] = frozenset()  # gaps the learner did not confirm when submitting anyway
    passed_over: dict[str, str] = field(default_factory=dict)  # "Attach my latest runs": slot -> why left empty


@dataclass(frozen=True)
class VersionLine:
    """A submitted version as the list shows it: its grade (if released) and its checks counted."""

    version: ReportVersion
    grade: Grade | None
    summary: dict[str, int]


@dataclass(frozen=True)
class ShownVersion(VersionLine):
    """The version shown in full: its evidence, results and checks too."""

    evidence: list[EvidenceView]


@dataclass(frozen=True)
class ReportPage:
    lesson: Lesson
    lesson_version: int
    report: LabReport | None
    slots: list[Slot]
    picks: dict[str, str]  # slot id -> the run attached ("job:7", "bundle:3"), as the form's menus show it
    answers: dict[str, str]  # question id -> the answer written
    states: dict[str, str]  # slot id -> the attached run's state in words
    candidates: dict[str, list[tuple[str, str]]]  # slot id -> (value, words) of the runs it may carry
    asks: dict[str, catalog.Ask]  # slot id -> the run an item asks for, where it asks for one
    history: list[VersionLine]
    earlier: list[int]  # versions beyond MAX_VERSIONS_LISTED: numbers only
    current: ShownVersion | None
    rubric: Rubric | None
    errors: dict[str, str]
    gaps: list[Gap]
    unconfirmed: frozenset[str]
    passed_over: dict[str, str]  # slot id -> why "Attach my latest runs" left it empty
    message: str
    upload_error: str
    max_upload_mb: int

    def context(self) -> dict[str, Any]:
        """The template's variables: one per field (a shallow copy, so results are not copied)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def load(
        cls,
        db: Session,
        settings: Settings,
        *,
        owner: User,
        cur: Current,
        report: LabReport | None,
        notice: Notice,
        show: int | None = None,
    ) -> ReportPage:
        """The page of `owner`'s report on `cur` (a lesson with a lab); NotFound when `show` names no version."""
        lesson = cur.lesson
        assert lesson.lab is not None  # LessonWithLab
        draft = (report.draft if report else None) or {}
        evidence = draft.get("evidence", {})
        slots = report_service.slots(lesson)
        if notice.form is not None:
            picks = {s.id: notice.form.get(f"evidence-{s.id}", "") for s in slots}
            answers = {q.id: notice.form.get(f"answer-{q.id}", "") for q in lesson.lab.report_questions}
        else:
            picks = {s.id: _ref_value(evidence.get(s.id)) for s in slots}
            answers = dict(draft.get("answers", {}))
        versions = report_service.versions(db, report=report) if report else []
        shown = next((v for v in versions if v.number == show), None) if show else (versions[0] if versions else None)
        if show and shown is None:
            raise NotFound(f"Your lab report has no version {show}.")
        current = None
        if shown is not None:
            assert report is not None
            then = evidence_service.lesson_of_version(db, report, shown)
            current = ShownVersion(
                **vars(_line(db, shown)), evidence=evidence_service.evidence_views(db, settings, report, shown, then)
            )
        return cls(
            lesson=lesson,
            lesson_version=cur.version,
            report=report,
            slots=slots,
            picks=picks,
            answers=answers,
            states=evidence_service.slot_states(db, settings, lesson, evidence),
            candidates={s.id: report_service.candidates(db, owner=owner, lab=s.lab, slot=s) for s in slots},
            asks={s.id: ask for s in slots if (ask := evidence_service.ask_for(s))},
            history=[_line(db, v) for v in versions[:MAX_VERSIONS_LISTED]],
            earlier=[v.number for v in versions[MAX_VERSIONS_LISTED:]],
            current=current,
            rubric=lesson.rubric,
            errors=notice.errors,
            gaps=notice.gaps,
            unconfirmed=notice.unconfirmed,
            passed_over=notice.passed_over,
            message=notice.message,
            upload_error=notice.upload_error,
            max_upload_mb=bundle_service.MAX_UPLOAD_BYTES // (1024 * 1024),
        )


def _line(db: Session, version: ReportVersion) -> VersionLine:
    return VersionLine(version, grading.latest_grade(db, version=version), report_service.summary(version.checks or {}))


def _ref_value(ref: dict | None) -> str:
    """An attached run as the form's menu names it: "job:7" or "bundle:3"."""
    if not ref:
        return ""
    kind = "job" if "job" in ref else "bundle"
    return f"{kind}:{ref[kind]}"
