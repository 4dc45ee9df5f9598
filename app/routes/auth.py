"""Register, log in, log out. Sessions live in a signed cookie; the session is rotated on login."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlparse

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse

from app.deps import OptionalUser, SessionDep, csrf_protect
from app.services import users as user_service
from app.web import render

router = APIRouter(dependencies=[Depends(csrf_protect)])


def _safe_next(target: str | None) -> str:
    """Only same-site relative paths: never redirect to another host after login."""
    if not target:
        return "/"
    parsed = urlparse(target)
    if parsed.scheme or parsed.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def _login_session(request: Request, user_id: int) -> None:
    request.session.clear()  # a fresh session (and CSRF token) after the privilege change
    request.session["user_id"] = user_id


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
    try:
        user = user_service.create_user(db, email=email, password=password, display_name=display_name)
    except user_service.UserError as exc:
        values = {"email": email, "display_name": display_name}
        return render(
            request, "auth/register.html", {"errors": {exc.field: exc.message}, "values": values}, status_code=400
        )
    _login_session(request, user.id)
    return RedirectResponse("/", status_code=303)


@router.get("/login")
def login_form(request: Request, user: OptionalUser, next: str = "/"):
    return render(request, "auth/login.html", {"error": None, "email": "", "next": _safe_next(next)})


@router.post("/login")
def login(
    request: Request,
    db: SessionDep,
    email: Annotated[str, Form(max_length=254)] = "",
    password: Annotated[str, Form(max_length=1000)] = "",
    next: Annotated[str, Form(max_length=500)] = "/",
):
    user = user_service.authenticate(db, email=email, password=password)
    if user is None:
        ctx = {"error": "That email and password do not match an account.", "email": email, "next": _safe_next(next)}
        return render(request, "auth/login.html", ctx, status_code=400)
    _login_session(request, user.id)
    return RedirectResponse(_safe_next(next), status_code=303)


@router.post("/logout")
def logout(request: Request):
    request.session.clear()
    return RedirectResponse("/login", status_code=303)
