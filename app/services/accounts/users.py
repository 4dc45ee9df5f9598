"""Users and roles, logging in (with the failed-login throttle), and account changes. Functions take keyword
arguments and return None or raise UserError naming the field; they know nothing about HTTP."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from sqlalchemy import bindparam, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, joinedload

from app.core import passwords
from app.core.models import ROLES, User, UserRole
from app.services.accounts import devices, sessions, throttle
from app.services.classes import registry as class_registry
from app.services.errors import FieldError

TAKEN = "an account with this address already exists: log in, or ask your instructor for a password-reset link"
EMAIL_RE = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")
MIN_PASSWORD = 8
MAX_PASSWORD = 256


class UserError(FieldError):
    """Bad input: `field` and `message` name the first problem, `errors` every field's (a form shows them all
    at once, next to each field)."""

    def __init__(self, field: str, message: str, errors: dict[str, str] | None = None):
        super().__init__(field, message)
        self.errors = errors or {field: message}


def normalise_email(email: str) -> str:
    return (email or "").strip().lower()


def check_password(password: str, field: str = "password") -> None:
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise UserError(field, f"use {MIN_PASSWORD} to {MAX_PASSWORD} characters (you gave {len(password)})")


def check_display_name(display_name: str) -> None:
    if not 1 <= len(display_name.strip()) <= 80:
        raise UserError("display_name", f"use 1 to 80 characters (you gave {len(display_name.strip())})")
    # Control and format characters (U+202E turns the text after it around, U+200B is invisible) would let one
    # learner's name read as another's in a grader's queue, a roster or an export.
    hidden = sorted({f"U+{ord(c):04X}" for c in display_name if unicodedata.category(c) in ("Cc", "Cf")})
    if hidden:
        raise UserError(
            "display_name",
            f"control and invisible or direction-changing characters ({', '.join(hidden[:5])}) are not allowed; "
            "use letters, digits, spaces and punctuation",
        )


def check_new_user(*, email: str, password: str, display_name: str, roles: list[str]) -> None:
    """Every problem of a new account at once (UserError.errors), not only the first."""
    problems: dict[str, str] = {}
    if not EMAIL_RE.match(email) or len(email) > 254:
        problems["email"] = "enter an address like name@example.org"
    for check in (lambda: check_password(password), lambda: check_display_name(display_name)):
        try:
            check()
        except UserError as exc:
            problems[exc.field] = exc.message
    bad = [r for r in roles if r not in ROLES]
    if bad:
        problems["roles"] = (
            f"got {', '.join(bad)}; site roles are {', '.join(ROLES)} (learner, grader and instructor are roles in "
            "a class)"
        )
    if problems:
        field, message = next(iter(problems.items()))
        raise UserError(field, message, problems)


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
    """Create and commit a user with these site roles (none by default: what a person does with learners is a role
    in a class); raises UserError (field named) for bad input or a taken email."""
    email = normalise_email(email)
    roles = sorted(set(roles or []))
    display_name = (display_name or email.split("@")[0]).strip()
    check_new_user(email=email, password=password, display_name=display_name, roles=roles)
    # Hash before looking the email up: a taken address then costs what a new account costs, so the
    # response time does not answer "is this email registered?" on its own.
    password_hash = passwords.hash_password(password)
    if get_by_email(db, email=email):
        raise UserError("email", TAKEN)
    user = User(email=email, display_name=display_name, password_hash=password_hash)
    user.role_rows = [UserRole(role=r) for r in roles]
    db.add(user)
    try:
        db.commit()
    except IntegrityError:  # a concurrent registration won the race
        db.rollback()
        raise UserError("email", TAKEN) from None
    return user


def register(
    db: Session, *, email: str, password: str, display_name: str, address: str | None, per_address: int = 0
) -> User:
    """Self-registration: the new account learns in every class open to registration (class_registry.join_open).
    A taken address must be refused (registration logs the new account in, and there is no mail round trip to hide
    behind), so each such refusal counts as a failed login from the client address: probing /register for accounts
    is throttled like guessing passwords. At most
    `per_address` accounts are created from one address per throttle.REGISTRATION_WINDOW_S (0: no limit):
    each account gets its own job limits and queue turn, so a script registering dozens would take them.
    Raises throttle.Throttled (RegistrationsThrottled for that limit), or UserError naming the field."""
    key = throttle.address_key(address)
    wait = throttle.wait_s(db, keys=[key])
    if wait:
        raise throttle.Throttled(wait)
    if per_address:
        wait = throttle.take_registration(db, address=key, limit=per_address)
        if wait:
            raise throttle.RegistrationsThrottled(wait, per_address)
    try:
        user = create_user(db, email=email, password=password, display_name=display_name)
    except UserError as exc:
        if per_address:
            throttle.give_back_registration(db, address=key)  # nothing was created
        if exc.message == TAKEN:
            throttle.failed_address(db, address=key, account=throttle.account_key(normalise_email(email)))
        raise
    class_registry.join_open(db, user_id=user.id)
    return user


def add_roles(db: Session, *, user: User, roles: list[str]) -> list[str]:
    """Give `user` these site roles too; returns the ones they did not have yet (sorted)."""
    bad = [r for r in roles if r not in ROLES]
    if bad:
        raise UserError("roles", f"got {', '.join(bad)}; site roles are {', '.join(ROLES)}")
    added = sorted(set(roles) - user.roles)
    for role in added:
        user.role_rows.append(UserRole(role=role))
    db.commit()
    return added


def remove_roles(db: Session, *, user: User, roles: list[str]) -> list[str]:
    """Take these site roles from `user`; returns the ones they had (sorted)."""
    gone = sorted(set(roles) & user.roles)
    user.role_rows = [r for r in user.role_rows if r.role not in gone]
    db.commit()
    return gone


def set_password(db: Session, *, user: User, password: str) -> int:
    """Set a password chosen for the user (an operator's reset: no current password asked) and end every session
    of theirs, as a reset link does; returns how many sessions ended."""
    check_password(password)
    user.password_hash = passwords.hash_password(password)
    db.commit()
    return sessions.end_all(db, user=user)


def authenticate(db: Session, *, email: str, password: str) -> User | None:
    """The user if the password is theirs. An unknown email is checked against a dummy hash, so both
    answers take one argon2 verification."""
    user = get_by_email(db, email=email)
    if user is None:
        passwords.verify_password(passwords.dummy_hash(), password)
        return None
    return user if passwords.verify_password(user.password_hash, password) else None


@dataclass(frozen=True)
class Login:
    """What a login attempt came to: the user, or no user and how long the client must wait (0: not at all)."""

    user: User | None
    wait_s: int = 0
    throttled: bool = False  # refused without checking the password: too many recent failures
    device_cookie: str | None = None  # after a success: the browser's device cookie, renewed for this account


def login(
    db: Session, *, email: str, password: str, address: str | None, device_cookie: str | None = None, secret: str
) -> Login:
    """Check the throttle, then the password.

    A browser whose device cookie vouches for this account (it logged in to it before; app/services/accounts/devices.py)
    is judged by its own failures alone: guesses from elsewhere, which lock the account and their address, do
    not lock its owner out. Any other client waits on the account's and the address's locks and counts its
    failure against both (the address by distinct accounts). A success forgets the account's failures and
    renews the device cookie."""
    email = normalise_email(email)
    account = throttle.account_key(email)
    device = devices.trusted(device_cookie, email=email, secret=secret)
    keys = [throttle.device_key(device)] if device else [account, throttle.address_key(address)]
    wait = throttle.wait_s(db, keys=keys)
    if wait:
        return Login(None, wait, throttled=True)
    user = authenticate(db, email=email, password=password)
    if user is None:
        if device:
            return Login(None, throttle.failed(db, keys=keys))
        waits = throttle.failed(db, keys=[account]), throttle.failed_address(db, address=keys[1], account=account)
        return Login(None, max(waits))
    throttle.succeeded(db, keys=[account, *(keys if device else [])])  # never the address's count
    return Login(user, device_cookie=devices.remember(device_cookie, email=email, secret=secret))


def change_display_name(db: Session, *, user: User, display_name: str) -> None:
    check_display_name(display_name)
    user.display_name = display_name.strip()
    db.commit()


def change_password(
    db: Session, *, user: User, current: str, new: str, keep_session_id: int | None, confirm: str | None = None
) -> int:
    """Set a new password if `current` is right (and `confirm`, when given, repeats `new`); ends every other
    session of the user (returns how many). Raises UserError with every problem at once in `errors`."""
    problems: dict[str, str] = {}
    if not passwords.verify_password(user.password_hash, current):
        problems["current_password"] = "this is not your current password"
    try:
        check_password(new, "new_password")
    except UserError as exc:
        problems[exc.field] = exc.message
    if confirm is not None and confirm != new:
        problems["confirm_password"] = "the two new passwords differ: type the new password again, exactly"
    if problems:
        field, message = next(iter(problems.items()))
        raise UserError(field, message, problems)
    user.password_hash = passwords.hash_password(new)
    db.commit()
    return sessions.end_all(db, user=user, keep_id=keep_session_id)


def count_users(db: Session) -> int:
    return db.scalar(select(func.count()).select_from(User)) or 0
