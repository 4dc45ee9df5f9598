"""LTI 1.3: the course as a tool inside a university's LMS (Canvas, Moodle, Blackboard, Brightspace).

    tool_key(data_dir)                          -> ToolKey: the tool's RSA key (made once, kept 0600 in the data dir)
    register(db, name=…, issuer=…, …, by=…)     -> LtiPlatform: a site admin's or the CLI's registration, recorded
                                                   in lti_audit; changing an existing one's URLs needs replace=True
    platforms(db) / platform(db, platform_id=…)    what is registered;  audit(db): every change to it
    user_for(db, platform=…, sub=…, …)          -> (User, created): matched by (platform, `sub`), made on first launch
    remember_link(db, …) / links(db, klass=…)   the resource links launched, with their roster and grade services
    issue_ticket(db, …) / take_ticket(db, …)    one-time hand-off from a verified launch to the page it opens
    targets(db, klass=…)                        -> what a link may open: each lesson the class offers, and its lab

Which class an LMS course is, and what its roles make a person there, is app/services/lti/contexts.py. The launch
checks themselves (signature, audience, expiry, state, nonce, deployment) are pylti1p3's with our storage and the
spec's stricter ones, in app/services/lti/tool.py; the roster and gradebook calls in app/services/lti/sync.py.

The tool's private key never leaves the data dir and is never logged or shown: only its public half is
published, at /lti/jwks.json.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from app.core.models import (
    CourseClass,
    LtiAudit,
    LtiContext,
    LtiDeployment,
    LtiIdentity,
    LtiLink,
    LtiPlatform,
    LtiState,
    LtiTicket,
    User,
    utcnow,
)
from app.services.accounts import users
from app.services.errors import FieldError
from app.services.grading import grades as grading
from app.services.learning import lessons as lesson_service

KEY_FILE = Path("lti") / "tool-key.pem"
TICKET_S = 120  # a launch's hand-off is followed at once, by a click or the platform's own redirect
STATE_S = 600  # OIDC login -> launch takes seconds; ten minutes covers a slow LMS, not a replay days later


@dataclass(frozen=True)
class ToolKey:
    private_pem: str
    public_pem: str


_keys: dict[Path, ToolKey] = {}


def tool_key(data_dir: Path) -> ToolKey:
    """The tool's signing key: made on first use, written 0600 under the data dir, read once per process."""
    path = data_dir / KEY_FILE
    if path in _keys:
        return _keys[path]
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
        try:
            os.link(tmp, path)  # two processes starting at once: the first key stays, the other is dropped
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    private = serialization.load_pem_private_key(path.read_bytes(), password=None)
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _keys[path] = ToolKey(path.read_text(), public.decode())
    return _keys[path]


def _check_url(field: str, value: str) -> str:
    """A platform URL: https, or http on a loopback host only (a platform on this machine, e.g. in tests)."""
    value = value.strip()
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise FieldError(field, f"got {value!r}; expected an https:// URL from the LMS's registration page")
    if parts.scheme == "http":
        try:
            loopback = ipaddress.ip_address(parts.hostname).is_loopback
        except ValueError:
            loopback = parts.hostname == "localhost"
        if not loopback:
            raise FieldError(field, f"got {value!r}; http:// is allowed for localhost only, use https://")
    if len(value) > 500:
        raise FieldError(field, f"is {len(value)} characters long; at most 500 are allowed")
    return value


def _check_text(field: str, value: str, limit: int = 255) -> str:
    value = value.strip()
    if not value:
        raise FieldError(field, "is empty; copy it from the LMS's registration of the course")
    if len(value) > limit:
        raise FieldError(field, f"is {len(value)} characters long; at most {limit} are allowed")
    return value


def deployment_list(text: str) -> list[str]:
    """Deployment ids as typed: separated by commas, spaces or lines."""
    ids = sorted({d for d in re.split(r"[\s,]+", text) if d})
    if not ids:
        raise FieldError("deployment_ids", "is empty; give at least one deployment id (the LMS shows it per placement)")
    for d in ids:
        _check_text("deployment_ids", d)
    return ids


# What a registration says: the fields an audit row records before and after a change.
TRUSTED = ("name", "auth_login_url", "auth_token_url", "key_set_url", "auth_audience")


