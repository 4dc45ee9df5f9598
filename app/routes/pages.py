"""Home, and the instructor and grader landing pages (role-checked)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from app.deps import GraderUser, InstructorUser, OptionalUser, SessionDep, csrf_protect
from app.web import render

router = APIRouter(dependencies=[Depends(csrf_protect)])


@router.get("/")
def home(request: Request, user: OptionalUser, db: SessionDep):
    return render(request, "home.html", {})


@router.get("/instructor")
def instructor_home(request: Request, user: InstructorUser):
    return render(request, "instructor/index.html", {})


@router.get("/grader")
def grader_home(request: Request, user: GraderUser):
    return render(request, "grader/index.html", {})
