"""The grader's side of one class: the queue, claiming, the review page with the rubric, regrade, CSV export.
Every address is under /classes/{slug} (the class; app/web/routes/classview.py says why it is in the address),
and only the class's graders and instructors reach them.

    GET  /classes/{slug}/grader                          queue, filterable by lesson, status and grader (stable order)
    POST /classes/{slug}/grader/assignments              instructors: let a grader grade a lesson (or remove that)
    POST /classes/{slug}/grader/releases                 release a lesson's held grades; instructors: hold or not
    GET  /classes/{slug}/grader/reports/{id}[?v=N]       review: evidence, checks, answers, rubric, notes, feedback
    POST /classes/{slug}/grader/reports/{id}/claim|release|grade|regrade
    GET  /classes/{slug}/grader/export.csv[?lesson=ID]   grades as CSV

Reports a grader may not grade in the class answer 404, like reports that do not exist.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from app.content.schema import MAX_ID, is_id
from app.core.digits import DB_INT_MAX, whole_number
from app.core.models import LabReport
from app.services.accounts import users as user_service
from app.services.classes import registry as class_registry
from app.services.classes.scopes import Scope
from app.services.grading import evidence as evidence_service
from app.services.grading import export as grade_export
from app.services.grading import grades as grading
from app.services.grading import queue as grading_queue
from app.services.grading import release as grade_release
from app.services.grading import reports as report_service
from app.services.learning import lessons as lesson_service
from app.services.lti import registry as lti
from app.services.lti import sync as lti_sync
from app.web.deps import ClassInstructor, ClassStaff, DbInt, GradedReport, PostedForm, SessionDep, csrf_protect
from app.web.downloads import attachment
from app.web.templates import render
from app.web.views.review_page import GradeDraft, ReviewNotice, ReviewPage

log = logging.getLogger(__name__)
router = APIRouter(prefix="/classes/{slug}/grader", dependencies=[Depends(csrf_protect)])


def _filters(lesson: str | None, status: str | None, grader: str | None) -> dict:
    return {k: v for k, v in (("lesson", lesson), ("status", status), ("grader", grader)) if v}


@router.get("")
def queue_page(
    request: Request,
    scope: ClassStaff,
    db: SessionDep,
    lesson: str | None = None,
    status: str | None = None,
    grader: str | None = None,
) -> Response:
    if grader not in (None, "", "me", "none") and whole_number(grader) is None:
        raise HTTPException(
            422, f"grader: {grader[:40]!r} is not a grader filter; use me, none or a grader's user id (digits 0-9)."
        )
    allowed = grading.graded_lessons(db, scope=scope)
    catalogue = [les for les, _ in lesson_service.catalogue(db) if les.lab is not None and scope.offers(les.id)]
    lessons = [les for les in catalogue if allowed is None or les.id in allowed]
    rows = grading_queue.queue(db, scope=scope, lesson_id=lesson, status=status, grader=grader)
    ctx = {
        "rows": rows,
        "lessons": lessons,
        "graders": grading.graders(db, klass=scope.klass),
        "filters": _filters(lesson, status, grader),
        "query": urlencode(_filters(lesson, status, grader)),
        "statuses": grading_queue.QUEUE_STATUSES,
        "assigned": allowed,
        "assignments": grading.assignments(db, klass=scope.klass) if scope.instructor else [],
        "all_lessons": catalogue,
        "assign_note": _assign_note(request),
        "own": grading_queue.own_in_queue(db, scope=scope),
        "releases": _releases(db, scope, lessons),
        "release_note": RELEASE_NOTES.get(request.query_params.get("released", ""), "").format(
            n=whole_number(request.query_params.get("n", "")) or 0, lesson=(request.query_params.get("for") or "")[:64]
        ),
    }
    return render(request, "grader/index.html", ctx, block="queue")


@dataclass(frozen=True)
class Release:
    lesson: object
    held: bool
    waiting: int


def _releases(db, scope: Scope, lessons) -> list[Release]:
    held = grade_release.held_lessons(db, klass=scope.klass)
    return [
        Release(
            les, les.id in held, grade_release.waiting(db, klass=scope.klass, lesson_id=les.id) if les.id in held else 0
        )
        for les in lessons
    ]


# What the queue page says after a release or a change of mode (POST, then redirect): fixed sentences.
RELEASE_NOTES = {
    "release": "Released {n} grade(s) of {lesson}: each learner is told on their next page.",
    "hold": "{lesson} now holds grades until you release them.",
    "as-saved": "{lesson} releases grades as they are saved; {n} held grade(s) were released now.",
}


@router.post("/releases")
def releases(
    request: Request,
    scope: ClassStaff,
    db: SessionDep,
    lesson_id: Annotated[str, Form(max_length=64)],
    action: Annotated[str, Form(max_length=10)],
) -> Response:
    """Release a lesson's held grades in the class (its graders and instructors), or hold / stop holding them (its
    instructors)."""
    allowed = grading.graded_lessons(db, scope=scope)
    if (
        (allowed is not None and lesson_id not in allowed)
        or not scope.offers(lesson_id)
        or lesson_service.current(db, lesson_id=lesson_id) is None
    ):
        raise HTTPException(
            404, f"lesson_id: there is no lesson {lesson_id[:64]!r} that you grade in {scope.klass.title}."
        )
    if action not in RELEASE_NOTES:
        raise HTTPException(422, f"action: {action[:20]!r} is not one of release, hold, as-saved.")
    if action != "release" and not scope.instructor:
        raise HTTPException(403, "Only an instructor decides whether a lesson holds its grades; you can release them.")
    if action == "release":
        n = grade_release.release_all(db, klass=scope.klass, lesson_id=lesson_id)
    else:
        n = grade_release.set_hold(db, klass=scope.klass, lesson_id=lesson_id, hold=action == "hold", user=scope.user)
    if n:
        _pass_back(request, db, scope, lesson_id)
    query = urlencode({"released": action, "n": n, "for": lesson_id})
    return RedirectResponse(f"/classes/{scope.klass.slug}/grader?{query}#release-h", status_code=303)


# What the queue page says after an assignment (POST, then redirect to ?assign=KIND&email=…&for=LESSON#assign-h, at the
# form): fixed sentences, so the address can name a grader or lesson but never put words of its own on the page. A
# refusal names the form's field by its label, and the form comes back with what was typed, that field marked.
ASSIGN_NOTES = {
    "assigned": (None, "{email} now grades {lesson}."),
    "removed": (None, "{email} no longer grades {lesson}."),
    "already": (None, "{email} already grades {lesson}: nothing changed."),
    "not-assigned": (None, "{email} does not grade {lesson}: nothing changed."),
    "no-grader": (
        "email",
        "Grader's email: no grader with the email {email} in this class (add them as a grader on the People page "
        "first). Nothing changed.",
    ),
    "no-lesson": ("lesson", "Lesson: there is no lesson {lesson!r}. Nothing changed."),
}


@dataclass(frozen=True)
class AssignNote:
    field: str | None  # the form field a refusal is about ("email" | "lesson"), None when nothing was refused
    words: str
    email: str  # as typed (a refusal) or as stored (a change): the form shows it again after a refusal
    lesson: str

    @property
    def is_error(self) -> bool:
        return self.field is not None


def _assign_note(request: Request) -> AssignNote | None:
    q = request.query_params
    found = ASSIGN_NOTES.get(q.get("assign", ""))
    if found is None:
        return None
    field, words = found
    email, lesson = q.get("email", "")[:254], q.get("for", "")[:64]
    return AssignNote(field, words.format(email=email, lesson=lesson), email, lesson)


@router.post("/assignments")
def assignments(
    request: Request,
    scope: ClassInstructor,
    db: SessionDep,
    email: Annotated[str, Form(max_length=254)],
    lesson_id: Annotated[str, Form(max_length=64)],
    action: Annotated[str, Form()] = "assign",
) -> Response:
    klass = scope.klass
    grader = user_service.get_by_email(db, email=email)
    role = class_registry.role_in(db, class_id=klass.id, user_id=grader.id) if grader else None
    if grader is None or role not in ("grader", "instructor"):
        kind = "no-grader"
    elif not scope.offers(lesson_id) or lesson_service.current(db, lesson_id=lesson_id) is None:
        kind = "no-lesson"
    elif action == "remove":
        kind = "removed" if grading.unassign(db, klass=klass, grader=grader, lesson_id=lesson_id) else "not-assigned"
        email = grader.email
    else:
        kind = "assigned" if grading.assign(db, klass=klass, grader=grader, lesson_id=lesson_id) else "already"
        email = grader.email
    # `for`, not `lesson`: the queue's lesson filter is `lesson`, and an assignment is no reason to filter the queue
    query = urlencode({"assign": kind, "email": email, "for": lesson_id})
    return RedirectResponse(f"/classes/{klass.slug}/grader?{query}#assign-h", 303)


def _review(
    request: Request,
    db: SessionDep,
    scope: Scope,
    report: LabReport,
    number: int | None = None,
    notice: ReviewNotice | None = None,
    status_code: int = 200,
) -> Response:
    """The review page (app/web/views/review_page.py) with what this request has to say on it, within the queue
    filters the grader came from."""
    filters = {k: request.query_params[k] for k in ("lesson", "status", "grader") if request.query_params.get(k)}
    page = ReviewPage.load(
        db,
        request.app.state.settings,
        scope=scope,
        report=report,
        number=number,
        filters=filters,
        notice=notice or ReviewNotice(),
    )
    return render(request, "grader/review.html", page.context(), block="review", status_code=status_code)


@router.get("/reports/{report_id}")
def review_page(
    request: Request, report: GradedReport, scope: ClassStaff, db: SessionDep, v: DbInt | None = None
) -> Response:
    return _review(request, db, scope, report, v)


@router.post("/reports/{report_id}/claim")
def claim(
    request: Request,
    report: GradedReport,
    scope: ClassStaff,
    db: SessionDep,
    at: Annotated[str, Form(max_length=16)] = "",
) -> Response:
    """`at=rubric`: claimed with the button at the rubric's foot; the answer opens at the rubric, and says so there."""
    try:
        grading.claim(db, report=report, grader=scope.user)
    except grading.GradingError as exc:
        return _review(request, db, scope, report, notice=ReviewNotice(error=str(exc), at=at), status_code=409)
    return _review(
        request, db, scope, report, notice=ReviewNotice(message="Claimed: this report is yours to grade.", at=at)
    )


