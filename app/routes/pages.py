"""Home and the instructor landing page (role-checked); the grader's queue is in grading.py."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from app.deps import InstructorUser, OptionalUser, SessionDep, csrf_protect
from app.services import learning
from app.services import lessons as lesson_service
from app.web import render

router = APIRouter(dependencies=[Depends(csrf_protect)])


@router.get("/")
def home(request: Request, user: OptionalUser, db: SessionDep):
    if user is None:
        return render(request, "home.html", {"progress": []})
    catalogue = lesson_service.catalogue(db)
    return render(request, "home.html", {"progress": learning.dashboard(db, user=user, lessons=catalogue)})


@router.get("/instructor")
def instructor_home(request: Request, user: InstructorUser, db: SessionDep):
    catalogue = lesson_service.catalogue(db)
    rows = [(lesson, version, lesson_service.versions(db, lesson_id=lesson.id)) for lesson, version in catalogue]
    return render(request, "instructor/index.html", {"rows": rows, "file_errors": request.app.state.content_errors})


# The grader's queue lives in app/routes/grading.py.
