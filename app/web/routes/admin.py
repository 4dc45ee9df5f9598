"""The site admin's page: classes, their staff, and who may author lessons. (LMS registrations: /lti, in
app/web/routes/lti_pages.py; the cluster and queue limits: /instructor/cluster.)

    GET  /admin                    every class with its people counted, the authors, the forms below
    POST /admin/classes            create a class (slug, title, term, the lessons it offers, its first instructor)
    POST /admin/staff              make an account a class's instructor or grader
    POST /admin/authors            grant or revoke authoring (editing and publishing lessons, shared by every class)

A site admin is made on the command line (`python -m app users create --email E --role admin`), never in a browser:
an admin decides which LMS signatures the course believes. An admin sees no class's learners by being admin; one
who teaches holds a role in that class like anyone else.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy import func, select

from app.core.models import ClassMember, User, UserRole
from app.services.accounts import users as user_service
from app.services.classes import registry as class_registry
from app.services.errors import FieldError
from app.services.learning import lessons as lesson_service
from app.web.deps import AdminUser, PostedForm, SessionDep, csrf_protect
from app.web.templates import render

router = APIRouter(prefix="/admin", dependencies=[Depends(csrf_protect)])

DONE = {
    "class": "Class {what} is made.",
    "staff": "{what} is staff of the class now.",
    "granted": "{what} may author lessons now.",
    "revoked": "{what} no longer authors lessons.",
}


def _page(request: Request, db, *, status_code: int = 200, errors=None, form=None, which: str = "") -> Response:
    counts: dict[tuple[int, str], int] = {
        (cid, role): n
        for cid, role, n in db.execute(
            select(ClassMember.class_id, ClassMember.role, func.count())
            .where(ClassMember.left_at.is_(None))
            .group_by(ClassMember.class_id, ClassMember.role)
        )
    }
    authors = list(db.scalars(select(User).join(UserRole).where(UserRole.role == "author").order_by(User.email)))
    q = request.query_params
    ctx = {
        "classes": class_registry.all_classes(db),
        "counts": counts,
        "lessons": [les for les, _ in lesson_service.catalogue(db)],
        "authors": authors,
        "errors": errors or {},
        "form": form or {},
        "which": which,  # the form a refusal is about: classes | staff | authors
        "done": DONE.get(q.get("done", ""), "").format(what=q.get("what", "")[:254]),
    }
    return render(request, "admin/index.html", ctx, status_code=status_code)


def _done(kind: str, what: str) -> RedirectResponse:
    return RedirectResponse(f"/admin?{urlencode({'done': kind, 'what': what})}", 303)


@router.get("")
def admin_home(request: Request, user: AdminUser, db: SessionDep) -> Response:
    return _page(request, db)


@router.post("/classes")
def create_class(request: Request, user: AdminUser, db: SessionDep, form: PostedForm) -> Response:
    values = {k: str(form.get(k, "")) for k in ("slug", "title", "term", "instructor", "every")}
    chosen = [str(v) for v in form.getlist("lessons")]
    known = {les.id for les, _ in lesson_service.catalogue(db)}
    errors: dict[str, str] = {}
    instructor = None
    if values["instructor"].strip():
        instructor = user_service.get_by_email(db, email=values["instructor"])
        if instructor is None:
            errors["instructor"] = f"no account has the address {values['instructor'].strip()!r}; make it first"
    klass = None
    if not errors:  # a class with a mistyped first instructor is not made at all
        try:
            klass = class_registry.create(
                db,
                slug=values["slug"],
                title=values["title"],
                term=values["term"],
                lesson_ids=None if values["every"] == "1" or not chosen else chosen,
                known_lessons=known,
                by=user,
            )
        except class_registry.ClassError as exc:
            errors = exc.errors
    if klass is None:
        return _page(request, db, status_code=422, errors=errors, form=values | {"lessons": chosen}, which="classes")
    if instructor is not None:
        class_registry.enrol(db, klass=klass, user_id=instructor.id, role="instructor", via="admin")
    return _done("class", klass.title)


@router.post("/staff")
def add_staff(
    request: Request,
    user: AdminUser,
    db: SessionDep,
    slug: Annotated[str, Form(alias="class", max_length=40)] = "",
    email: Annotated[str, Form(max_length=254)] = "",
    role: Annotated[str, Form(max_length=20)] = "instructor",
) -> Response:
    form = {"class": slug, "email": email, "role": role}
    klass = class_registry.by_slug(db, slug=slug)
    person = user_service.get_by_email(db, email=email)
    errors = {}
    if klass is None:
        errors["class"] = f"no class has the address {slug!r}; pick one of the list"
    if person is None:
        errors["email"] = f"no account has the address {email.strip()!r}; make it first"
    if role not in ("instructor", "grader"):
        errors["role"] = f"got {role!r}; staff are an instructor or a grader"
    if errors or klass is None or person is None:
        return _page(request, db, status_code=422, errors=errors, form=form, which="staff")
    class_registry.enrol(db, klass=klass, user_id=person.id, role=role, via="admin")
    return _done("staff", f"{person.email} ({role} of {klass.title})")


@router.post("/authors")
def authors(
    request: Request,
    user: AdminUser,
    db: SessionDep,
    email: Annotated[str, Form(max_length=254)] = "",
    action: Annotated[str, Form(max_length=10)] = "grant",
) -> Response:
    form = {"email": email}
    person = user_service.get_by_email(db, email=email)
    try:
        if person is None:
            raise FieldError("email", f"no account has the address {email.strip()!r}; check the spelling")
        if action not in ("grant", "revoke"):
            raise FieldError("action", f"got {action!r}; grant or revoke")
    except FieldError as exc:
        return _page(request, db, status_code=422, errors={exc.field: exc.message}, form=form, which="authors")
    if action == "grant":
        user_service.add_roles(db, user=person, roles=["author"])
        return _done("granted", person.email)
    user_service.remove_roles(db, user=person, roles=["author"])
    return _done("revoked", person.email)
