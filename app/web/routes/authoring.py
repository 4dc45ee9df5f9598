"""Instructor authoring: edit a lesson's files in the browser with live validation and preview, keep them as a
draft that only staff see, then publish them as a new version (no restart; older versions stay readable).

    POST /instructor/lessons                               a new lesson from lessons/_template (id, title, number),
                                                           as a draft
    GET  /instructor/lessons/{id}/edit[?file=…]            the editor (CodeMirror over a textarea) of the lesson's
                                                           draft, or of its newest version when it has none
    POST /instructor/lessons/{id}/preview                  htmx: validate and preview as the author types
    POST /instructor/lessons/{id}/draft                    validate and save the edit as the lesson's draft
    POST /instructor/lessons/{id}/publish                  validate and publish the edit (and the draft) as a new
                                                           version
    GET  /instructor/lessons/{id}/versions/{n}/files.zip   a version's files, to unzip at the repository root
    GET  /instructor/lessons/{id}/versions/{n}/changes.diff  what it changed since version n-1 (`git apply`)

A draft is not a version (app/services/learning/drafts.py): no learner's page can reach it. Staff read it as
learners will at /instructor/lessons/{id}/draft/preview (app/web/routes/drafts.py).

The class views (roster, question and lab statistics) live in app/web/routes/classview.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from app.content import listing, make_variant, mistake_rule, validate_lesson_texts
from app.content.schema import Numeric
from app.core.digits import whole_number
from app.core.models import LessonDraft, LessonVersion
from app.services.learning import drafts, lesson_export, publishing
from app.services.learning import lessons as lesson_service
from app.web.deps import AuthorUser, DbInt, SessionDep, csrf_protect
from app.web.middleware.bodies import AUTHORING_LIMIT
from app.web.templates import render

router = APIRouter(prefix="/instructor", dependencies=[Depends(csrf_protect)], max_body_size=AUTHORING_LIMIT)


@dataclass(frozen=True)
class Working:
    """What the editor edits: the lesson's draft if it has one, else its newest published version. `version` is the
    newest published version (0 before the first): an edit is checked against it, so a version published meanwhile
    is never overwritten unseen."""

    lesson_id: str
    files: dict[str, str]
    version: int
    source: str  # "draft", or how the version was published: files | editor
    created_at: datetime
    row: LessonVersion | None
    draft: LessonDraft | None

    def lesson(self):
        return drafts.build(self.draft) if self.draft else lesson_service.build(self.row) if self.row else None

    @property
    def published_files(self) -> dict[str, str]:
        return dict(self.row.files) if self.row else {}


def _row(db, lesson_id: str) -> Working:
    """404 for a lesson with neither a version nor a draft."""
    row = lesson_service.latest_row(db, lesson_id=lesson_id)
    draft = drafts.get(db, lesson_id=lesson_id)
    if draft is not None:
        return Working(lesson_id, dict(draft.files), row.version if row else 0, "draft", draft.updated_at, row, draft)
    if row is None:
        raise HTTPException(404, f"There is no lesson {lesson_id!r}.")
    return Working(lesson_id, dict(row.files), row.version, row.source, row.created_at, row, None)


def _check_path(path: str, existing: dict) -> str | None:
    if path in existing:
        return None
    if not listing.NEW_FILE.match(path):
        return (
            f"file: {path!r} is not a lesson file; use lesson.yaml, atlas.yaml, lab.yaml, rubric.yaml, "
            "parts/NAME.yaml or questions/NAME.yaml (NAME: lower-case letters, digits and dashes)"
        )
    return None


# What a file's preview shows besides a part: the lesson-wide files, as learners see them on the lesson's pages.
# parts/NAME.yaml shows its part, questions/NAME.yaml the part that lists it; the rest (rubric) show the first part.
SHOWN = {"lesson.yaml": "header", "atlas.yaml": "atlas", "lab.yaml": "lab"}


def _listing_part(lesson, qid: str) -> str | None:
    """The part whose questions block lists `qid`: where a question's preview shows it, as learners meet it."""
    return next((p.id for p in lesson.parts for b in p.blocks if b.kind == "questions" and qid in b.ids), None)


