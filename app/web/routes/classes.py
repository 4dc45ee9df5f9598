"""Classes as their people see them: the switcher, a class's overview, its people, joining by invite.

    GET  /classes                              the classes you are in, with your role; a form to join by code
    GET  /classes/{slug}                       a class's overview: its lessons (learners), its pages (staff)
    GET  /classes/{slug}/people                the class's instructors: everyone in it, the invite link
    POST /classes/{slug}/people                add a person by email, with a role (a learner of another class
                                               is refused: joining a second class as a learner is theirs to do)
    POST /classes/{slug}/people/{user_id}      change a person's role, or take them out (`role=remove`)
    POST /classes/{slug}/invite                a new invite code; the old link stops working
    GET|POST /join                             join with a code typed in
    GET|POST /join/{code}                      the invite link: says which class, and joins on the button

Taking someone out of a class keeps everything they did (answers, runs, reports, grades are theirs, not the
class's); the class's staff just stop seeing it. A class never loses its last instructor.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse, Response

from app.core.class_models import CLASS_ROLES
from app.services.accounts import users as user_service
from app.services.classes import registry as class_registry
from app.services.classes import scopes
from app.services.classes.scopes import Scope
from app.services.errors import FieldError, NotFound
from app.services.learning import lessons as lesson_service
from app.web.deps import ClassInstructor, CurrentUser, DbInt, SessionDep, SettingsDep, csrf_protect
from app.web.templates import render

router = APIRouter(dependencies=[Depends(csrf_protect)])

# What the people page says after a change (POST, then redirect to ?done=KIND&who=EMAIL): fixed sentences.
DONE = {
    "added": "{who} is now in the class.",
    "role": "{who}'s role is changed.",
    "removed": "{who} is out of the class; everything they did stays theirs.",
    "already": "{who} already had that role: nothing changed.",
    "invite": "A new invite link is made; the old one no longer works.",
}


@router.get("/classes")
def my_classes(request: Request, user: CurrentUser, db: SessionDep) -> Response:
    ctx = {"memberships": class_registry.memberships(db, user_id=user.id), "errors": {}, "code": ""}
    return render(request, "classes/index.html", ctx)


@router.get("/classes/{slug}")
def overview(request: Request, slug: str, user: CurrentUser, db: SessionDep, settings: SettingsDep) -> Response:
    klass = class_registry.by_slug(db, slug=slug[:40])
    row = class_registry.member(db, class_id=klass.id, user_id=user.id) if klass else None
    if klass is None or row is None:
        raise NotFound(f"You are in no class at /classes/{slug[:40]}.")
    lessons = [les for les, _ in lesson_service.catalogue(db) if klass.offers(les.id)]
    staff = row.role in ("grader", "instructor") and row.left_at is None
    ctx: dict = {"klass": klass, "member": row, "lessons": lessons}
    if staff:
        scope = Scope(klass, row.role, user)
        request.state.scope = scope
        request.state.staff_classes = scopes.staff_scopes(db, user=user)
        people = class_registry.people(db, klass=klass)
        ctx |= {
            "counts": {r: sum(1 for _, m in people if m.role == r and m.left_at is None) for r in CLASS_ROLES},
            "invite_url": _invite_url(request, settings, klass.invite_code) if scope.instructor else None,
        }
    return render(request, "classes/overview.html", ctx)


def _invite_url(request: Request, settings, code: str) -> str:
    return (settings.public_url or str(request.base_url)).rstrip("/") + f"/join/{code}"


def _people_page(
    request: Request, db, settings, scope: Scope, *, status_code: int = 200, errors=None, form=None
) -> Response:
    q = request.query_params
    done = DONE.get(q.get("done", ""), "").format(who=q.get("who", "")[:254])
    ctx = {
        "people": class_registry.people(db, klass=scope.klass),
        "invite_url": _invite_url(request, settings, scope.klass.invite_code),
        "roles": CLASS_ROLES,
        "errors": errors or {},
        "form": form or {},
        "done": done,
    }
    return render(request, "classes/people.html", ctx, status_code=status_code)


@router.get("/classes/{slug}/people")
def people(request: Request, scope: ClassInstructor, db: SessionDep, settings: SettingsDep) -> Response:
    return _people_page(request, db, settings, scope)


def _done(scope: Scope, kind: str, who: str = "") -> RedirectResponse:
    return RedirectResponse(f"/classes/{scope.klass.slug}/people?{urlencode({'done': kind, 'who': who})}", 303)


def _learner_elsewhere(db, scope: Scope, user_id: int) -> bool:
    return any(
        m.role == "learner" and m.klass.id != scope.class_id for m in class_registry.memberships(db, user_id=user_id)
    )


@router.post("/classes/{slug}/people")
def add_person(
    request: Request,
    scope: ClassInstructor,
    db: SessionDep,
    settings: SettingsDep,
    email: Annotated[str, Form(max_length=254)] = "",
    role: Annotated[str, Form(max_length=20)] = "learner",
) -> Response:
    form = {"email": email, "role": role}
    if role not in CLASS_ROLES:
        errors = {"role": f"got {role!r}; a role in a class is one of {', '.join(CLASS_ROLES)}"}
        return _people_page(request, db, settings, scope, status_code=422, errors=errors, form=form)
    person = user_service.get_by_email(db, email=email)
    if person is None:
        errors = {
            "email": f"no account has the address {email.strip()!r}; ask them to register, or send them the invite link"
        }
        return _people_page(request, db, settings, scope, status_code=422, errors=errors, form=form)
    if role == "learner" and _learner_elsewhere(db, scope, person.id):
        # Their work in shared lessons would show here: only they may bring it into a second class.
        errors = {
            "email": f"{person.email} is a learner of another class; send them the invite link, so joining this one "
            "is their choice"
        }
        return _people_page(request, db, settings, scope, status_code=409, errors=errors, form=form)
    before = class_registry.role_in(db, class_id=scope.class_id, user_id=person.id)
    if before == "instructor" and role != "instructor" and not _keeps_an_instructor(db, scope, person.id):
        errors = {"role": "this is the class's last instructor: make someone else instructor first"}
        return _people_page(request, db, settings, scope, status_code=409, errors=errors, form=form)
    _, changed = class_registry.enrol(db, klass=scope.klass, user_id=person.id, role=role, via="staff")
    return _done(scope, ("added" if before is None else "role") if changed else "already", person.email)


def _keeps_an_instructor(db, scope: Scope, user_id: int) -> bool:
    return class_registry.instructors_left(db, klass=scope.klass, without=user_id) > 0


@router.post("/classes/{slug}/people/{user_id}")
def change_person(
    request: Request,
    user_id: DbInt,
    scope: ClassInstructor,
    db: SessionDep,
    settings: SettingsDep,
    role: Annotated[str, Form(max_length=20)],
) -> Response:
    row = class_registry.member(db, class_id=scope.class_id, user_id=user_id)
    person = user_service.get(db, user_id=user_id) if row is not None else None
    if row is None or person is None:
        raise NotFound(f"{scope.klass.title} has nobody with id {user_id}.")
    if role != "remove" and role not in CLASS_ROLES:
        raise FieldError("role", f"got {role[:20]!r}; use one of {', '.join(CLASS_ROLES)}, or remove")
    if row.role == "instructor" and role != "instructor" and not _keeps_an_instructor(db, scope, user_id):
        errors = {f"role-{user_id}": "this is the class's last instructor: make someone else instructor first"}
        return _people_page(request, db, settings, scope, status_code=409, errors=errors)
    if role == "remove":
        class_registry.remove(db, klass=scope.klass, user_id=user_id)
        return _done(scope, "removed", person.email)
    if role == "learner" and row.role != "learner" and _learner_elsewhere(db, scope, user_id):
        errors = {f"role-{user_id}": "a learner of another class joins this one as a learner by the invite link"}
        return _people_page(request, db, settings, scope, status_code=409, errors=errors)
    _, changed = class_registry.enrol(db, klass=scope.klass, user_id=user_id, role=role, via="staff")
    return _done(scope, "role" if changed else "already", person.email)


@router.post("/classes/{slug}/invite")
def new_invite(scope: ClassInstructor, db: SessionDep) -> Response:
    class_registry.rotate_invite(db, klass=scope.klass)
    return _done(scope, "invite")


# --- joining ---------------------------------------------------------------------------------------------------------


@router.get("/join")
def join_form(request: Request, user: CurrentUser) -> Response:
    return render(request, "classes/join.html", {"klass": None, "code": "", "errors": {}})


@router.post("/join")
def join_by_code(
    request: Request, user: CurrentUser, db: SessionDep, code: Annotated[str, Form(max_length=80)] = ""
) -> Response:
    try:
        klass, _ = class_registry.join(db, code=code, user_id=user.id)
    except FieldError as exc:
        ctx = {"klass": None, "code": code, "errors": {exc.field: exc.message}}
        return render(request, "classes/join.html", ctx, status_code=422)
    return RedirectResponse(f"/classes/{klass.slug}", 303)


@router.get("/join/{code}")
def invite_link(request: Request, code: str, user: CurrentUser, db: SessionDep) -> Response:
    klass = class_registry.by_code(db, code=code[:80])
    if klass is None:
        raise NotFound("This invite link is not (or no longer) a class's: ask for the current one.")
    role = class_registry.role_in(db, class_id=klass.id, user_id=user.id)
    return render(request, "classes/join.html", {"klass": klass, "code": klass.invite_code, "role": role, "errors": {}})


@router.post("/join/{code}")
def join_by_link(code: str, user: CurrentUser, db: SessionDep) -> Response:
    try:
        klass, _ = class_registry.join(db, code=code[:80], user_id=user.id)
    except FieldError:
        raise NotFound("This invite link is not (or no longer) a class's: ask for the current one.") from None
    return RedirectResponse(f"/classes/{klass.slug}", 303)
