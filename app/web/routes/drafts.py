"""A lesson's draft as staff see it before it is published, and discarding one.

    GET  /instructor/lessons/{id}/draft/preview[/{part}]   the draft's parts as learners will read them (inactive)
    POST /instructor/lessons/{id}/draft/discard            drop the draft (confirm=yes); learners keep the published
                                                            version, a new lesson's draft takes the lesson with it

Instructors only, like the editor (app/web/routes/authoring.py): no learner's page reads drafts
(app/services/learning/drafts.py).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse

from app.services.learning import drafts
from app.services.learning import lessons as lesson_service
from app.web.deps import AuthorUser, SessionDep, csrf_protect
from app.web.routes.authoring import preview_context
from app.web.templates import render

router = APIRouter(prefix="/instructor", dependencies=[Depends(csrf_protect)])


@router.get("/lessons/{lesson_id}/draft/preview")
@router.get("/lessons/{lesson_id}/draft/preview/{part_id}")
def draft_preview(request: Request, lesson_id: str, user: AuthorUser, db: SessionDep, part_id: str = ""):
    draft = drafts.get(db, lesson_id=lesson_id)
    if draft is None:
        raise HTTPException(404, f"Lesson {lesson_id!r} has no draft: it was published or discarded.")
    lesson = drafts.build(draft)
    if lesson is None:  # saved drafts validate; a schema change since can break one
        raise HTTPException(404, f"Lesson {lesson_id!r}'s draft no longer validates: open it in the editor to see why.")
    part = lesson.part(part_id) if part_id else lesson.parts[0]
    if part is None:
        raise HTTPException(404, f"Lesson {lesson_id!r}'s draft has no part {part_id!r}.")
    published = lesson_service.latest_row(db, lesson_id=lesson_id)
    ctx = preview_context(lesson, f"parts/{part.id}.yaml") | {
        "lesson_id": lesson_id,
        "draft": draft,
        "published_version": published.version if published else None,
        "part_id": part.id,
    }
    return render(request, "instructor/draft_preview.html", ctx)


@router.post("/lessons/{lesson_id}/draft/discard")
def discard(
    lesson_id: str,
    user: AuthorUser,
    db: SessionDep,
    confirm: Annotated[str, Form(max_length=3)] = "",
):
    if confirm != "yes":
        raise HTTPException(422, "confirm: tick “Discard this draft” to discard it (nothing was discarded)")
    if not drafts.discard(db, lesson_id=lesson_id):
        raise HTTPException(404, f"Lesson {lesson_id!r} has no draft: it was published or discarded already.")
    published = lesson_service.latest_row(db, lesson_id=lesson_id)
    where = f"/instructor/lessons/{lesson_id}/edit?discarded=1" if published else "/instructor?discarded=1"
    return RedirectResponse(where, status_code=303)
