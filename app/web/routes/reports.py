"""Learner lab reports: assemble evidence and answers, upload bundles, submit, see checks and grades.

GET  /reports                                     my reports, one per lesson with a lab
GET  /lessons/{id}/report[?v=N]                   the report page (draft, one version in full, the others listed)
POST /lessons/{id}/report                         action=save | submit | submit-incomplete | attach-latest
POST /lessons/{id}/report/bundles                 upload a zip from `python -m labs run` (multipart)
GET  /bundles/{id}                                 an uploaded bundle, for its owner
POST /bundles/{id}/delete                          remove an upload no submitted report cites (frees quota)
POST /api/v1/bundles, GET|DELETE /api/v1/bundles/{id}    the same for scripts

An upload keeps result.json and the artifacts it lists; the answer names the other files, which are not kept.
Over the learner's storage quota an upload is refused and nothing is kept: 413 when its bytes would pass the
quota, 409 when the count of stored uploads is at its quota (app/services/jobs/limits.py).

Evidence and bundle files are served by app/web/routes/artifacts.py.
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.datastructures import FormData, UploadFile

from app.content.schema import Lesson
from app.core.models import Bundle, LabReport, User
from app.services.errors import Conflict
from app.services.grading import grades as grading
from app.services.grading import reports as report_service
from app.services.jobs import bundles as bundle_service
from app.services.jobs import limits as limit_service
from app.services.learning import lessons as lesson_service
from app.services.learning.lessons import Current
from app.web import problems
from app.web.deps import (
    CurrentUser,
    DbInt,
    LessonWithLab,
    OwnedBundle,
    PostedForm,
    SessionDep,
    SettingsDep,
    csrf_protect,
)
from app.web.middleware.bodies import UPLOAD_LIMIT
from app.web.templates import render
from app.web.views.report_page import Notice, ReportPage
from labs.api import checks, count

router = APIRouter(dependencies=[Depends(csrf_protect)])
# "Submit report" hands in a complete draft at once; an incomplete one comes back with its gaps listed and a
# second button, "Submit with these missing", that posts action=submit-incomplete with each listed gap as a
# `missing-ok` field. It submits only if every gap the draft has then was among those confirmed.
SUBMIT_ACTIONS = ("submit", "submit-incomplete")
# Over the storage quota: its bytes are too large a request for what is left (413); its count is the state of
# what is stored (409), freed by deleting an upload.
QUOTA_STATUS = {"storage": 413, "stored uploads": 409}
api = APIRouter(prefix="/api/v1", dependencies=[Depends(csrf_protect)])
# The upload's body as the document shows it: the route reads the multipart form itself (app/web/deps.py PostedForm).
BUNDLE_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["bundle"],
                    "properties": {
                        "bundle": {
                            "type": "string",
                            "format": "binary",
                            "description": "a zip from `python -m labs run`: result.json and its artifacts",
                        }
                    },
                }
            }
        },
    }
}


def _page(
    request: Request,
    db: SessionDep,
    user: User,
    cur: Current,
    report: LabReport | None,
    notice: Notice | None = None,
    *,
    show: int | None = None,
    status_code: int = 200,
) -> Response:
    """The report page (app/web/views/report_page.py) with what this request has to say on it."""
    settings = request.app.state.settings
    page = ReportPage.load(db, settings, owner=user, cur=cur, report=report, notice=notice or Notice(), show=show)
    return render(request, "reports/report.html", page.context(), block="report", status_code=status_code)


@router.get("/reports")
def my_reports(request: Request, user: CurrentUser, db: SessionDep, deleted: DbInt | None = None) -> Response:
    """`deleted` comes from the redirect after deleting an upload: the page says so, in fixed words."""
    rows = []
    for lesson, _ in lesson_service.catalogue(db):
        if lesson.lab is None:
            continue
        report = report_service.get_report(db, owner=user, lesson_id=lesson.id)
        latest = report_service.latest_version(db, report=report) if report else None
        grade = grading.latest_grade(db, version=latest) if latest else None
        # a resubmission not graded yet: the grade the learner has is still the last graded version's
        earlier = (
            grading.last_graded(db, report_id=report.id, before=latest.number)
            if report is not None and latest is not None and grade is None
            else None
        )
        rows.append({"lesson": lesson, "report": report, "latest": latest, "grade": grade, "earlier": earlier})
    ctx = {
        "rows": rows,
        "deleted": deleted,
        "uploads": bundle_service.list_for(db, owner=user),
        "stored": limit_service.stored(db, user_id=user.id),
        "quota": limit_service.for_user(db, user_id=user.id),
        "mib": limit_service.MIB,
    }
    return render(request, "reports/index.html", ctx)


@router.get("/lessons/{lesson_id}/report")
def report_page(
    request: Request,
    lesson_id: str,
    cur: LessonWithLab,
    user: CurrentUser,
    db: SessionDep,
    v: DbInt | None = None,
    submitted: DbInt | None = None,
    missing: DbInt | None = None,
) -> Response:
    """The report page; `v` shows that submitted version in full instead of the latest. `submitted` (and
    `missing`) come from the redirect after a submit: the page says so, in fixed words, if that version exists."""
    report = report_service.get_report(db, owner=user, lesson_id=lesson_id)
    message = ""
    if submitted and report is not None and report_service.version(db, report=report, number=submitted):
        left = f", with {count(missing, 'item')} missing as you confirmed" if missing else ""
        message = f"Submitted as version {submitted}{left}. The automatic checks ran; a grader will pick it up."
    return _page(request, db, user, cur, report, Notice(message=message), show=v)


@router.post("/lessons/{lesson_id}/report")
def report_post(
    request: Request, lesson_id: str, cur: LessonWithLab, user: CurrentUser, db: SessionDep, posted: PostedForm
) -> Response:
    lesson, version = cur.lesson, cur.version
    assert lesson.lab is not None  # LessonWithLab
    form = {k: v for k, v in posted.items() if isinstance(v, str)}
    action = form.get("action", "save")
    report = report_service.get_or_create(db, owner=user, lesson_id=lesson_id)

    def page(status_code: int = 200, **notice) -> Response:  # the report page again, with what this post adds
        return _page(request, db, user, cur, report, Notice(**notice), status_code=status_code)

    if action == "attach-latest":
        if _has_draft_fields(form):  # the button sends the form: keep what was typed before attaching
            try:
                _save_posted(db, report, user, lesson, form)
            except report_service.ReportError as exc:
                return page(errors=exc.errors, form=form, status_code=422)
        done = report_service.attach_latest(db, report=report, owner=user, lesson=lesson)
        msg = (
            f"Attached your latest runs to {count(len(done.filled), 'item')}."
            if done.filled
            else "No empty item had a finished run to attach."
        )
        if done.passed_over:  # said at each item too, under its menu
            msg += (
                f" Left {count(len(done.passed_over), 'item')} empty: none of your runs can show what "
                f"{'it asks' if len(done.passed_over) == 1 else 'they ask'} (see the item)."
            )
        return page(message=msg, passed_over=done.passed_over)
    try:
        _save_posted(db, report, user, lesson, form)
        if action in SUBMIT_ACTIONS:
            gaps = report_service.gaps(lesson, report.draft)
            confirmed = set(posted.getlist("missing-ok")) if action == "submit-incomplete" else set()
            # An empty draft goes on to submit, which refuses it: there is nothing to hand in knowingly.
            if not report_service.is_empty(report.draft) and any(g.field not in confirmed for g in gaps):
                unconfirmed = frozenset(g.field for g in gaps if confirmed and g.field not in confirmed)
                return page(gaps=gaps, unconfirmed=unconfirmed)
            v = report_service.submit(
                db, settings=request.app.state.settings, report=report, lesson=lesson, lesson_version=version
            )
            # Post, then redirect: reloading the page that says "Submitted" must not hand the report in again.
            query = urlencode({"submitted": v.number, **({"missing": len(gaps)} if gaps else {})})
            return RedirectResponse(f"/lessons/{lesson_id}/report?{query}", status_code=303)
    except report_service.ReportError as exc:
        return page(errors=exc.errors, form=form, status_code=422)
    return page(message="Draft saved.")


def _has_draft_fields(form: dict) -> bool:
    """Whether a post carries the report form's fields (a script may post an action alone)."""
    return any(k.startswith(("evidence-", "answer-")) for k in form)


