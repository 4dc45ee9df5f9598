"""Lesson pages: the six timed parts, reference sections, pause-and-reason answers, practice.

Every page is rendered from one published lesson version; answers carry the version they were
given under, and an answer posted against an outdated version is refused with the text kept.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.content.schema import Lesson
from app.core.models import Person
from app.services.jobs import own_runs
from app.services.learning import answering
from app.services.learning import lessons as lesson_service
from app.services.learning import progress as learning
from app.web.csrf import csrf_token_for
from app.web.deps import CurrentUser, DbInt, SessionDep, ViewerDep, csrf_protect
from app.web.templates import is_htmx, render, templates
from app.web.views.lesson_pages import SECTIONS, labs_shown, render_part, section_missing

router = APIRouter(dependencies=[Depends(csrf_protect)])


def _lesson(db: SessionDep, lesson_id: str, version: int | None = None) -> tuple[lesson_service.Current, int]:
    """(the version shown, the current version number); 404 with the reason when missing."""
    cur = lesson_service.current(db, lesson_id=lesson_id)
    if cur is None:
        raise HTTPException(404, f"There is no lesson {lesson_id!r}.")
    if version is None or version == cur.version:
        return cur, cur.version
    old = lesson_service.at_version(db, lesson_id=lesson_id, version=version)
    if old is None:
        raise HTTPException(404, f"Lesson {lesson_id!r} has no version {version} (the current one is {cur.version}).")
    return old, cur.version


def _part_context(
    db: SessionDep,
    user: Person,
    lesson: Lesson,
    version: int,
    current_version: int,
    part_id: str,
    state: learning.LessonState | None = None,
) -> dict:
    part = lesson.part(part_id)
    shown = labs_shown(part)
    state = state or learning.lesson_state(db, user=user, lesson_id=lesson.id, runs=bool(shown))
    return {
        "lesson": lesson,
        "version": version,
        "current_version": current_version,
        "part_id": part_id,
        "part": part,
        "section": SECTIONS.get(part_id),
        "progress": state.progress,
        "responses": state.responses,
        "attempts": state.attempts,
        "variants": answering.part_variants(lesson, user=user, part=part),
        "env_jobs": own_runs.latest_runs(db, owner=user, lab="env-check", limit=1).shown if part_id == "lab" else [],
        # the learner's own lab runs, only for parts whose sections show one: their ids came with the state,
        # so the jobs are read only when the learner has run one of those labs
        "runs": own_runs.notes(db, user=user, labs=shown, newest=state.runs),
        "feedback": {},
    }


@router.get("/lessons/{lesson_id}")
def lesson_start(lesson_id: str, user: CurrentUser, db: SessionDep, v: DbInt | None = None):
    (lesson, version, _), current_version = _lesson(db, lesson_id, v)
    part = learning.resume_part(db, user=user, lesson=lesson)
    suffix = f"?v={version}" if version != current_version else ""
    return RedirectResponse(f"/lessons/{lesson_id}/{part}{suffix}", status_code=303)


@router.get("/lessons/{lesson_id}/{part_id}")
async def lesson_part(
    request: Request, lesson_id: str, part_id: str, viewer: ViewerDep, db: SessionDep, v: DbInt | None = None
):
    """The most-read page: its reads run on the event loop, its one possible write in a worker thread
    (app/web/deps.py Viewer says why)."""
    user = await viewer.required()
    (lesson, version, key), current_version = _lesson(db, lesson_id, v)
    part = lesson.part(part_id)
    if part is None and part_id not in SECTIONS:
        raise HTTPException(404, f"Lesson {lesson_id!r} has no part {part_id!r}.")
    if part is None and (missing := section_missing(lesson, part_id)):
        raise HTTPException(404, missing)  # a lesson without a lab (atlas, references) links to none
    state = learning.lesson_state(db, user=user, lesson_id=lesson_id, runs=bool(labs_shown(part)))
    update = None
    if part is not None and version == current_version and learning.visit_due(state.progress, part_id, version):
        # "Updated since you last read it": once, on the first part the learner opens under a newer version than
        # they last read (that visit records it); the versions' notes are read only then, so almost never
        seen = learning.version_read(state.progress)
        if seen is not None and seen < version:
            update = lesson_service.update_since(db, lesson_id=lesson_id, seen=seen, version=version)
        # where "resume" goes, and the version read; what the page shows of progress is the done ticks, which a
        # visit does not change
        await run_in_threadpool(learning.visit, db, user=user, lesson_id=lesson_id, part_id=part_id, version=version)
    ctx = _part_context(db, user, lesson, version, current_version, part_id, state)
    ctx["update"] = update
    ctx["head_oob"] = update is not None and is_htmx(request)  # lesson.html: the header is swapped in as well
    if ctx["part"] is not None:  # the shared body is rendered once per version; only the learner's bits here
        ctx["part_html"] = render_part(
            templates.env, key, {**ctx, "user": user, "csrf_token": csrf_token_for(request.session)}
        )
    return render(request, "lessons/lesson.html", ctx, block="part")


@router.post("/lessons/{lesson_id}/progress/{part_id}/done")
def toggle_done(
    request: Request,
    lesson_id: str,
    part_id: str,
    user: CurrentUser,
    db: SessionDep,
    done: Annotated[str, Form()] = "1",
):
    (lesson, version, _), current_version = _lesson(db, lesson_id)
    if lesson.part(part_id) is None:
        raise HTTPException(404, f"Lesson {lesson_id!r} has no part {part_id!r}.")
    learning.set_done(db, user=user, lesson_id=lesson_id, part_id=part_id, done=done == "1")
    ctx = _part_context(db, user, lesson, version, current_version, part_id)
    if is_htmx(request):  # the pacing list, and the toggle out of band so its label follows
        return render(request, "lessons/_done_toggled.html", ctx)
    return render(request, "lessons/lesson.html", ctx)


@router.post("/lessons/{lesson_id}/progress/{part_id}/time", status_code=204)
async def reading_time(
    lesson_id: str,
    part_id: str,
    viewer: ViewerDep,
    db: SessionDep,
    seconds: Annotated[int, Form(ge=0, le=3600)] = 0,
) -> None:
    """The page's report of reading time (static/reading.js, navigator.sendBeacon): the login is read on the event
    loop (app/web/deps.py Viewer), the one UPDATE runs in a worker thread. Its CSRF token comes in the form body,
    since a beacon cannot set a header (csrf_protect reads either)."""
    user = await viewer.required()
    (lesson, _, _), _ = _lesson(db, lesson_id)
    if lesson.part(part_id) is None:
        raise HTTPException(404, f"Lesson {lesson_id!r} has no part {part_id!r}.")
    await run_in_threadpool(learning.add_time, db, user=user, lesson_id=lesson_id, part_id=part_id, seconds=seconds)


def _answered(request: Request, fragment: str, ctx: dict, *, error: str | None, item: str) -> Response:
    """An answer's re-rendered piece: to htmx, the piece alone, swapped in place; to a plain form post (no
    JavaScript), the same piece in a whole page, with a link back to the part that holds it (`item` is the
    piece's element id: pause-<id> or q-<id>)."""
    lesson = ctx["lesson"]
    kind, _, item_id = item.partition("-")
    holder = next(
        (
            part
            for part in lesson.parts
            for b in part.blocks
            if (kind == "pause" and b.kind == "section" and b.pause and b.pause.id == item_id)
            or (kind == "q" and b.kind == "questions" and item_id in b.ids)
        ),
        lesson.parts[0],
    )
    page = {**ctx, "fragment": fragment, "back": holder, "back_url": f"/lessons/{lesson.id}/{holder.id}#{item}"}
    return render(request, "lessons/answered.html", page, block="answer", status_code=400 if error else 200)


@router.post("/lessons/{lesson_id}/pauses/{pause_id}")
def answer_pause(
    request: Request,
    lesson_id: str,
    pause_id: str,
    user: CurrentUser,
    db: SessionDep,
    answer: Annotated[str, Form(max_length=20000)] = "",
    version: Annotated[DbInt, Form()] = 0,
):
    (lesson, _, _), current_version = _lesson(db, lesson_id)
    answered = answering.answer_pause(
        db, user=user, lesson=lesson, current_version=current_version, pause_id=pause_id, version=version, answer=answer
    )
    error = answered.error
    ctx = {
        "lesson": lesson,
        "version": current_version,
        "pause": answering.pause(lesson, pause_id),
        "error": error,
        "draft": answer,
        "responses": learning.latest_responses(db, user=user, lesson_id=lesson_id),
    }
    return _answered(request, "lessons/_pause.html", ctx, error=error, item=f"pause-{pause_id}")


@router.post("/lessons/{lesson_id}/questions/{question_id}")
async def answer_question(
    request: Request,
    lesson_id: str,
    question_id: str,
    viewer: ViewerDep,
    db: SessionDep,
    answer: Annotated[str, Form(max_length=20000)] = "",
    version: Annotated[DbInt, Form()] = 0,
    seed: Annotated[DbInt, Form()] = -1,
):
    """A practice answer, about one a minute per learner in a class: the login is read on the event loop
    (app/web/deps.py Viewer), the try and the reads after it run in one worker thread, the fragment renders on
    the loop."""
    user = await viewer.required()
    ctx = await run_in_threadpool(_question_answered, db, user, lesson_id, question_id, answer, version, seed)
    return _answered(request, "lessons/_question.html", ctx, error=ctx["error"], item=f"q-{question_id}")


def _question_answered(
    db: Session, user: Person, lesson_id: str, question_id: str, answer: str, version: int, seed: int
) -> dict:
    (lesson, _, _), current_version = _lesson(db, lesson_id)
    answered = answering.answer_question(
        db,
        user=user,
        lesson=lesson,
        current_version=current_version,
        question_id=question_id,
        version=version,
        answer=answer,
        seed=seed,
    )
    variant = answered.variant
    return {
        "lesson": lesson,
        "version": current_version,
        "qid": question_id,
        "q": answering.question(lesson, question_id).body,
        "variant": variant,
        "seed": variant.seed if variant else 0,  # as the part's slot has it (_question_slot.html): one piece
        "feedback": answered.feedback,
        "error": answered.error,
        "draft": answer,
        "attempts": learning.latest_attempts(db, user=user, lesson_id=lesson_id),
        "responses": learning.latest_responses(db, user=user, lesson_id=lesson_id),
    }


@router.post("/lessons/{lesson_id}/questions/{question_id}/steps/{step_id}")
def answer_step(
    request: Request,
    lesson_id: str,
    question_id: str,
    step_id: str,
    user: CurrentUser,
    db: SessionDep,
    answer: Annotated[str, Form(max_length=20000)] = "",
    version: Annotated[DbInt, Form()] = 0,
):
    """One step of a multi-step problem: graded like a practice question; the re-rendered problem opens
    that step's worked solution once it has been tried."""
    (lesson, _, _), current_version = _lesson(db, lesson_id)
    answered = answering.answer_step(
        db,
        user=user,
        lesson=lesson,
        current_version=current_version,
        question_id=question_id,
        step_id=step_id,
        version=version,
        answer=answer,
    )
    feedback, error = answered.feedback, answered.error
    body = answering.multistep(lesson, question_id, step_id)
    attempts = learning.latest_attempts(db, user=user, lesson_id=lesson_id)
    # The problem comes back whole: the other steps' boxes keep the learner's last answers (they were blank after
    # each step's check, so a chain of steps lost its earlier numbers). A page load shows them blank, as questions.
    drafts = {s.id: a.answer for s in body.steps if (a := attempts.get(f"{question_id}:{s.id}"))}
    ctx = {
        "lesson": lesson,
        "version": current_version,
        "current_version": current_version,
        "qid": question_id,
        "q": body,
        "step_feedback": {step_id: feedback} if feedback else {},
        "step_error": {step_id: error} if error else {},
        "drafts": drafts | {step_id: answer},
        "attempts": attempts,
    }
    return _answered(request, "lessons/_multistep.html", ctx, error=error, item=f"q-{question_id}")


@router.post("/lessons/{lesson_id}/questions/{question_id}/self-check")
def self_check(
    request: Request,
    lesson_id: str,
    question_id: str,
    user: CurrentUser,
    db: SessionDep,
    point: Annotated[list[int] | None, Form()] = None,
    version: Annotated[DbInt, Form()] = 0,
):
    """Save the self-check points a learner ticks after the reference answer of a free-response question."""
    (lesson, _, _), current_version = _lesson(db, lesson_id)
    error = answering.self_check(
        db,
        user=user,
        lesson=lesson,
        current_version=current_version,
        question_id=question_id,
        version=version,
        ticked=point or [],
    ).error
    ctx = {
        "lesson": lesson,
        "version": current_version,
        "qid": question_id,
        "q": answering.question(lesson, question_id).body,
        "selfcheck_error": error,
        "responses": learning.latest_responses(db, user=user, lesson_id=lesson_id),
    }
    return _answered(request, "lessons/_selfcheck.html", ctx, error=error, item=f"q-{question_id}")
