"""LTI 1.3 pages for people: the site admin's registrations, and each class's LMS links.

    GET  /lti                                          site admins: registrations, the LMS courses seen and their
                                                       classes, every change recorded, the tool's URLs, the form
    POST /lti/platforms                                register a platform (or add deployment ids; changing an
                                                       existing one's URLs needs `replace`), recorded
    POST /lti/contexts/{id}                            map an LMS course to another class (`class`: its slug), recorded
    GET  /classes/{slug}/lti                           the class's instructors: its LMS links and their services
    POST /classes/{slug}/lti/links/{id}/roster         Names and Role Provisioning: sync the link's course roster
    POST /classes/{slug}/lti/links/{id}/grades         Assignment and Grade Services: send released report grades
    POST /classes/{slug}/lti/links/{id}/practice       the same for a lesson link: each learner's practice score

A registration says whose signatures the course believes, so only a site admin changes one, and every change is
kept in lti_audit with who made it and what it was before. A link's services reach its own LMS course only.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from app.core.config import Settings
from app.core.models import LtiContext
from app.services.classes import registry as class_registry
from app.services.classes.scopes import Scope
from app.services.errors import FieldError, NotFound
from app.services.lti import contexts
from app.services.lti import registry as lti
from app.services.lti import sync as lti_sync
from app.web.deps import AdminUser, ClassInstructor, DbInt, PostedForm, SessionDep, SettingsDep, csrf_protect
from app.web.routes.lti import TOOL_PATHS, tool_base
from app.web.templates import render

router = APIRouter(dependencies=[Depends(csrf_protect)])

FORM_FIELDS = ("name", "issuer", "client_id", "auth_login_url", "auth_token_url", "key_set_url", "auth_audience")


def _tool_urls(request: Request, settings: Settings) -> dict[str, str]:
    base = tool_base(request, settings)
    return {name: base + path for name, path in TOOL_PATHS.items()}


def _admin_page(request: Request, db, settings: Settings, *, status_code: int = 200, **extra) -> Response:
    ctx = {
        "platforms": lti.platforms(db),
        "contexts": contexts.contexts(db),
        "classes": class_registry.all_classes(db),
        "audit": lti.audit(db),
        "tool_urls": _tool_urls(request, settings),
        "errors": {},
        "form": {},
        "done": None,
        **extra,
    }
    return render(request, "lti/platforms.html", ctx, status_code=status_code)


@router.get("/lti")
def platforms_page(request: Request, db: SessionDep, settings: SettingsDep, user: AdminUser) -> Response:
    return _admin_page(request, db, settings)


@router.post("/lti/platforms")
def add_platform(
    request: Request, db: SessionDep, settings: SettingsDep, user: AdminUser, form: PostedForm
) -> Response:
    values = {f: str(form.get(f, "")) for f in (*FORM_FIELDS, "deployment_ids")}
    replace = form.get("replace") == "1"
    try:
        row = lti.register(
            db,
            **{f: values[f] for f in FORM_FIELDS},
            deployment_ids=lti.deployment_list(values["deployment_ids"]),
            by=user,
            via="web",
            replace=replace,
        )
    except FieldError as exc:
        db.rollback()
        status = 409 if isinstance(exc, lti.RegistrationChange) else 422
        return _admin_page(request, db, settings, status_code=status, errors={exc.field: exc.message}, form=values)
    return _admin_page(request, db, settings, done=f"Registered {row.name} ({row.issuer}, client id {row.client_id}).")


@router.post("/lti/contexts/{context_id}")
def map_context(
    request: Request, context_id: DbInt, db: SessionDep, settings: SettingsDep, user: AdminUser, form: PostedForm
) -> Response:
    context = db.get(LtiContext, context_id)
    if context is None:
        raise NotFound(f"There is no LMS course {context_id}.")
    slug = str(form.get("class", ""))[:40]
    klass = class_registry.by_slug(db, slug=slug)
    if klass is None:
        errors = {f"class-{context_id}": f"no class has the address {slug!r}; pick one of the list"}
        return _admin_page(request, db, settings, status_code=422, errors=errors)
    contexts.map_context(db, context=context, klass=klass, by=user)
    done = f"LMS course {context.title or context.context_id} now gives roles in {klass.title}."
    return _admin_page(request, db, settings, done=done)


# --- a class's LMS links -------------------------------------------------------------------------------------------


def _class_page(request: Request, db, settings: Settings, scope: Scope, **extra) -> Response:
    ctx = {"links": lti.links(db, klass=scope.klass), "tool_urls": _tool_urls(request, settings), "done": None, **extra}
    return render(request, "lti/class_links.html", ctx)


def _class_link(db, scope: Scope, link_id: int):
    """The link, when it is placed in an LMS course of this class; else 404, as for no link at all."""
    row = lti.link(db, link_id=link_id)
    context = lti.link_context(db, row) if row is not None else None
    if row is None or context is None or context.class_id != scope.class_id:
        raise NotFound(f"{scope.klass.title} has no LMS link {link_id}.")
    return row


@router.get("/classes/{slug}/lti")
def class_links(request: Request, db: SessionDep, settings: SettingsDep, scope: ClassInstructor) -> Response:
    return _class_page(request, db, settings, scope)


@router.post("/classes/{slug}/lti/links/{link_id}/roster")
def roster(request: Request, db: SessionDep, settings: SettingsDep, scope: ClassInstructor, link_id: DbInt) -> Response:
    link = _class_link(db, scope, link_id)
    result = lti_sync.sync_roster(db, link=link, key=lti.tool_key(settings.data_dir))
    done = (
        f"Roster of {link.context_title or link.context_id}: {result.members} members, {result.created} new "
        f"accounts, {result.roles_changed} roles set, {result.left} marked as left."
    )
    return _class_page(request, db, settings, scope, done=done)


@router.post("/classes/{slug}/lti/links/{link_id}/grades")
def grades(request: Request, db: SessionDep, settings: SettingsDep, scope: ClassInstructor, link_id: DbInt) -> Response:
    link = _class_link(db, scope, link_id)
    result = lti_sync.send_grades(db, link=link, key=lti.tool_key(settings.data_dir))
    done = (
        f"Grades for {link.target}: {result.sent} sent, {result.already} sent before, {result.without_grade} "
        "learners without a released grade."
    )
    return _class_page(request, db, settings, scope, done=done)


@router.post("/classes/{slug}/lti/links/{link_id}/practice")
def practice(
    request: Request, db: SessionDep, settings: SettingsDep, scope: ClassInstructor, link_id: DbInt
) -> Response:
    link = _class_link(db, scope, link_id)
    sent = lti_sync.send_practice(db, link=link, key=lti.tool_key(settings.data_dir))
    return _class_page(request, db, settings, scope, done=f"Practice scores for {link.target}: {sent} sent.")