def _save_posted(db: SessionDep, report: LabReport, user: User, lesson: Lesson, form: dict) -> None:
    """Save the report form's picks and answers as the draft; ReportError if a pick is refused."""
    assert lesson.lab is not None  # LessonWithLab
    evidence = {s.id: form.get(f"evidence-{s.id}", "") for s in report_service.slots(lesson)}
    answers = {q.id: form.get(f"answer-{q.id}", "") for q in lesson.lab.report_questions}
    report_service.save_draft(db, report=report, owner=user, lesson=lesson, evidence=evidence, answers=answers)


def _read_upload(form: FormData) -> tuple[str, bytes, dict]:
    upload = form.get("bundle")
    if not isinstance(upload, UploadFile):
        raise bundle_service.BundleError("choose a .zip file to upload (form field `bundle`)")
    data = upload.file.read(bundle_service.MAX_UPLOAD_BYTES + 1)  # a worker thread: reading may touch disk
    if not data and not upload.filename:  # the button pressed with no file chosen sends an empty, nameless part
        raise bundle_service.BundleError("choose a .zip file to upload first")
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    return upload.filename or "bundle.zip", data, fields


@router.post("/lessons/{lesson_id}/report/bundles", max_body_size=UPLOAD_LIMIT)
def upload_bundle(
    request: Request, lesson_id: str, cur: LessonWithLab, user: CurrentUser, db: SessionDep, form: PostedForm
) -> Response:
    lesson = cur.lesson
    report = report_service.get_or_create(db, owner=user, lesson_id=lesson_id)
    posted = {k: v for k, v in form.items() if isinstance(v, str)}

    def page(status_code: int = 200, **notice) -> Response:
        return _page(request, db, user, cur, report, Notice(**notice), status_code=status_code)

    if _has_draft_fields(posted):  # the upload button sends the whole report form: save what was typed first
        try:
            _save_posted(db, report, user, lesson, posted)
        except report_service.ReportError as exc:
            return page(422, errors=exc.errors, form=posted)
    kept = " Your draft, answers included, is saved." if _has_draft_fields(posted) else ""
    try:
        filename, data, fields = _read_upload(form)
        stored = bundle_service.store(db, settings=request.app.state.settings, owner=user, filename=filename, data=data)
    except bundle_service.BundleError as exc:
        return page(422, upload_error=f"Upload refused: {exc}.{kept}")
    except limit_service.QuotaExceeded as exc:
        return page(QUOTA_STATUS[exc.limit], upload_error=f"Upload refused: {exc.message}{kept}")
    bundle, dropped = stored.bundle, f" {stored.dropped_words}" if stored.dropped else ""
    slot_id = fields.get("slot") or next(
        (s.id for s in report_service.slots(lesson) if s.lab == bundle.lab and s.kind == "evidence"), ""
    )
    try:
        report_service.attach(db, report=report, owner=user, lesson=lesson, slot_id=slot_id, ref={"bundle": bundle.id})
    except report_service.ReportError as exc:
        return page(422, upload_error=f"Uploaded as bundle {bundle.id} but not attached: {exc}.{dropped}")
    title = next(s.title for s in report_service.slots(lesson) if s.id == slot_id)
    return page(message=f"Uploaded {bundle.filename} ({bundle.lab}) and attached it to “{title}”.{dropped}")