class RegistrationChange(FieldError):
    """An existing registration would change where the course fetches the LMS's keys or tokens: refused unless
    the admin says so (`replace`), naming what would change."""

    def __init__(self, changes: dict[str, tuple[str | None, str | None]]):
        said = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changes.items())
        super().__init__(
            "replace",
            f"this issuer and client id are registered already, and this would change {said}. Whoever controls the "
            "key set URL can sign in as any of the LMS's users here: tick “replace the registration” only when the "
            "LMS itself changed these",
        )
        self.changes = changes


def _snapshot(row: LtiPlatform) -> dict:
    return {k: getattr(row, k) for k in TRUSTED} | {"deployments": sorted(d.deployment_id for d in row.deployments)}


def register(
    db: Session,
    *,
    name: str,
    issuer: str,
    client_id: str,
    auth_login_url: str,
    auth_token_url: str,
    key_set_url: str,
    deployment_ids: list[str],
    auth_audience: str = "",
    by: User | None = None,
    via: str = "web",
    replace: bool = False,
) -> LtiPlatform:
    """Register a platform, or add deployment ids to the one with this issuer and client id; every change is
    recorded in lti_audit. Changing an existing registration's name or URLs needs `replace` (RegistrationChange
    otherwise). Raises FieldError naming the field. Only a site admin (or an operator's shell) calls this."""
    issuer = _check_text("issuer", issuer)
    client_id = _check_text("client_id", client_id)
    row = db.scalars(
        select(LtiPlatform)
        .options(selectinload(LtiPlatform.deployments))
        .where(LtiPlatform.issuer == issuer, LtiPlatform.client_id == client_id)
    ).one_or_none()
    fields: dict[str, str | None] = {
        "name": _check_text("name", name, 80),
        "auth_login_url": _check_url("auth_login_url", auth_login_url),
        "auth_token_url": _check_url("auth_token_url", auth_token_url),
        "key_set_url": _check_url("key_set_url", key_set_url),
        "auth_audience": auth_audience.strip() or None,
    }
    if not deployment_ids:
        raise FieldError("deployment_ids", "is empty; give at least one deployment id")
    before: dict = {}
    if row is None:
        action = "registered"
        row = LtiPlatform(issuer=issuer, client_id=client_id, created_by_id=by.id if by else None)
        row.deployments = []
        db.add(row)
    else:
        before = _snapshot(row)
        changes = {k: (getattr(row, k), v) for k, v in fields.items() if getattr(row, k) != v}
        if changes and not replace:
            raise RegistrationChange(changes)
        action = "changed" if changes else "deployments"
    for key, value in fields.items():
        setattr(row, key, value)
    have = {d.deployment_id for d in row.deployments}
    added = [d for d in deployment_ids if d not in have]
    row.deployments.extend(LtiDeployment(deployment_id=d) for d in added)
    db.flush()
    after = _snapshot(row)
    if after != before:
        db.add(
            LtiAudit(
                action=action,
                platform_id=row.id,
                issuer=issuer,
                client_id=client_id,
                by_id=by.id if by else None,
                by_email=by.email if by else "",
                via=via,
                before=before,
                after=after,
            )
        )
    db.commit()
    return row


def audit(db: Session, *, limit: int = 200) -> list[LtiAudit]:
    return list(db.scalars(select(LtiAudit).order_by(LtiAudit.id.desc()).limit(limit)))


def platforms(db: Session) -> list[LtiPlatform]:
    return list(db.scalars(select(LtiPlatform).options(selectinload(LtiPlatform.deployments)).order_by(LtiPlatform.id)))


def platform(db: Session, *, platform_id: int) -> LtiPlatform | None:
    return db.get(LtiPlatform, platform_id)


def find_platform(db: Session, *, issuer: str, client_id: str | None) -> LtiPlatform | None:
    """The registration of (issuer, client id); without a client id (an OIDC login may omit it) the issuer's
    only registration, or None when it has several."""
    q = select(LtiPlatform).where(LtiPlatform.issuer == issuer)
    if client_id:
        q = q.where(LtiPlatform.client_id == client_id)
    rows = db.scalars(q.limit(2)).all()
    return rows[0] if len(rows) == 1 else None


