"""Users and roles. Functions take keyword arguments and return None or raise ValueError with a
message naming the field; they know nothing about HTTP."""

from __future__ import annotations

import re

from sqlalchemy import bindparam, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, joinedload

from app.models import ROLES, User, UserRole
from app.security import hash_password, verify_password
from app.services.errors import FieldError

EMAIL_RE = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")
MIN_PASSWORD = 8
MAX_PASSWORD = 256


class UserError(FieldError):
    pass


def normalise_email(email: str) -> str:
    return (email or "").strip().lower()


def check_new_user(*, email: str, password: str, display_name: str, roles: list[str]) -> None:
    if not EMAIL_RE.match(email) or len(email) > 254:
        raise UserError("email", "enter an address like name@example.org")
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise UserError("password", f"use {MIN_PASSWORD} to {MAX_PASSWORD} characters")
    if not 1 <= len(display_name.strip()) <= 80:
        raise UserError("display_name", "use 1 to 80 characters")
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise UserError("roles", f"got {', '.join(bad) or 'none'}; allowed: {', '.join(ROLES)}")


# Built once: every request with a session runs it, and constructing the statement costs more than running it.
_USER_WITH_ROLES = select(User).options(joinedload(User.role_rows)).where(User.id == bindparam("user_id"))


def get(db: Session, *, user_id: int) -> User | None:
    """The user with their roles, in one round trip (every request that carries a session asks this)."""
    return db.scalars(_USER_WITH_ROLES, {"user_id": user_id}).unique().one_or_none()


def get_by_email(db: Session, *, email: str) -> User | None:
    return db.scalar(select(User).where(User.email == normalise_email(email)))


def create_user(
    db: Session, *, email: str, password: str, display_name: str = "", roles: list[str] | None = None
) -> User:
    """Create and commit a user; raises UserError (field named) for bad input or a taken email."""
    email = normalise_email(email)
    roles = sorted(set(roles or ["learner"]))
    display_name = (display_name or email.split("@")[0]).strip()
    check_new_user(email=email, password=password, display_name=display_name, roles=roles)
    if get_by_email(db, email=email):
        raise UserError("email", "an account with this address already exists; log in instead")
    user = User(email=email, display_name=display_name, password_hash=hash_password(password))
    user.role_rows = [UserRole(role=r) for r in roles]
    db.add(user)
    try:
        db.commit()
    except IntegrityError:  # a concurrent registration won the race
        db.rollback()
        raise UserError("email", "an account with this address already exists; log in instead") from None
    return user


def add_roles(db: Session, *, user: User, roles: list[str]) -> User:
    bad = [r for r in roles if r not in ROLES]
    if bad:
        raise UserError("roles", f"got {', '.join(bad)}; allowed: {', '.join(ROLES)}")
    for role in set(roles) - user.roles:
        user.role_rows.append(UserRole(role=role))
    db.commit()
    return user


def authenticate(db: Session, *, email: str, password: str) -> User | None:
    user = get_by_email(db, email=email)
    if user is None or not verify_password(user.password_hash, password):
        return None
    return user


def count_users(db: Session) -> int:
    return db.scalar(select(func.count()).select_from(User)) or 0
