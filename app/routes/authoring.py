"""Instructor authoring: edit a lesson's files in the browser with live validation and preview,
then publish them as a new version (no restart; older versions stay readable).

    GET  /instructor/lessons/{id}/edit[?file=…]            the editor (CodeMirror over a textarea)
    POST /instructor/lessons/{id}/preview                  htmx: validate and preview as the author types
    POST /instructor/lessons/{id}/publish                  validate and publish a new version
    GET  /instructor/lessons/{id}/versions/{n}/files.zip   a version's files, to unzip at the repository root
    GET  /instructor/lessons/{id}/versions/{n}/changes.diff  what it changed since version n-1 (`git apply`)
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import Response

from app.bodies import AUTHORING_LIMIT
from app.content import make_variant, validate_lesson_texts
from app.content.schema import Numeric
from app.deps import DbInt, InstructorUser, SessionDep, csrf_protect
from app.services import lesson_export, publishing
from app.services import lessons as lesson_service
from app.web import render

router = APIRouter(prefix="/instructor", dependencies=[Depends(csrf_protect)], max_body_size=AUTHORING_LIMIT)
NEW_FILE = re.compile(r"^(parts|questions)/[a-z0-9][a-z0-9-]{0,62}\.yaml$|^(lesson|atlas|lab|rubric)\.yaml$")


def _row(db, lesson_id: str):
    row = lesson_service.latest_row(db, lesson_id=lesson_id)
    if row is None:
        raise HTTPException(404, f"There is no lesson {lesson_id!r}.")
    return row


def _check_path(path: str, existing: dict) -> str | None:
    if path in existing:
        return None
    if not NEW_FILE.match(path):
        return (
            f"file: {path!r} is not a lesson file; use lesson.yaml, atlas.yaml, lab.yaml, rubric.yaml, "
            "parts/NAME.yaml or questions/NAME.yaml (NAME: lower-case letters, digits and dashes)"
        )
    return None


# What a file's preview shows besides a part: the lesson-wide files, as learners see them on the lesson's pages.
# parts/NAME.yaml shows its part; the rest (questions, rubric) show the first part.
SHOWN = {"lesson.yaml": "header", "atlas.yaml": "atlas", "lab.yaml": "lab"}


def _preview_ctx(lesson, path: str) -> dict:
    part_id = path[len("parts/") : -len(".yaml")] if path.startswith("parts/") else lesson.parts[0].id
    variants = {qid: make_variant(q, 0) if isinstance(q.body, Numeric) else None for qid, q in lesson.questions.items()}
    return {
        "shown": SHOWN.get(path, "part"),
        "lesson": lesson,
        "part": lesson.part(part_id) or lesson.parts[0],
        "version": -1,
        "current_version": 0,
        "progress": {},
        "responses": {},
        "attempts": {},
        "variants": variants,
    }


@router.get("/lessons/{lesson_id}/edit")
def edit_page(request: Request, lesson_id: str, user: InstructorUser, db: SessionDep, file: str = "lesson.yaml"):
    row = _row(db, lesson_id)
    if file not in row.files:
        raise HTTPException(404, f"Lesson {lesson_id!r} version {row.version} has no file {file!r}.")
    lesson = lesson_service.build(row)
    ctx = {
        "lesson_id": lesson_id,
        "row": row,
        "path": file,
        "text": row.files[file],
        "errors": [],
        "published": None,
        "history": lesson_service.versions(db, lesson_id=lesson_id),
        **_preview_ctx(lesson, file),
    }
    return render(request, "instructor/edit.html", ctx)


def _download(export: lesson_export.Export) -> Response:
    return Response(
        export.body,
        media_type=export.media_type,
        headers={"Content-Disposition": f'attachment; filename="{export.filename}"'},
    )


@router.get("/lessons/{lesson_id}/versions/{version}/files.zip")
def version_zip(lesson_id: str, version: DbInt, user: InstructorUser, db: SessionDep) -> Response:
    return _download(lesson_export.version_zip(db, lesson_id=lesson_id, version=version))


@router.get("/lessons/{lesson_id}/versions/{version}/changes.diff")
def version_diff(lesson_id: str, version: DbInt, user: InstructorUser, db: SessionDep) -> Response:
    return _download(lesson_export.version_diff(db, lesson_id=lesson_id, version=version))


def _lf(text: str) -> str:
    """A textarea's text with the line ends the files have: browsers send every line break as CR LF (the HTML
    form encoding), which published as-is turned a one-line edit into a diff of the whole file."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _validate(row, path: str, text: str):
    files = dict(row.files)
    files[path] = text
    lesson, errors = validate_lesson_texts(files, lesson_id=row.lesson_id)
    return files, lesson, errors


@router.post("/lessons/{lesson_id}/preview")
def preview(
    request: Request,
    lesson_id: str,
    user: InstructorUser,
    db: SessionDep,
    path: Annotated[str, Form(max_length=200)],
    text: Annotated[str, Form(max_length=200_000)] = "",
):
    row = _row(db, lesson_id)
    text = _lf(text)
    problem = _check_path(path, row.files)
    files, lesson, errors = _validate(row, path, text) if not problem else (None, None, [])
    ctx = {"lesson_id": lesson_id, "row": row, "path": path, "errors": errors, "path_error": problem}
    if lesson is not None:
        ctx.update(_preview_ctx(lesson, path))
    return render(request, "instructor/edit.html", ctx, block="preview")


@router.post("/lessons/{lesson_id}/publish")
def publish(
    request: Request,
    lesson_id: str,
    user: InstructorUser,
    db: SessionDep,
    path: Annotated[str, Form(max_length=200)],
    base_version: Annotated[DbInt, Form()],
    text: Annotated[str, Form(max_length=200_000)] = "",
    note: Annotated[str, Form(max_length=500)] = "",
):
    row = _row(db, lesson_id)
    text = _lf(text)
    ctx = {
        "lesson_id": lesson_id,
        "row": row,
        "path": path,
        "text": text,
        "errors": [],
        "published": None,
        "path_error": _check_path(path, row.files),
    }
    if row.version != base_version:
        ctx["path_error"] = (
            f"Version {row.version} was published after you started editing version {base_version}. "
            "Your text is kept below: copy it, reload the editor, and apply your change again."
        )
    if ctx["path_error"]:
        ctx.update(_preview_ctx(lesson_service.build(row), "lesson.yaml"))
        return render(request, "instructor/edit.html", ctx, status_code=409 if row.version != base_version else 422)
    files = dict(row.files)
    files[path] = text
    version, errors = publishing.publish(db, lesson_id=lesson_id, files=files, source="editor", author=user, note=note)
    if errors:
        ctx["errors"] = errors
        ctx.update(_preview_ctx(lesson_service.build(row), "lesson.yaml"))
        return render(request, "instructor/edit.html", ctx, status_code=422)
    new_row = lesson_service.latest_row(db, lesson_id=lesson_id)
    assert new_row is not None  # just published
    ctx.update(row=new_row, published=version, **_preview_ctx(lesson_service.build(new_row), path))
    ctx["history"] = lesson_service.versions(db, lesson_id=lesson_id)
    return render(request, "instructor/edit.html", ctx)