@router.get("/bundles/{bundle_id}")
def bundle_page(request: Request, bundle: OwnedBundle) -> Response:
    return render(request, "reports/bundle.html", {"bundle": bundle, "error": ""})


@router.post("/bundles/{bundle_id}/delete")
def delete_bundle(request: Request, bundle: OwnedBundle, db: SessionDep, settings: SettingsDep) -> Response:
    """Delete an upload (owner or instructor); one a submitted report cites stays, and the page says why (409)."""
    try:
        bundle_service.delete(db, settings=settings, bundle=bundle)
    except Conflict as exc:
        return render(request, "reports/bundle.html", {"bundle": bundle, "error": exc.message}, status_code=409)
    return RedirectResponse(f"/reports?deleted={bundle.id}", status_code=303)


def _bundle_json(bundle: Bundle) -> dict:
    """An upload for scripts: its label and backend are the uploader's own words (`self_reported`), and
    `contradictions` lists where its result disagrees with itself, as the grader sees them."""
    env = bundle.result.get("environment", {})
    return {
        "id": bundle.id,
        "lab": bundle.lab,
        "filename": bundle.filename,
        "size_bytes": bundle.size_bytes,
        "self_reported": True,
        "label": env.get("label"),
        "emulated": bool(env.get("emulated")),
        "contradictions": checks.contradictions(bundle.result),
        "artifacts": [a["name"] for a in bundle.result.get("artifacts", [])],
        "url": f"/bundles/{bundle.id}",
        "created_at": bundle.created_at,
    }


@api.post(
    "/bundles",
    status_code=201,
    response_model=None,
    max_body_size=UPLOAD_LIMIT,
    operation_id="upload_bundle",
    summary="Upload a lab bundle",
    tags=["bundles"],
    responses=problems.responses(s409="At your quota of stored uploads", s413="Over your storage quota"),
    openapi_extra=BUNDLE_BODY,
)
def api_upload_bundle(request: Request, user: CurrentUser, db: SessionDep, form: PostedForm) -> dict | JSONResponse:
    """Upload a lab bundle (multipart field `bundle`: a zip of result.json and its artifacts). Only result.json and
    the artifacts it lists are kept; `dropped` names the other files. 413 / 409 over the storage quota."""
    try:
        filename, data, _ = _read_upload(form)
        stored = bundle_service.store(db, settings=request.app.state.settings, owner=user, filename=filename, data=data)
    except bundle_service.BundleError as exc:
        return JSONResponse({"detail": f"Upload refused: {exc}."}, status_code=422)
    except limit_service.QuotaExceeded as exc:
        return JSONResponse({"detail": f"Upload refused: {exc.message}", "quota": exc.limit}, QUOTA_STATUS[exc.limit])
    return {**_bundle_json(stored.bundle), "dropped": stored.dropped}


@api.get("/bundles/{bundle_id}", operation_id="get_bundle", summary="An uploaded bundle", tags=["bundles"])
def api_bundle(bundle: OwnedBundle) -> dict:
    return _bundle_json(bundle)


@api.delete(
    "/bundles/{bundle_id}",
    operation_id="delete_bundle",
    summary="Delete an uploaded bundle",
    tags=["bundles"],
    responses=problems.responses(s409="A submitted report cites it"),
)
def api_delete_bundle(bundle: OwnedBundle, db: SessionDep, settings: SettingsDep) -> dict:
    """Delete an upload; 409 when a submitted report cites it."""
    bundle_service.delete(db, settings=settings, bundle=bundle)
    return {"deleted": bundle.id}
