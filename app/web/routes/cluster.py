"""The instructor's cluster page: nodes, GPUs and capabilities, running and queued jobs, per-learner usage and
limits (course default and per-learner overrides). Cancelling a job uses POST /jobs/{id}/cancel (app/web/routes/labs.py)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from app.services.accounts import users as user_service
from app.services.cluster import view as clusterview
from app.services.errors import FieldError
from app.services.jobs import limits as limit_service
from app.web.deps import AdminUser, HostDep, SessionDep, SettingsDep, csrf_protect
from app.web.templates import render

router = APIRouter(prefix="/instructor/cluster", dependencies=[Depends(csrf_protect)])


# What the page says after a save (POST, then redirect to ?saved=KIND); an unknown KIND says nothing.
SAVED = {
    "default": "Saved the course default limits.",
    "learner": "Saved the learner's own limits (listed under the form).",
    "cleared": "Removed the learner's own limits: the course default applies to them again.",
    "unchanged": "That learner had no limits of their own, so nothing changed.",
}


def _page(
    request: Request,
    db,
    settings,
    host,
    errors: dict | None = None,
    values: dict | None = None,
    status=200,
    saved: str | None = None,
):
    ctx = clusterview.overview(db, settings=settings, host=host)
    ctx.update(
        errors=errors or {}, values=values or {}, limit_fields=limit_service.FIELDS, saved=SAVED.get(saved or "")
    )
    return render(request, "cluster/index.html", ctx, block="cluster", status_code=status)


@router.get("")
def cluster_page(
    request: Request, user: AdminUser, db: SessionDep, settings: SettingsDep, host: HostDep, saved: str = ""
) -> Response:
    return _page(request, db, settings, host, saved=saved)


@router.post("/limits")
async def set_limits(
    request: Request, user: AdminUser, db: SessionDep, settings: SettingsDep, host: HostDep
) -> Response:
    """The course default (no email) or one learner's override (email); `clear` removes a learner's override."""
    form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    email = form.get("email", "").strip()
    target = None
    try:
        if email:
            target = user_service.get_by_email(db, email=email)
            if target is None:
                raise FieldError("email", f"email: no user {email!r}; leave it blank to set the course default")
        if form.get("clear"):
            if target is None:  # never fall through to saving the form's numbers as the course default
                raise FieldError(
                    "email",
                    "email: name the learner whose own limits to remove; the course default can be changed, "
                    "not removed",
                )
            saved = "cleared" if limit_service.clear_override(db, user_id=target.id) else "unchanged"
        else:
            limit_service.set_limits(
                db, by=user, user_id=target.id if target else None, values=limit_service.parse(form)
            )
            saved = "learner" if target else "default"
    except FieldError as exc:
        return _page(request, db, settings, host, errors={exc.field: str(exc)}, values=form, status=422)
    return RedirectResponse(f"/instructor/cluster?saved={saved}", status_code=303)
