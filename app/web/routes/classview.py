"""An instructor's view of one class (the class's instructors only; the class is the address's {slug}).

GET /classes/{slug}/roster[?lesson=ID&q=TEXT&stuck=1&sort=KEY&desc=1]   every learner's progress, sortable, filterable
GET /classes/{slug}/roster.csv[?same filters]                            the same rows as CSV
GET /classes/{slug}/learners/{user_id}                                   one learner: answers, attempts, runs, reports
GET /classes/{slug}/questions[?lesson=ID]                                per-question statistics, common wrong answers
GET /classes/{slug}/labs                                                 per-lab runs, failures, durations, headlines

Why the class is in the address rather than a value kept in the session: two tabs can look at two classes at once
without one silently switching the other (a release or a hold posted from a stale tab would land in the wrong
class), a link to a class's page is the same for everyone who may open it, and every request says which class it
is about, so its role check cannot be skipped.
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import Response

from app.services.classes import roster
from app.services.classes import stats as class_stats
from app.services.classes.scopes import Scope
from app.services.learning import lessons as lesson_service
from app.web.deps import ClassInstructor, DbInt, SessionDep, csrf_protect
from app.web.downloads import attachment
from app.web.templates import render

router = APIRouter(prefix="/classes/{slug}", dependencies=[Depends(csrf_protect)])


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


def class_lessons(db, scope: Scope):
    """The published lessons the class offers, in the catalogue's order."""
    return [les for les, _ in lesson_service.catalogue(db) if scope.offers(les.id)]


def _lesson_or_none(db, scope: Scope, lesson: str | None):
    lessons = class_lessons(db, scope)
    if lesson and lesson not in {les.id for les in lessons}:
        known = ", ".join(les.id for les in lessons)
        raise HTTPException(
            422, f"lesson: {scope.klass.title} offers no lesson {lesson[:64]!r}; use one of {known or 'none'}"
        )
    return lessons, (lesson or None)


def _table(db, scope: Scope, lesson, q, stuck, sort, desc):
    lessons, lesson_id = _lesson_or_none(db, scope, lesson)
    if sort not in roster.SORT_KEYS:
        raise HTTPException(422, f"sort: {sort[:40]!r} is not a column; use one of {', '.join(roster.SORT_KEYS)}")
    rows = roster.rows(db, scope=scope, lessons=lessons, lesson_id=lesson_id)
    rows = roster.filter_rows(rows, text=q[:254], stuck=stuck)
    return lessons, roster.sort_rows(rows, key=sort, descending=desc)


@router.get("/roster")
def roster_page(
    request: Request,
    scope: ClassInstructor,
    db: SessionDep,
    lesson: str | None = None,
    q: str = "",
    stuck: bool = False,
    sort: str = "name",
    desc: bool = False,
) -> Response:
    lessons, rows = _table(db, scope, lesson, q, stuck, sort, desc)
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
    scope: ClassInstructor,
    db: SessionDep,
    lesson: str | None = None,
    q: str = "",
    stuck: bool = False,
    sort: str = "name",
    desc: bool = False,
) -> Response:
    _, rows = _table(db, scope, lesson, q, stuck, sort, desc)
    slug = scope.klass.slug
    name = f"roster-{slug}-{lesson}.csv" if lesson else f"roster-{slug}.csv"
    return Response(
        roster.csv_text(rows),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": attachment(name), "X-Content-Type-Options": "nosniff"},
    )


@router.get("/learners/{user_id}")
def learner_page(request: Request, user_id: DbInt, scope: ClassInstructor, db: SessionDep) -> Response:
    trail = roster.learner(db, scope=scope, lessons=class_lessons(db, scope), user_id=user_id)
    if trail is None:
        raise HTTPException(404, f"{scope.klass.title} has no learner with id {user_id}.")
    return render(request, "instructor/learner.html", {"trail": trail})


@router.get("/questions")
def questions_page(request: Request, scope: ClassInstructor, db: SessionDep, lesson: str | None = None) -> Response:
    lessons, lesson_id = _lesson_or_none(db, scope, lesson)
    chosen = next((les for les in lessons if les.id == lesson_id), lessons[0] if lessons else None)
    stats = class_stats.question_stats(db, scope=scope, lesson=chosen) if chosen else []
    return render(request, "instructor/questions.html", {"lessons": lessons, "lesson": chosen, "stats": stats})


@router.get("/labs")
def labs_page(request: Request, scope: ClassInstructor, db: SessionDep) -> Response:
    offered = None if scope.klass.lesson_ids is None else roster.labs_of(class_lessons(db, scope))
    return render(
        request, "instructor/labs.html", {"stats": class_stats.lab_stats(db, scope=scope, labs_offered=offered)}
    )
