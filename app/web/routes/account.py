"""The account page: display name, password, sessions ("log out everywhere"), personal API tokens; and, for site
admins and instructors (for their class's learners: resets.may_issue), password-reset links for other users.

    GET  /account                                the page
    POST /account/name                           change the display name
    POST /account/password                       change the password (current one required; ends other sessions
                                                 and revokes every API token)
    POST /account/logout-everywhere              end every session of this account, this browser's included, and
                                                 revoke every API token
    POST /account/tokens, /account/tokens/{id}/revoke
    (a successful POST redirects to /account?done=KIND, except creating a token: its plaintext is shown once,
    in that response; GET on a form's address leads to /account)
    GET  /account/reset-links                    admins and instructors: issue a one-time reset link for a user
    POST /account/reset-links                    (mailed when COURSE_SMTP_URL is set; otherwise shown to copy)
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from app.core.models import User
from app.services.accounts import resets, sessions, tokens
from app.services.accounts import users as user_service
from app.services.classes import scopes
from app.web.deps import CurrentUser, DbInt, SessionDep, SettingsDep, csrf_protect
from app.web.templates import render
from labs.api import count

router = APIRouter(dependencies=[Depends(csrf_protect)])

# What the page says after a successful action (POST, then 303 to /account?done=KIND): fixed sentences, so the
# address cannot put words of its own on the page; an unknown KIND says nothing. `{name}` is the user's own
# display name from the database, `{others}` the number of other sessions ended (an int parsed from the address).
DONE = {
    "name": ("profile", "Your display name is now “{name}”."),
    "password": ("password", "Password changed; {others} logged out. This browser stays in."),
    "token-revoked": ("tokens", "Token revoked: scripts using it now get 401."),
}
# Where each section's heading is, so the redirect lands at the form that was sent.
ANCHOR = {"profile": "profile-h", "password": "password-h", "tokens": "tok-h"}
# The last few token forms this session has sent (their one-time `once` values): a reload re-sends the form,
# and must not make a second token.
TOKEN_FORMS_KEY = "token_forms_sent"


def _done(kind: str, **query: int) -> RedirectResponse:
    extra = "".join(f"&{k}={v}" for k, v in query.items())
    return RedirectResponse(f"/account?done={kind}{extra}#{ANCHOR[DONE[kind][0]]}", status_code=303)


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
        "done": {},
        "token_once": secrets.token_urlsafe(12),
        "may_reset": user.has_role("admin") or bool(scopes.staff_scopes(db, user=user, roles=("instructor",))),
        **extra,
    }
    if ctx["error"] and status_code == 200:
        status_code = 400
    response = render(request, "account/index.html", ctx, status_code=status_code)
    response.headers["Cache-Control"] = "no-store"  # a new token's plaintext must not come back from a cache
    return response


@router.get("/account")
def account(request: Request, user: CurrentUser, db: SessionDep, done: str = "", others: int = 0, revoked: int = 0):
    messages = {}
    if done in DONE:
        section, text = DONE[done]
        others = max(0, min(others, 10_000))
        ended = count(others, "other session")
        messages[section] = text.format(name=user.display_name, others=ended)
        revoked = max(0, min(revoked, tokens.MAX_ACTIVE))
        if done == "password" and revoked:
            messages[section] += (
                f" {count(revoked, 'API token')} revoked with it: make a new one below for your scripts."
            )
    return _page(request, db, user, done=messages)


# The forms' addresses, opened directly (a bookmark, a reload after an error, the address bar after creating a
# token), lead to the page instead of "405 Not here".
@router.get("/account/name")
@router.get("/account/password")
@router.get("/account/tokens")
def form_address(user: CurrentUser):
    return RedirectResponse("/account", status_code=303)


@router.get("/account/tokens/{token_id}/revoke")
def revoke_address(token_id: DbInt, user: CurrentUser):
    return RedirectResponse("/account#tok-h", status_code=303)


@router.post("/account/name")
def change_name(request: Request, user: CurrentUser, db: SessionDep, display_name: Annotated[str, Form()] = ""):
    # No max_length on the form field: a too-long name gets the field's own message (the rule, and how long it
    # was) with what was typed kept, not the framework's bare 422 page.
    try:
        user_service.change_display_name(db, user=user, display_name=display_name)
    except user_service.UserError as exc:
        return _page(
            request, db, user, status_code=400, errors={exc.field: exc.message}, values={"display_name": display_name}
        )
    return _done("name")


@router.post("/account/password")
def change_password(
    request: Request,
    user: CurrentUser,
    db: SessionDep,
    current_password: Annotated[str, Form(max_length=1000)] = "",
    new_password: Annotated[str, Form(max_length=1000)] = "",
    confirm_password: Annotated[str, Form(max_length=1000)] = "",
):
    live_tokens = tokens.active_count(db, user_id=user.id)  # the change revokes them (sessions.end_all)
    try:
        ended = user_service.change_password(
            db,
            user=user,
            current=current_password,
            new=new_password,
            confirm=confirm_password,
            keep_session_id=getattr(request.state, "session_id", None),
        )
    except user_service.UserError as exc:
        return _page(request, db, user, status_code=400, errors=exc.errors)
    return _done("password", others=ended, **({"revoked": live_tokens} if live_tokens else {}))


@router.post("/account/logout-everywhere")
def logout_everywhere(request: Request, user: CurrentUser, db: SessionDep):
    sessions.end_all(db, user=user)
    request.session.clear()
    return RedirectResponse("/login?notice=everywhere", status_code=303)


@router.post("/account/tokens")
def create_token(
    request: Request,
    user: CurrentUser,
    db: SessionDep,
    name: Annotated[str, Form(max_length=200)] = "",
    once: Annotated[str, Form(max_length=64)] = "",
):
    """The one response that is not a redirect: the new token's plaintext is shown here, once, and never put
    in an address or the session cookie. The form carries a one-time value; sending the same form again (a
    reload of this response) is refused instead of making a second token."""
    sent = [v for v in request.session.get(TOKEN_FORMS_KEY, []) if isinstance(v, str)]
    if once and once in sent:
        return _page(
            request,
            db,
            user,
            status_code=409,
            error="this form was already sent, and the token it made is listed below (its value is shown only "
            "once), so no second token was made. To make another, type a name and create it again.",
            token_name=name,
        )
    try:
        row, plaintext = tokens.create(db, user=user, name=name)
    except tokens.TokenError as exc:
        return _page(request, db, user, error=exc.message, token_name=name)
    if once:
        request.session[TOKEN_FORMS_KEY] = [*sent, once][-10:]
    return _page(request, db, user, new_token=plaintext, new_name=row.name)


@router.post("/account/tokens/{token_id}/revoke")
def revoke_token(request: Request, token_id: DbInt, user: CurrentUser, db: SessionDep):
    if not tokens.revoke(db, user=user, token_id=token_id):
        raise HTTPException(404, f"No token {token_id} of yours.")
    return _done("token-revoked")


# ---------------------------------------------------------------- reset links (site admins; instructors for their learners)


def _resetter(user: User, db) -> User:
    """A site admin, or an instructor of some class: 403 for anyone else."""
    if not (user.has_role("admin") or scopes.staff_scopes(db, user=user, roles=("instructor",))):
        raise HTTPException(403, "Reset links are issued by a class's instructors and by site admins.")
    return user


def _resets_page(request: Request, settings: SettingsDep, *, status_code: int = 200, **extra) -> Response:
    ctx = {"errors": {}, "email": "", "link": None, "mailed_to": None, "mail_error": None, **extra}
    ctx["smtp"] = bool(settings.smtp_url)
    ctx["lifetime_h"] = settings.reset_link_s // 3600
    return render(request, "account/reset_links.html", ctx, status_code=status_code)


@router.get("/account/reset-links")
def reset_links(request: Request, user: CurrentUser, db: SessionDep, settings: SettingsDep):
    _resetter(user, db)
    return _resets_page(request, settings)


@router.post("/account/reset-links")
def issue_reset_link(
    request: Request,
    user: CurrentUser,
    db: SessionDep,
    settings: SettingsDep,
    email: Annotated[str, Form(max_length=254)] = "",
):
    _resetter(user, db)
    target = user_service.get_by_email(db, email=email)
    if target is None or not resets.may_issue(db, by=user, user=target):
        # an instructor is told the same whether the address is unknown or not theirs: nothing about other classes
        whose = "no account" if user.has_role("admin") else "no learner of a class you instruct"
        errors = {"email": f"{whose} has the address {email.strip()!r}; check the spelling"}
        return _resets_page(request, settings, status_code=400, errors=errors, email=email)
    row, token = resets.issue(db, user=target, issued_by=user, lifetime_s=settings.reset_link_s)
    url = resets.link(settings.site_url, token)
    if settings.smtp_url:
        try:
            resets.send(settings, user=target, url=url, expires_at=row.expires_at)
        except resets.MailError as exc:
            return _resets_page(request, settings, status_code=502, link=url, target=target, mail_error=str(exc))
        return _resets_page(request, settings, mailed_to=target.email, target=target)
    return _resets_page(request, settings, link=url, target=target)
