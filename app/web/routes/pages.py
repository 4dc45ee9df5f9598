"""Home, the authoring landing page (authors only), and the notices every page can show.

    GET  /                        the learner's classes and lessons (resume, or done) / the welcome page
    GET  /instructor              lessons and their versions, with notes and downloads (authors)
    GET  /notices                 htmx: announce finished jobs and new grades (see app/web/notice_session.py)
    POST /notices/dismiss         forget one notice
    GET  /notices/grades/{id}     mark a grade seen and go to it on the report page

The grader's queue is in grading.py.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse, Response

from app.services.classes import registry as class_registry
from app.services.errors import NotFound
from app.services.learning import lessons as lesson_service
from app.services.learning import notices
from app.services.learning import progress as learning
from app.web import notice_session
from app.web.deps import AuthorUser, CurrentUser, DbInt, SessionDep, ViewerDep, csrf_protect
from app.web.routes.authoring import instructor_index
from app.web.templates import is_htmx, render

router = APIRouter(dependencies=[Depends(csrf_protect)])


@router.get("/")
async def home(request: Request, viewer: ViewerDep, db: SessionDep):
    """Reads only, on the event loop (app/web/deps.py Viewer says why)."""
    user = await viewer.optional()
    if user is None:
        return render(request, "home.html", {"progress": []})
    catalogue = lesson_service.catalogue(db)
    ctx = {
        "progress": learning.dashboard(db, user=user, lessons=catalogue),
        "memberships": [m for m in class_registry.memberships(db, user_id=user.id) if not m.left],
    }
    return render(request, "home.html", ctx)


@router.get("/instructor")
def instructor_home(request: Request, user: AuthorUser, db: SessionDep):
    ctx = instructor_index(db, request.app.state.content_errors)
    return render(request, "instructor/index.html", ctx | {"discarded": request.query_params.get("discarded") == "1"})


@router.get("/notices")
def notices_poll(request: Request, user: CurrentUser, db: SessionDep) -> Response:
    session = request.session
    before = notice_session.pending(session)
    for job in notices.finished_jobs(db, owner=user, ids=notice_session.watched(session)):
        notice_session.forget(session, job.id)
        # a cancelled run (by the learner, or replaced by a newer one) is no news; it stayed watched, and this
        # poll ran every few seconds for the rest of the session
        if job.status != "cancelled":
            notice_session.add(session, notice_session.job_notice(job))
    if notice_session.grades_due(session):
        session[notice_session.CHECKED] = time.time()
        seen = session.get(notice_session.GRADES_SEEN)
        for grade, report, version in notices.new_grades(db, owner=user, after=seen):
            lesson = lesson_service.current(db, lesson_id=report.lesson_id)
            title = lesson.lesson.title if lesson else report.lesson_id
            notice_session.add(
                session,
                {
                    "key": f"grade-{report.id}",
                    "kind": "grade",
                    "text": f"Your lab report for {title} (version {version.number}) was graded: "
                    f"{grade.total:g} / {grade.max_total:g}.",
                    "href": f"/notices/grades/{grade.id}",
                    "link": "See your grade and feedback",
                },
            )
            session[notice_session.GRADES_SEEN] = notices.cursor(grade)  # in release order: the last is the newest
    if notice_session.pending(session) == before:
        # Nothing new: no swap (204), so the live region is not re-read to a screen reader every few seconds.
        return Response(status_code=204)
    return render(request, "notices/_list.html", {})


@router.post("/notices/dismiss")
def notices_dismiss(request: Request, user: CurrentUser, key: Annotated[str, Form(max_length=40)]) -> Response:
    notice_session.dismiss(request.session, key)
    if is_htmx(request):
        return render(request, "notices/_list.html", {})
    return RedirectResponse(request.headers.get("referer") or "/", status_code=303)


@router.get("/notices/grades/{grade_id}")
def notice_grade(request: Request, grade_id: DbInt, user: CurrentUser, db: SessionDep) -> Response:
    found = notices.grade_of(db, owner=user, grade_id=grade_id)
    if found is None:
        raise NotFound(f"No grade {grade_id} on a report of yours.")
    _, report, version = found
    notice_session.dismiss(request.session, f"grade-{report.id}")
    return RedirectResponse(
        f"/lessons/{report.lesson_id}/report?v={version.number}#version-{version.number}", status_code=303
    )  # that version in full, with its grade, even after a resubmission