@router.post("/reports/{report_id}/release")
def release(request: Request, report: GradedReport, scope: ClassStaff, db: SessionDep) -> Response:
    try:
        grading.release(db, report=report, scope=scope)
    except grading.GradingError as exc:
        return _review(request, db, scope, report, notice=ReviewNotice(error=str(exc)), status_code=403)
    return _review(request, db, scope, report, notice=ReviewNotice(message="Released back to the queue."))


@router.post("/reports/{report_id}/grade")
def save_grade(
    request: Request, report: GradedReport, scope: ClassStaff, db: SessionDep, posted_form: PostedForm
) -> Response:
    user = scope.user
    form = {k: v for k, v in posted_form.items() if isinstance(v, str)}
    number, base_revision = whole_number(form.get("version", "0")), whole_number(form.get("base_revision", "0"))
    if number is None or base_revision is None:
        raise HTTPException(422, f"version and base_revision must be whole numbers (digits 0-9) up to {DB_INT_MAX}.")
    version = report_service.version(db, report=report, number=number)
    if version is None:
        raise HTTPException(404, f"Report {report.id} has no version {number}.")
    cur = lesson_service.current(db, lesson_id=report.lesson_id)
    rubric = cur.lesson.rubric if cur else None
    if cur is None or rubric is None:
        raise HTTPException(
            409, f"Lesson {report.lesson_id!r} has no rubric.yaml; an instructor must add one before grading."
        )
    levels = {item.id: form.get(f"level-{item.id}", "") for item in rubric.items}
    feedback, notes = form.get("feedback", ""), form.get("notes", "")
    posted = GradeDraft(levels, feedback, notes, base_revision)
    try:
        grading.save_grade(
            db,
            report=report,
            version=version,
            grader=user,
            base_revision=base_revision,
            levels=levels,
            feedback=feedback,
            notes=notes,
            rubric=rubric,
            rubric_version=cur.version,
        )
    except grading.GradingError as exc:
        if exc.newer is not None:
            # The learner resubmitted while the grader scored: their work goes onto the new version, unsaved, based
            # on that version's grade (if any), for them to check against what changed. The old version keeps its grade.
            newer = report_service.version(db, report=report, number=exc.newer)
            newer_grade = grading.latest_saved(db, version=newer) if newer else None
            posted = replace(posted, base_revision=newer_grade.revision if newer_grade else 0)
            number = exc.newer
        refused = ReviewNotice(error=str(exc), posted=posted, unscored=exc.unscored, conflict=exc.conflict)
        return _review(request, db, scope, report, number, refused, status_code=409)
    if grade_release.held_for(db, owner_id=report.owner_id, lesson_id=report.lesson_id):
        message = "Grade saved and held: the learner sees it when this lesson's grades are released."
    else:
        message = "Grade saved. The learner can see it now."
        _pass_back(request, db, scope, report.lesson_id)
    return _review(request, db, scope, report, number, ReviewNotice(message=message))