def has_deployment(db: Session, *, platform_id: int, deployment_id: str) -> bool:
    q = select(LtiDeployment.id).where(
        LtiDeployment.platform_id == platform_id, LtiDeployment.deployment_id == deployment_id
    )
    return db.scalar(q) is not None


# --- server-side launch state (pylti1p3's session and cookie storage) ---------------------------------------


def state_put(db: Session, *, key: str, value: object, ttl_s: int = STATE_S) -> None:
    db.merge(LtiState(key=key, value=value, expires_at=utcnow() + timedelta(seconds=ttl_s)))
    db.commit()


def state_get(db: Session, *, key: str) -> object | None:
    row = db.get(LtiState, key)
    if row is None or row.expires_at < utcnow():
        return None
    return row.value


def state_take(db: Session, *, key: str) -> object | None:
    """Read and delete in one step, so a second launch with the same state or nonce finds nothing."""
    row = db.get(LtiState, key)
    if row is None:
        return None
    taken = db.execute(delete(LtiState).where(LtiState.key == key)).rowcount  # type: ignore[attr-defined]
    db.commit()
    if not taken or row.expires_at < utcnow():  # another request took it first, or it ran out
        return None
    return row.value


def purge_states(db: Session) -> None:
    db.execute(delete(LtiState).where(LtiState.expires_at < utcnow()))
    db.commit()


# --- users and roles ---------------------------------------------------------------------------------------


_PLAIN_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def _new_email(db: Session, *, platform_id: int, sub: str, email: str | None) -> str:
    """The LMS's address when it sends one that no account has; else an address that cannot receive mail."""
    address = users.normalise_email(email or "")
    if _PLAIN_EMAIL.fullmatch(address) and len(address) <= 254 and users.get_by_email(db, email=address) is None:
        return address
    return f"lti-{platform_id}-{hashlib.sha256(sub.encode()).hexdigest()[:16]}@lti.invalid"


def user_for(
    db: Session, *, platform: LtiPlatform, sub: str, name: str = "", email: str | None = None
) -> tuple[User, bool]:
    """The course user of (platform, sub), created when new, with no site role: what the LMS says of them is a role
    in the class of its course (app/services/lti/contexts.py), never more. Matching is by `sub` alone: an email the
    LMS sends is never used to find an existing account, or a platform could sign in as anyone who registered
    here."""
    identity = db.scalars(
        select(LtiIdentity).where(LtiIdentity.platform_id == platform.id, LtiIdentity.sub == sub)
    ).one_or_none()
    created = identity is None
    if identity is None:
        display = (name or "").strip()[:80] or "LMS user"
        user = users.create_user(
            db,
            email=_new_email(db, platform_id=platform.id, sub=sub, email=email),
            password=secrets.token_urlsafe(32),  # never told to anyone: the LMS is how this account logs in
            display_name=display,
        )
        db.add(LtiIdentity(platform_id=platform.id, sub=sub, user_id=user.id))
        try:
            db.commit()
        except IntegrityError:  # two first launches at once: the other request's identity stands
            db.rollback()
            identity = db.scalars(
                select(LtiIdentity).where(LtiIdentity.platform_id == platform.id, LtiIdentity.sub == sub)
            ).one()
            created = False
        else:
            return user, True
    found = db.get(User, identity.user_id)
    assert found is not None  # the identity's foreign key cascades with the user
    return found, created


def identities(db: Session, *, platform_id: int) -> list[LtiIdentity]:
    return list(db.scalars(select(LtiIdentity).where(LtiIdentity.platform_id == platform_id)))


def let_grade(db: Session, *, klass: CourseClass, user: User, role: str | None, target: str) -> None:
    """A TA launched into a lesson grades that lesson's reports in the class (graders are assigned per lesson)."""
    if role == "grader":
        grading.assign(db, klass=klass, grader=user, lesson_id=target.split(":", 1)[1])


# --- what a link opens -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    key: str  # "lesson:<id>" | "lab:<lesson id>"
    title: str
    path: str  # where the launch lands