def preview_context(lesson, path: str) -> dict:
    if path.startswith("parts/"):
        part_id = path[len("parts/") : -len(".yaml")]
    elif path.startswith("questions/"):  # the part that lists the question (the first part showed it nowhere)
        part_id = _listing_part(lesson, path[len("questions/") : -len(".yaml")]) or lesson.parts[0].id
    else:
        part_id = lesson.parts[0].id
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


@router.post("/lessons")
def new_lesson(
    request: Request,
    user: AuthorUser,
    db: SessionDep,
    lesson_id: Annotated[str, Form(max_length=200)] = "",
    title: Annotated[str, Form(max_length=500)] = "",
    number: Annotated[str, Form(max_length=20)] = "",
):
    """Create a lesson from the template as a draft and open it in the editor; a refusal names each field and keeps
    the form. No learner sees the lesson until it is published."""
    lesson_id, n = lesson_id.strip(), whole_number(number.strip())
    problems = drafts.new_lesson_problems(db, lesson_id=lesson_id, title=title, number=n)
    if not problems:
        assert n is not None
        settings = request.app.state.settings
        errors = drafts.create_lesson(
            db, lessons_dir=settings.lessons_dir, lesson_id=lesson_id, title=title, number=n, author=user
        )
        if errors:  # the template itself no longer validates: say where
            problems["template"] = "; ".join(f"{e.file}: expected {e.expected}, found {e.found}" for e in errors[:3])
    if problems:
        ctx = instructor_index(db, request.app.state.content_errors) | {
            "new_errors": problems,
            "new": {"lesson_id": lesson_id, "title": title, "number": number},
        }
        return render(request, "instructor/index.html", ctx, status_code=422)
    return RedirectResponse(f"/instructor/lessons/{lesson_id}/edit?created=1#draft", status_code=303)


def instructor_index(db, file_errors) -> dict:
    """The instructor page's lessons: each published one with its versions and its draft, and the new lessons
    that are drafts only."""
    catalogue = lesson_service.catalogue(db)
    pending = {d.lesson_id: d for d in drafts.all_drafts(db)}
    return {
        "rows": [(les, v, lesson_service.versions(db, lesson_id=les.id)) for les, v in catalogue],
        "drafts": pending,
        "new_drafts": [(d, drafts.build(d)) for d in pending.values() if d.base_version is None],
        "taken": sorted(drafts.taken_numbers(db)),
        "file_errors": file_errors,
    }


@router.get("/lessons/{lesson_id}/edit")
def edit_page(
    request: Request,
    lesson_id: str,
    user: AuthorUser,
    db: SessionDep,
    file: str = "lesson.yaml",
    published: DbInt | None = None,
    mistake: float | None = None,
):
    row = _row(db, lesson_id)
    if file not in row.files:
        raise HTTPException(404, f"Lesson {lesson_id!r} has no file {file!r}.")
    lesson = row.lesson()
    text = row.files[file]
    errors: list = []
    drafted = None
    if mistake is not None and file.startswith("questions/"):
        question = lesson.questions.get(file[len("questions/") : -len(".yaml")]) if lesson else None
        try:
            text, drafted = mistake_rule.drafted(text, mistake, question)
        except mistake_rule.DraftError as exc:
            raise HTTPException(422, str(exc)) from None
        # the draft's one gap (its feedback, which only the author can write) is shown at once, at its line
        errors = _validate(row, file, text)[2]
    ctx = {
        "lesson_id": lesson_id,
        "row": row,
        "path": file,
        "text": text,
        "errors": errors,
        "drafted_rule": drafted,
        "created": request.query_params.get("created") == "1",
        "saved": request.query_params.get("saved") == "1",
        "discarded": request.query_params.get("discarded") == "1",
        # after a publish (which redirects here, so that reloading the page does not post it again)
        "published": published if published is not None and published == row.version else None,
        "listed_in": request.query_params.get("listed_in", ""),
        "restored": request.query_params.get("restored", "")[:12],
        "history": lesson_service.versions(db, lesson_id=lesson_id),
        **preview_context(lesson, file),
    }
    return render(request, "instructor/edit.html", ctx)


