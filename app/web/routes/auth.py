"""Register, log in, log out, and set a new password from a reset link.

A login is a server-side session row (app/services/accounts/sessions.py); the signed cookie carries its token and the
CSRF token, and both are replaced on login. Failed logins are throttled per account, per trusted device and per
client address (app/services/accounts/throttle.py), and registrations per client address: a throttled request answers 429
with Retry-After and says when to try again. A successful login or registration leaves a device cookie
(app/services/accounts/devices.py), so this browser can log in to that account while others are locked out of it.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode, urlparse

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse, Response

from app.core.models import User
from app.services.accounts import devices, resets, sessions, throttle
from app.services.accounts import users as user_service
from app.services.classes import scopes
from app.services.errors import FieldError
from app.web.csrf import SESSION_KEY
from app.web.deps import OptionalUser, SessionDep, csrf_protect
from app.web.templates import render

router = APIRouter(dependencies=[Depends(csrf_protect)])


def _safe_next(target: str | None) -> str:
    """Only same-site relative paths: never redirect to another host after login."""
    if not target:
        return "/"
    parsed = urlparse(target)
    if parsed.scheme or parsed.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def _landing(db, user, target: str) -> str:
    """Where a login goes: the page that asked for it, else the queue of the one class a grader grades in (their
    work), or the home page. Instructors land on the home page: they run the class more than they grade."""
    if target != "/":
        return target
    staff = scopes.staff_scopes(db, user=user)
    if len(staff) == 1 and staff[0].role == "grader":
        return f"/classes/{staff[0].klass.slug}/grader"
    return target


def _client(request: Request) -> str | None:
    # uvicorn puts the client of X-Forwarded-For here only from a proxy in COURSE_FORWARDED_ALLOW_IPS (none by default).
    return request.client.host if request.client else None


def start_session(request: Request, db: SessionDep, user: User) -> None:
    """Log this browser in as `user`: a new session row, a new cookie (and so a new CSRF token)."""
    old = request.session.get(SESSION_KEY)
    if isinstance(old, str):
        sessions.end(db, token=old)  # whoever was logged in here before is logged out, not left dangling
    request.session.clear()
    settings = request.app.state.settings
    request.session[SESSION_KEY] = sessions.start(
        db,
        user=user,
        user_agent=request.headers.get("user-agent", ""),
        idle_s=settings.session_idle_s,
        max_s=settings.session_max_s,
    )


def remember_device(request: Request, response: Response, cookie: str) -> Response:
    """Send the renewed device cookie: HttpOnly (no script needs it), Lax like the session cookie."""
    settings = request.app.state.settings
    response.set_cookie(
        devices.COOKIE,
        cookie,
        max_age=devices.MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="lax",
        secure=settings.secure_cookies,
    )
    return response


def end_session(request: Request, db: SessionDep) -> None:
    token = request.session.get(SESSION_KEY)
    if isinstance(token, str):
        sessions.end(db, token=token)
    request.session.clear()


@router.get("/register")
def register_form(request: Request, user: OptionalUser):
    return render(request, "auth/register.html", {"errors": {}, "values": {}})


@router.post("/register")
def register(
    request: Request,
    db: SessionDep,
    email: Annotated[str, Form(max_length=254)] = "",
    display_name: Annotated[str, Form(max_length=200)] = "",
    password: Annotated[str, Form(max_length=1000)] = "",
):
    values = {"email": email, "display_name": display_name}
    settings = request.app.state.settings
    try:
        user = user_service.register(
            db,
            email=email,
            password=password,
            display_name=display_name,
            address=_client(request),
            per_address=settings.registrations_per_address,
        )
    except throttle.Throttled as exc:
        return _too_many(request, "auth/register.html", {"errors": {}, "values": values}, exc)
    except user_service.UserError as exc:
        return render(request, "auth/register.html", {"errors": exc.errors, "values": values}, status_code=400)
    start_session(request, db, user)
    cookie = devices.remember(request.cookies.get(devices.COOKIE), email=user.email, secret=settings.secret_key)
    return remember_device(request, RedirectResponse("/", status_code=303), cookie)


NOTICES = {
    "reset": "Your new password is set and every session of your account was logged out. Log in with it now.",
    "everywhere": "You were logged out everywhere: every browser and device has to log in again.",
}


@router.get("/login")
def login_form(request: Request, user: OptionalUser, next: str = "/", notice: str = "", email: str = ""):
    ctx = {"error": None, "email": email[:254], "next": _safe_next(next), "notice": NOTICES.get(notice)}
    return render(request, "auth/login.html", ctx)


def _too_many(request: Request, template: str, ctx: dict, refusal: throttle.Throttled) -> Response:
    response = render(request, template, {**ctx, "error": refusal.message}, status_code=429)
    response.headers["Retry-After"] = str(refusal.wait_s)
    return response


@router.post("/login")
def login(
    request: Request,
    db: SessionDep,
    email: Annotated[str, Form(max_length=254)] = "",
    password: Annotated[str, Form(max_length=1000)] = "",
    next: Annotated[str, Form(max_length=500)] = "/",
):
    ctx = {"email": email, "next": _safe_next(next)}
    attempt = user_service.login(
        db,
        email=email,
        password=password,
        address=_client(request),
        device_cookie=request.cookies.get(devices.COOKIE),
        secret=request.app.state.settings.secret_key,
    )
    if attempt.throttled:
        return _too_many(request, "auth/login.html", ctx, throttle.Throttled(attempt.wait_s))
    if attempt.user is None:
        error = "That email and password do not match an account."
        if attempt.wait_s:
            error += f" Wait {throttle.in_words(attempt.wait_s)} before the next try."
        response = render(request, "auth/login.html", {**ctx, "error": error}, status_code=400)
        if attempt.wait_s:
            response.headers["Retry-After"] = str(attempt.wait_s)
        return response
    start_session(request, db, attempt.user)
    response = RedirectResponse(_landing(db, attempt.user, _safe_next(next)), status_code=303)
    return remember_device(request, response, attempt.device_cookie) if attempt.device_cookie else response


@router.post("/logout")
def logout(request: Request, db: SessionDep):
    end_session(request, db)
    return RedirectResponse("/login", status_code=303)


# ---------------------------------------------------------------- a reset link, opened by its user


@router.get("/reset/{token}")
def reset_form(request: Request, token: str, db: SessionDep, user: OptionalUser):
    row = resets.find(db, token=token)
    ctx = {"token": token, "valid": row is not None, "errors": {}}
    return render(request, "auth/reset.html", ctx, status_code=200 if row else 404)


@router.post("/reset/{token}")
def reset(
    request: Request,
    token: str,
    db: SessionDep,
    new_password: Annotated[str, Form(max_length=1000)] = "",
    confirm_password: Annotated[str, Form(max_length=1000)] = "",
):
    if new_password != confirm_password:
        ctx = {"token": token, "valid": True, "errors": {"confirm_password": "the two passwords differ"}}
        return render(request, "auth/reset.html", ctx, status_code=400)
    try:
        user = resets.use(db, token=token, new_password=new_password)
    except FieldError as exc:  # a bad new password (UserError) or a dead link (ResetError)
        ctx = {"token": token, "valid": exc.field != "token", "errors": {exc.field: exc.message}}
        return render(request, "auth/reset.html", ctx, status_code=400 if exc.field != "token" else 404)
    end_session(request, db)
    return RedirectResponse(f"/login?notice=reset&{urlencode({'email': user.email})}", status_code=303)
