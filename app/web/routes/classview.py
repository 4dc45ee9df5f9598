"""The instructor's view of the class (instructors only; mounted under /instructor by app/web/routes/authoring.py).

GET /instructor/roster[?lesson=ID&q=TEXT&stuck=1&sort=KEY&desc=1]   every learner's progress, sortable, filterable
GET /instructor/roster.csv[?same filters]                            the same rows as CSV
GET /instructor/learners/{user_id}                                   one learner: answers, attempts, runs, reports
GET /instructor/questions[?lesson=ID]                                per-question statistics and common wrong answers
GET /instructor/labs                                                 per-lab runs, failures, durations, headlines
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import Response

from app.services.classes import roster
from app.services.classes import stats as class_stats
from app.services.learning import lessons as lesson_service
from app.web.deps import DbInt, InstructorUser, SessionDep, csrf_protect
from app.web.downloads import attachment
from app.web.templates import render

router = APIRouter(prefix="/instructor", dependencies=[Depends(csrf_protect)])


# the roster's columns a page sorts by, in the table's order (roster.SORT_KEYS holds every key the address takes)
SORT_LABELS = (
    ("name", "Learner"),
    ("parts", "Parts done"),
    ("time", "Time"),
    ("right", "Questions right / tried"),
    ("wrong", "Wrong tries"),
    ("runs", "Lab runs"),
    ("report", "Report"),
    ("grade", "Grade"),
    ("seen", "Last seen"),
)


def _lesson_or_none(db, lesson: str | None):
    lessons = [les for les, _ in lesson_service.catalogue(db)]
    if lesson and lesson not in {les.id for les in lessons}:
        known = ", ".join(les.id for les in lessons)
        raise HTTPException(422, f"lesson: there is no lesson {lesson[:64]!r}; use one of {known}")
    return lessons, (lesson or None)


def _table(db, lesson, q, stuck, sort, desc):
    lessons, lesson_id = _lesson_or_none(db, lesson)
    if sort not in roster.SORT_KEYS:
        raise HTTPException(422, f"sort: {sort[:40]!r} is not a column; use one of {', '.join(roster.SORT_KEYS)}")
    rows = roster.rows(db, lessons=lessons, lesson_id=lesson_id)
    rows = roster.filter_rows(rows, text=q[:254], stuck=stuck)
    return lessons, roster.sort_rows(rows, key=sort, descending=desc)


@router.get("/roster")
def roster_page(
    request: Request,
    user: InstructorUser,
    db: SessionDep,
    lesson: str | None = None,
    q: str = "",
    stuck: bool = False,
    sort: str = "name",
    desc: bool = False,
) -> Response:
    lessons, rows = _table(db, lesson, q, stuck, sort, desc)
    filters = {k: v for k, v in (("lesson", lesson), ("q", q), ("stuck", "1" if stuck else "")) if v}

    def sort_link(key: str) -> str:
        flip = key == sort and not desc
        return "?" + urlencode({**filters, "sort": key, **({"desc": "1"} if flip else {})})

    ctx = {
        "rows": rows,
        "lessons": lessons,
        "filters": filters,
        "sort": sort,
        "desc": desc,
        "sort_link": sort_link,
        "query": urlencode(filters),
        "stuck_count": sum(1 for r in rows if r.stuck),
        "sort_labels": SORT_LABELS,
    }
    return render(request, "instructor/roster.html", ctx, block="roster")


@router.get("/roster.csv")
def roster_csv(
    user: InstructorUser,
    db: SessionDep,
    lesson: str | None = None,
    q: str = "",
    stuck: bool = False,
    sort: str = "name",
    desc: bool = False,
) -> Response:
    _, rows = _table(db, lesson, q, stuck, sort, desc)
    name = f"roster-{lesson}.csv" if lesson else "roster.csv"
    return Response(
        roster.csv_text(rows),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": attachment(name), "X-Content-Type-Options": "nosniff"},
    )


@router.get("/learners/{user_id}")
def learner_page(request: Request, user_id: DbInt, user: InstructorUser, db: SessionDep) -> Response:
    trail = roster.learner(db, user_id=user_id)
    if trail is None:
        raise HTTPException(404, f"There is no learner with id {user_id}.")
    return render(request, "instructor/learner.html", {"trail": trail})


@router.get("/questions")
def questions_page(request: Request, user: InstructorUser, db: SessionDep, lesson: str | None = None) -> Response:
    lessons, lesson_id = _lesson_or_none(db, lesson)
    chosen = next((les for les in lessons if les.id == lesson_id), lessons[0] if lessons else None)
    stats = class_stats.question_stats(db, lesson=chosen) if chosen else []
    return render(request, "instructor/questions.html", {"lessons": lessons, "lesson": chosen, "stats": stats})


@router.get("/labs")
def labs_page(request: Request, user: InstructorUser, db: SessionDep) -> Response:
    return render(request, "instructor/labs.html", {"stats": class_stats.lab_stats(db)})
