"""The account page: display name, password, sessions ("log out everywhere"), personal API tokens; and, for
instructors, password-reset links for other users.

    GET  /account                                the page
    POST /account/name                           change the display name
    POST /account/password                       change the password (current one required; ends other sessions)
    POST /account/logout-everywhere              end every session of this account, this browser's included
    POST /account/tokens, /account/tokens/{id}/revoke
    GET  /account/reset-links                    instructors: issue a one-time reset link for a user
    POST /account/reset-links                    (mailed when COURSE_SMTP_URL is set; otherwise shown to copy)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from app.deps import CurrentUser, DbInt, InstructorUser, SessionDep, SettingsDep, csrf_protect
from app.models import User
from app.services import resets, sessions, tokens
from app.services import users as user_service
from app.web import render

router = APIRouter(dependencies=[Depends(csrf_protect)])


def _page(request: Request, db: SessionDep, user: User, *, status_code: int = 200, **extra) -> Response:
    settings = request.app.state.settings
    ctx = {
        "tokens": tokens.list_for(db, user=user),
        "sessions": sessions.list_for(db, user=user, idle_s=settings.session_idle_s, max_s=settings.session_max_s),
        "this_session": getattr(request.state, "session_id", None),
        "browser_label": sessions.browser_label,
        "new_token": None,
        "error": None,
        "errors": {},
        "values": {},
        **extra,
    }
    if ctx["error"] and status_code == 200:
        status_code = 400
    return render(request, "account/index.html", ctx, status_code=status_code)


@router.get("/account")
def account(request: Request, user: CurrentUser, db: SessionDep):
    return _page(request, db, user)


@router.post("/account/name")
def change_name(
    request: Request, user: CurrentUser, db: SessionDep, display_name: Annotated[str, Form(max_length=200)] = ""
):
    try:
        user_service.change_display_name(db, user=user, display_name=display_name)
    except user_service.UserError as exc:
        return _page(
            request, db, user, status_code=400, errors={exc.field: exc.message}, values={"display_name": display_name}
        )
    return _page(request, db, user, profile_message=f"Your display name is now “{user.display_name}”.")


@router.post("/account/password")
def change_password(
    request: Request,
    user: CurrentUser,
    db: SessionDep,
    current_password: Annotated[str, Form(max_length=1000)] = "",
    new_password: Annotated[str, Form(max_length=1000)] = "",
    confirm_password: Annotated[str, Form(max_length=1000)] = "",
):
    try:
        if new_password != confirm_password:
            raise user_service.UserError("confirm_password", "the two new passwords differ")
        ended = user_service.change_password(
            db,
            user=user,
            current=current_password,
            new=new_password,
            keep_session_id=getattr(request.state, "session_id", None),
        )
    except user_service.UserError as exc:
        return _page(request, db, user, status_code=400, errors={exc.field: exc.message})
    others = f"{ended} other session{'s' if ended != 1 else ''}"
    return _page(request, db, user, password_message=f"Password changed; {others} logged out. This browser stays in.")


@router.post("/account/logout-everywhere")
def logout_everywhere(request: Request, user: CurrentUser, db: SessionDep):
    sessions.end_all(db, user=user)
    request.session.clear()
    return RedirectResponse("/login?notice=everywhere", status_code=303)


@router.post("/account/tokens")
def create_token(request: Request, user: CurrentUser, db: SessionDep, name: Annotated[str, Form(max_length=200)] = ""):
    try:
        row, plaintext = tokens.create(db, user=user, name=name)
    except tokens.TokenError as exc:
        return _page(request, db, user, error=exc.message)
    return _page(request, db, user, new_token=plaintext, new_name=row.name)


@router.post("/account/tokens/{token_id}/revoke")
def revoke_token(request: Request, token_id: DbInt, user: CurrentUser, db: SessionDep):
    if not tokens.revoke(db, user=user, token_id=token_id):
        raise HTTPException(404, f"No token {token_id} of yours.")
    return _page(request, db, user, message="Token revoked: scripts using it now get 401.")


# ---------------------------------------------------------------- reset links (instructors)


def _resets_page(request: Request, settings: SettingsDep, *, status_code: int = 200, **extra) -> Response:
    ctx = {"errors": {}, "email": "", "link": None, "mailed_to": None, "mail_error": None, **extra}
    ctx["smtp"] = bool(settings.smtp_url)
    ctx["lifetime_h"] = settings.reset_link_s // 3600
    return render(request, "account/reset_links.html", ctx, status_code=status_code)


@router.get("/account/reset-links")
def reset_links(request: Request, user: InstructorUser, settings: SettingsDep):
    return _resets_page(request, settings)


@router.post("/account/reset-links")
def issue_reset_link(
    request: Request,
    user: InstructorUser,
    db: SessionDep,
    settings: SettingsDep,
    email: Annotated[str, Form(max_length=254)] = "",
):
    target = user_service.get_by_email(db, email=email)
    if target is None:
        errors = {"email": f"no account has the address {email.strip()!r}; check the spelling"}
        return _resets_page(request, settings, status_code=400, errors=errors, email=email)
    row, token = resets.issue(db, user=target, issued_by=user, lifetime_s=settings.reset_link_s)
    url = resets.link(settings.public_url or str(request.base_url), token)
    if settings.smtp_url:
        try:
            resets.send(settings, user=target, url=url, expires_at=row.expires_at)
        except resets.MailError as exc:
            return _resets_page(request, settings, status_code=502, link=url, target=target, mail_error=str(exc))
        return _resets_page(request, settings, mailed_to=target.email, target=target)
    return _resets_page(request, settings, link=url, target=target)