def _download(export: lesson_export.Export) -> Response:
    return Response(
        export.body,
        media_type=export.media_type,
        headers={"Content-Disposition": f'attachment; filename="{export.filename}"'},
    )


@router.get("/lessons/{lesson_id}/versions/{version}/files.zip")
def version_zip(lesson_id: str, version: DbInt, user: AuthorUser, db: SessionDep) -> Response:
    return _download(lesson_export.version_zip(db, lesson_id=lesson_id, version=version))


@router.get("/lessons/{lesson_id}/versions/{version}/changes.diff")
def version_diff(lesson_id: str, version: DbInt, user: AuthorUser, db: SessionDep) -> Response:
    return _download(lesson_export.version_diff(db, lesson_id=lesson_id, version=version))


def _lf(text: str) -> str:
    """A textarea's text with the line ends the files have: browsers send every line break as CR LF (the HTML
    form encoding), which published as-is turned a one-line edit into a diff of the whole file."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _validate(row, path: str, text: str, list_in: str = "", drop: bool = False, make_room: bool = False):
    edit = listing.edited_files(row, path, text, list_in, drop, make_room)
    lesson, errors = validate_lesson_texts(edit.files, lesson_id=row.lesson_id)
    return edit, lesson, errors


def _listing_ctx(row, path: str, listed_in: str | None) -> dict:
    """What the page says and offers about a new question file: the part it is listed in, the parts to pick from,
    and the template's example questions to start from."""
    if listing.new_question(path, row.files) is None:
        return {"new_question": False}
    return {
        "new_question": True,
        "listed_in": listed_in or "",
        "part_choices": listing.part_choices(row.lesson()),
        "template_questions": listing.template_questions(),
    }


def _options_ctx(row, path: str, edit: listing.Edit, drop: bool, make_room: bool) -> dict:
    """The publish options (templates/instructor/_publish_options.html) for this edit, as the author ticked them."""
    return _listing_ctx(row, path, edit.listed_in) | {
        "unlisted": edit.unlisted,
        "dropping": drop,
        "crowded": [(p, n + 1) for p, n in edit.crowded],  # (part, the number it would move to)
        "mentions": listing.part_mentions(row.files, path, edit.crowded[0][1]) if edit.crowded else [],
        "making_room": make_room,
    }


@router.post("/lessons/{lesson_id}/preview")
def preview(
    request: Request,
    lesson_id: str,
    user: AuthorUser,
    db: SessionDep,
    path: Annotated[str, Form(max_length=200)],
    text: Annotated[str, Form(max_length=200_000)] = "",
    list_in: Annotated[str, Form(max_length=200)] = "",
    drop_unlisted: Annotated[str, Form(max_length=1)] = "",
    make_room: Annotated[str, Form(max_length=1)] = "",
):
    row = _row(db, lesson_id)
    text = _lf(text)
    problem = _check_path(path, row.files)
    ctx = {"lesson_id": lesson_id, "row": row, "path": path, "path_error": problem, "errors": [], "oob_options": True}
    if not problem:
        drop, room = drop_unlisted == "1", make_room == "1"
        edit, lesson, ctx["errors"] = _validate(row, path, text, list_in, drop, room)
        ctx.update(_options_ctx(row, path, edit, drop, room))
        if lesson is not None:
            ctx.update(preview_context(lesson, edit.listed_in or path))
    else:
        ctx.update(_listing_ctx(row, path, None))
    return render(request, "instructor/edit.html", ctx, block="preview")