def targets(db: Session, *, klass: CourseClass | None) -> list[Target]:
    """What a link in an LMS course may open: the lessons its class offers (None: any class), and their lab
    reports."""
    out = []
    for lesson, _ in lesson_service.catalogue(db):
        if klass is not None and not klass.offers(lesson.id):
            continue
        out.append(Target(f"lesson:{lesson.id}", lesson.title, f"/lessons/{lesson.id}"))
        if lesson.lab is not None:
            out.append(Target(f"lab:{lesson.id}", f"Lab report: {lesson.title}", f"/lessons/{lesson.id}/report"))
    return out


def target(db: Session, key: str, *, klass: CourseClass | None) -> Target | None:
    return next((t for t in targets(db, klass=klass) if t.key == key), None)


def remember_link(
    db: Session,
    *,
    platform: LtiPlatform,
    deployment_id: str,
    resource_link_id: str,
    target_key: str,
    context: LtiContext,
    nrps: dict | None,
    ags: dict | None,
) -> LtiLink:
    """Record (or refresh) a resource link and the services its latest launch offered."""
    row = db.scalars(
        select(LtiLink).where(LtiLink.platform_id == platform.id, LtiLink.resource_link_id == resource_link_id)
    ).one_or_none()
    if row is None:
        row = LtiLink(platform_id=platform.id, resource_link_id=resource_link_id)
        db.add(row)
    row.deployment_id = deployment_id
    row.target = target_key
    row.context_id = context.context_id
    row.context_title = context.title
    row.lti_context_id = context.id
    row.memberships_url = _url_or_none((nrps or {}).get("context_memberships_url"))
    row.lineitem_url = _url_or_none((ags or {}).get("lineitem"))
    row.lineitems_url = _url_or_none((ags or {}).get("lineitems"))
    scopes = (ags or {}).get("scope", [])
    row.ags_scopes = [s for s in scopes if isinstance(s, str)][:20] if isinstance(scopes, list) else []
    row.updated_at = utcnow()
    db.commit()
    return row


def _url_or_none(value: object) -> str | None:
    return value[:500] if isinstance(value, str) and value.startswith(("https://", "http://")) else None


def links(db: Session, *, klass: CourseClass | None = None) -> list[LtiLink]:
    """The links launched so far; with `klass`, those placed in an LMS course of that class."""
    q = select(LtiLink).order_by(LtiLink.platform_id, LtiLink.id)
    if klass is not None:
        q = q.join(LtiContext, LtiContext.id == LtiLink.lti_context_id).where(LtiContext.class_id == klass.id)
    return list(db.scalars(q))


def link_of(db: Session, *, platform_id: int, resource_link_id: str) -> LtiLink | None:
    q = select(LtiLink).where(LtiLink.platform_id == platform_id, LtiLink.resource_link_id == resource_link_id)
    return db.scalars(q).one_or_none()


def link_context(db: Session, link: LtiLink) -> LtiContext | None:
    return db.get(LtiContext, link.lti_context_id) if link.lti_context_id is not None else None


def link(db: Session, *, link_id: int) -> LtiLink | None:
    return db.get(LtiLink, link_id)


# --- one-time hand-offs ------------------------------------------------------------------------------------


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue_ticket(db: Session, *, kind: str, user: User, target: str) -> str:
    token = secrets.token_urlsafe(32)
    db.add(
        LtiTicket(
            token_hash=_digest(token),
            kind=kind,
            user_id=user.id,
            target=target,
            expires_at=utcnow() + timedelta(seconds=TICKET_S),
        )
    )
    db.execute(delete(LtiTicket).where(LtiTicket.expires_at < utcnow() - timedelta(days=1)))
    db.commit()
    return token


def take_ticket(db: Session, *, kind: str, token: str) -> LtiTicket | None:
    """The ticket, marked used in the same conditional update: a second use (or one after expiry) is None."""
    now = utcnow()
    used = db.execute(
        update(LtiTicket)
        .where(
            LtiTicket.token_hash == _digest(token),
            LtiTicket.kind == kind,
            LtiTicket.used_at.is_(None),
            LtiTicket.expires_at > now,
        )
        .values(used_at=now)
    ).rowcount  # type: ignore[attr-defined]
    db.commit()
    if not used:
        return None
    return db.scalars(select(LtiTicket).where(LtiTicket.token_hash == _digest(token))).one()