def _pass_back(request: Request, db, scope: Scope, lesson_id: str) -> None:
    """Released grades go to the gradebook of every LMS course of this class that links this lesson's lab report (LTI
    1.3 AGS), each to its own members only. An LMS that refuses or is down is logged, never raised: the release
    stands, and the class's LMS page's button resends."""
    key = lti.tool_key(request.app.state.settings.data_dir)
    for line in lti_sync.send_lesson_grades(db, klass=scope.klass, lesson_id=lesson_id, key=key):
        log.info("LTI grade passback for %s in %s: %s", lesson_id, scope.klass.slug, line)


@router.post("/reports/{report_id}/regrade")
def regrade(
    request: Request, report: GradedReport, scope: ClassStaff, db: SessionDep, version: Annotated[DbInt, Form()]
) -> Response:
    v = report_service.version(db, report=report, number=version)
    if v is None:
        raise HTTPException(404, f"Report {report.id} has no version {version}.")
    report_service.recheck(
        db, settings=request.app.state.settings, version=v, lesson=evidence_service.lesson_of_version(db, report, v)
    )
    return _review(request, db, scope, report, version, ReviewNotice(message="Automatic checks re-run."))


@router.get("/export.csv")
def export(scope: ClassStaff, db: SessionDep, lesson: str | None = None) -> Response:
    """Grades as CSV, of every lesson or of `lesson` (an id: lowercase letters, digits and dashes)."""
    if lesson is not None and not is_id(lesson):
        raise HTTPException(
            422,
            f"lesson: {lesson[:80]!r} is not a lesson id; an id is lowercase letters, digits and dashes "
            f"(at most {MAX_ID} characters), e.g. transformer-scaling, or leave lesson out for every lesson.",
        )
    body = grade_export.export_csv(db, scope=scope, lesson_id=lesson)
    return Response(
        body,
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": attachment(f"grades-{scope.klass.slug}-{lesson or 'all'}.csv"),
            "X-Content-Type-Options": "nosniff",
        },
    )