@router.post("/lessons/{lesson_id}/publish")
def publish(
    request: Request,
    lesson_id: str,
    user: AuthorUser,
    db: SessionDep,
    path: Annotated[str, Form(max_length=200)],
    base_version: Annotated[DbInt, Form()],
    text: Annotated[str, Form(max_length=200_000)] = "",
    note: Annotated[str, Form(max_length=500)] = "",
    list_in: Annotated[str, Form(max_length=200)] = "",
    drop_unlisted: Annotated[str, Form(max_length=1)] = "",
    make_room: Annotated[str, Form(max_length=1)] = "",
):
    row = _row(db, lesson_id)
    text = _lf(text)
    ctx = {
        "lesson_id": lesson_id,
        "row": row,
        "path": path,
        "text": text,
        "note": note,  # a refused publish gives back the note too, not only the text
        "errors": [],
        "published": None,
        "path_error": _check_path(path, row.files),
        "history": lesson_service.versions(db, lesson_id=lesson_id),
        **_listing_ctx(row, path, None),
    }
    if row.version != base_version:
        ctx["path_error"] = (
            f"Version {row.version} was published after you started editing version {base_version}. "
            "Your text is kept below: copy it, reload the editor, and apply your change again."
        )
    if ctx["path_error"]:
        ctx.update(preview_context(row.lesson(), "lesson.yaml"))
        return render(request, "instructor/edit.html", ctx, status_code=409 if row.version != base_version else 422)
    drop, room = drop_unlisted == "1", make_room == "1"
    edit = listing.edited_files(row, path, text, list_in, drop, room)
    files, listed_in = edit.files, edit.listed_in
    if files == row.published_files and not note.strip():  # a publish to "save": an empty version learners are told of
        ctx["path_error"] = (
            f"Nothing changed since version {row.version}, so no version was published "
            "(to publish one anyway, with a message for learners, write a note)."
        )
        ctx.update(preview_context(row.lesson(), path))
        return render(request, "instructor/edit.html", ctx, status_code=422)
    # the draft's files with this edit become the next version, and the draft is gone (published)
    version, errors = publishing.publish(db, lesson_id=lesson_id, files=files, source="editor", author=user, note=note)
    if errors:
        ctx["errors"] = errors
        ctx.update(_options_ctx(row, path, edit, drop, room))
        ctx.update(preview_context(row.lesson(), "lesson.yaml"))
        return render(request, "instructor/edit.html", ctx, status_code=422)
    drafts.discard(db, lesson_id=lesson_id)
    # Post/redirect/get: reloading the page after a publish shows it again instead of posting it a second time
    # (which the version check then refused as a conflict).
    query = {"file": path, "published": str(version)} | ({"listed_in": listed_in} if listed_in else {})
    return RedirectResponse(f"/instructor/lessons/{lesson_id}/edit?{urlencode(query)}#published", status_code=303)


