"""The learner's account page: personal API tokens for scripts (create, list, revoke)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request

from app.deps import CurrentUser, DbInt, SessionDep, csrf_protect
from app.services import tokens
from app.web import render

router = APIRouter(dependencies=[Depends(csrf_protect)])


def _page(request, db, user, **extra):
    ctx = {"tokens": tokens.list_for(db, user=user), "new_token": None, "error": None, **extra}
    return render(request, "account/index.html", ctx, status_code=400 if ctx["error"] else 200)


@router.get("/account")
def account(request: Request, user: CurrentUser, db: SessionDep):
    return _page(request, db, user)


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