@router.post("/lessons/{lesson_id}/draft")
def save_draft(
    request: Request,
    lesson_id: str,
    user: AuthorUser,
    db: SessionDep,
    path: Annotated[str, Form(max_length=200)],
    base_version: Annotated[DbInt, Form()],
    text: Annotated[str, Form(max_length=200_000)] = "",
    note: Annotated[str, Form(max_length=500)] = "",
    list_in: Annotated[str, Form(max_length=200)] = "",
    drop_unlisted: Annotated[str, Form(max_length=1)] = "",
    make_room: Annotated[str, Form(max_length=1)] = "",
):
    """Keep the edit (with the draft's other files) as the lesson's draft: validated like a version, seen by staff
    only, published when the author presses Publish. A refusal keeps the text and says why."""
    row = _row(db, lesson_id)
    text = _lf(text)
    ctx = {
        "lesson_id": lesson_id,
        "row": row,
        "path": path,
        "text": text,
        "note": note,
        "errors": [],
        "published": None,
        "path_error": _check_path(path, row.files),
        "history": lesson_service.versions(db, lesson_id=lesson_id),
        **_listing_ctx(row, path, None),
    }
    if row.version != base_version:
        ctx["path_error"] = (
            f"Version {row.version} was published after you started editing version {base_version}. "
            "Your text is kept below: copy it, reload the editor, and apply your change again."
        )
    drop, room = drop_unlisted == "1", make_room == "1"
    edit = listing.edited_files(row, path, text, list_in, drop, room)
    if not ctx["path_error"]:
        base = row.draft.base_version if row.draft else (row.version or None)
        ctx["errors"] = drafts.save(db, lesson_id=lesson_id, files=edit.files, base_version=base, author=user)
    if ctx["path_error"] or ctx["errors"]:
        ctx.update(_options_ctx(row, path, edit, drop, room))
        ctx.update(preview_context(row.lesson(), "lesson.yaml"))
        status = 409 if row.version != base_version else 422
        return render(request, "instructor/edit.html", ctx, status_code=status)
    query = {"file": path, "saved": "1"} | ({"listed_in": edit.listed_in} if edit.listed_in else {})
    return RedirectResponse(f"/instructor/lessons/{lesson_id}/edit?{urlencode(query)}#draft", status_code=303)


@router.post("/lessons/{lesson_id}/versions/{version}/restore")
def restore(
    request: Request,
    lesson_id: str,
    version: DbInt,
    user: AuthorUser,
    db: SessionDep,
    base_version: Annotated[DbInt, Form()],
    confirm: Annotated[str, Form(max_length=3)] = "",
):
    """Go back to an earlier version: publish its files again as a new version (the ones in between stay).

    Publishing reaches every learner at once, so the first press asks (a page of its own, no script needed);
    only the confirming form, which carries confirm=yes, publishes."""
    row = _row(db, lesson_id)
    old = lesson_service.version_row(db, lesson_id=lesson_id, version=version)
    if old is None:
        raise HTTPException(404, f"Lesson {lesson_id!r} has no version {version}.")
    if confirm != "yes" and row.version == base_version and old.files != row.published_files:
        ctx = {
            "lesson_id": lesson_id,
            "version": version,
            "base_version": base_version,
            "new_version": row.version + 1,
            "readers": publishing.readers(db, lesson_id=lesson_id),
        }
        return render(request, "instructor/restore_confirm.html", ctx)
    ctx = {
        "lesson_id": lesson_id,
        "row": row,
        "path": "lesson.yaml",
        "text": row.files.get("lesson.yaml", ""),
        "errors": [],
        "published": None,
        "path_error": None,
        "history": lesson_service.versions(db, lesson_id=lesson_id),
        **preview_context(row.lesson(), "lesson.yaml"),
    }
    if old.files == row.published_files and row.version == base_version:
        ctx["path_error"] = (
            f"Version {version}'s files are the current ones already (version {row.version}): nothing was restored."
        )
        return render(request, "instructor/edit.html", ctx, status_code=422)
    if row.version != base_version:
        ctx["path_error"] = (
            f"Version {row.version} was published after this page showed version {base_version} as the newest: "
            f"nothing was restored. Look at the list below and restore again if you still want version {version}."
        )
        return render(request, "instructor/edit.html", ctx, status_code=409)
    new, errors = publishing.publish(
        db, lesson_id=lesson_id, files=dict(old.files), source="editor", author=user, note=f"Restored version {version}"
    )
    if errors:  # e.g. it names a lab the catalog no longer has
        ctx["errors"] = errors
        ctx["path_error"] = f"Version {version} no longer validates, so it was not restored:"
        return render(request, "instructor/edit.html", ctx, status_code=422)
    return RedirectResponse(
        f"/instructor/lessons/{lesson_id}/edit?published={new}&restored={version}#published", status_code=303
    )
