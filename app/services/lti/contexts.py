"""LMS courses and classes: which class an LMS course is, and what its roles make a person there.

    class_role(lti_roles)                       -> "instructor" | "grader" | "learner" | None (the LIS vocabulary)
    context_for(db, platform=…, claim=…)        -> LtiContext: the LMS course of a launch, with a class of its own the
                                                   first time it is seen
    seen(db, context=…, user_id=…, role=…)      a launch or a roster sync saw the person in the course: they hold the
                                                   mapped role in its class (and in that class only)
    left(db, context=…, user_ids=…)             the roster no longer lists them: marked as left, their work kept
    members(db, context=…)                      -> {user_id: role}: whom the course's grades and scores may go to
    map_context(db, context=…, klass=…, by=…)   a site admin maps an LMS course to another class (recorded)
    contexts(db)                                 every LMS course seen, with its class

Why the role mapping is what it is (LTI 1.3 core, appendix A.2; LIS v2 membership roles):
- Only *context* roles count: the course's own (`…/membership#Instructor`, the simple name `Instructor`). Institution
  and system roles (`…/institution/person#Instructor`, `…/system/person#Administrator`) say what a person is at the
  university, not in this course, and give nothing here.
- `Instructor` -> instructor; its sub-roles `TeachingAssistant` and `Grader` -> grader (a TA is sent `Instructor`
  too by some LMSs, Canvas among them: the TA role wins); `Learner` and its sub-roles -> learner.
- `Mentor` (a parent, an advisor, an auditor), `ContentDeveloper`, `Administrator`, `Manager`, `Member`, `Officer`,
  and an empty role list (LTI allows it: someone the LMS lets in without a role) -> no role. Such a person can open
  the lesson the link shows, but is not on the class's roster, and no grade or practice score is ever sent for them.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.models import ClassMember, CourseClass, LtiAudit, LtiContext, LtiContextMember, LtiPlatform, User, utcnow
from app.services.classes import registry as class_registry
from app.services.errors import FieldError

LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
MEMBERSHIP = LIS + "membership"
# The LMS may change a class role it gave (or that the move to classes gave an LMS account); one the class's staff,
# a site admin or an operator set stays theirs.
LMS_MAY_CHANGE = ("lms", "migration", "register", "invite")


def _context_role(role: str) -> tuple[str, str] | None:
    """(principal, sub-role) of a context role: full URI, sub-role URI or simple name; None for any other role."""
    if role.startswith(MEMBERSHIP + "#"):
        return role[len(MEMBERSHIP) + 1 :], ""
    if role.startswith(MEMBERSHIP + "/") and "#" in role:
        principal, sub = role[len(MEMBERSHIP) + 1 :].split("#", 1)
        return principal, sub
    if "/" not in role and ":" not in role and "#" not in role:  # a simple name (LTI 1.3 A.2.3.1)
        return role, ""
    return None  # institution, system or another vocabulary


def class_role(lti_roles: object) -> str | None:
    """The class role of an LMS role list; None when it names none that gives one (see the module's docstring)."""
    if not isinstance(lti_roles, list):
        return None
    found = {parsed for r in lti_roles if isinstance(r, str) and (parsed := _context_role(r.strip()))}
    principals = {p for p, _ in found}
    subs = {(p, s) for p, s in found if s}
    if (
        ("Instructor", "TeachingAssistant") in subs
        or ("Instructor", "Grader") in subs
        or "TeachingAssistant" in principals
    ):
        return "grader"
    if "Instructor" in principals:
        return "instructor"
    if "Learner" in principals:
        return "learner"
    return None


def _slug_for(platform: LtiPlatform, context_id: str) -> str:
    return f"lms-{platform.id}-{hashlib.sha256(context_id.encode()).hexdigest()[:10]}"


def context_for(db: Session, *, platform: LtiPlatform, claim: object) -> LtiContext:
    """The LMS course a launch comes from; a course seen for the first time gets a class of its own (every lesson
    offered, nobody in it yet). FieldError("context") when the launch names no course."""
    if not isinstance(claim, dict) or not isinstance(claim.get("id"), str) or not claim["id"].strip():
        raise FieldError("context", "the launch names no LMS course (its context claim has no id)")
    context_id = claim["id"].strip()[:255]
    title = str(claim.get("title") or claim.get("label") or "")[:255]
    row = db.scalar(
        select(LtiContext).where(LtiContext.platform_id == platform.id, LtiContext.context_id == context_id)
    )
    if row is not None:
        if title and row.title != title:
            row.title = title
            db.commit()
        return row
    klass = CourseClass(
        slug=_slug_for(platform, context_id),
        title=(title or f"{platform.name}: course {context_id}")[:120],
        term="",
        lesson_ids=None,
        invite_code=class_registry.new_code(),
        open_registration=False,
    )
    existing = class_registry.by_slug(db, slug=klass.slug)
    if existing is not None:  # made by a launch that lost the race below, or kept after its context was remapped
        klass = existing
    else:
        db.add(klass)
        db.flush()
    row = LtiContext(platform_id=platform.id, context_id=context_id, title=title, class_id=klass.id)
    db.add(row)
    try:
        db.commit()
    except IntegrityError:  # two first launches from one course at once: the other request's rows stand
        db.rollback()
        found = db.scalar(
            select(LtiContext).where(LtiContext.platform_id == platform.id, LtiContext.context_id == context_id)
        )
        if found is None:
            raise
        return found
    return row


def class_of(db: Session, context: LtiContext) -> CourseClass:
    klass = db.get(CourseClass, context.class_id)
    assert klass is not None, "a context's class cascades with it"
    return klass


def seen(db: Session, *, context: LtiContext, user_id: int, role: str | None, commit: bool = True) -> bool:
    """The person is in the LMS course now, with the mapped role: recorded for the course, and their role in its
    class set where the LMS may set it. Returns whether their class role changed."""
    row = db.scalar(
        select(LtiContextMember).where(
            LtiContextMember.lti_context_id == context.id, LtiContextMember.user_id == user_id
        )
    )
    if row is None:
        row = LtiContextMember(lti_context_id=context.id, user_id=user_id)
        db.add(row)
    row.role, row.seen_at, row.left_at = role, utcnow(), None
    changed = False
    if role is not None:
        klass = class_of(db, context)
        have = class_registry.member(db, class_id=klass.id, user_id=user_id)
        if have is None or have.via in LMS_MAY_CHANGE or have.left_at is not None:
            _, changed = class_registry.enrol(db, klass=klass, user_id=user_id, role=role, via="lms", commit=False)
    if commit:
        db.commit()
    else:
        db.flush()
    return changed


def left(db: Session, *, context: LtiContext, user_ids: set[int]) -> int:
    """These people are no longer in the LMS course: marked as left there and, where no other course of the class
    still lists them and the LMS put them in the class, in the class too. Their work stays. Returns how many left."""
    klass = class_of(db, context)
    n = 0
    for row in db.scalars(
        select(LtiContextMember).where(
            LtiContextMember.lti_context_id == context.id,
            LtiContextMember.user_id.in_(sorted(user_ids) or [0]),
            LtiContextMember.left_at.is_(None),
        )
    ):
        row.left_at = utcnow()
        n += 1
        elsewhere = db.scalar(
            select(LtiContextMember.id)
            .join(LtiContext, LtiContext.id == LtiContextMember.lti_context_id)
            .where(
                LtiContext.class_id == klass.id,
                LtiContext.id != context.id,
                LtiContextMember.user_id == row.user_id,
                LtiContextMember.left_at.is_(None),
            )
            .limit(1)
        )
        membership = class_registry.member(db, class_id=klass.id, user_id=row.user_id)
        if elsewhere is None and membership is not None and membership.via in LMS_MAY_CHANGE:
            class_registry.mark_left(db, klass=klass, user_id=row.user_id)
    db.flush()
    return n


def members(db: Session, *, context: LtiContext) -> dict[int, str | None]:
    """{user id: role} of the people the LMS course lists now (not those who left)."""
    q = select(LtiContextMember.user_id, LtiContextMember.role).where(
        LtiContextMember.lti_context_id == context.id, LtiContextMember.left_at.is_(None)
    )
    return {uid: role for uid, role in db.execute(q)}


def learners(db: Session, *, context: LtiContext) -> set[int]:
    """Whom a link of this LMS course may send grades and practice scores for: people the course lists now who are
    learners of its class now. Never a Mentor, a role-less launch, a member who left, or anyone of another course."""
    klass = class_of(db, context)
    q = (
        select(LtiContextMember.user_id)
        .join(
            ClassMember,
            (ClassMember.user_id == LtiContextMember.user_id) & (ClassMember.class_id == klass.id),
        )
        .where(
            LtiContextMember.lti_context_id == context.id,
            LtiContextMember.left_at.is_(None),
            ClassMember.role == "learner",
            ClassMember.left_at.is_(None),
        )
    )
    return set(db.scalars(q))


def contexts(db: Session) -> list[tuple[LtiContext, CourseClass, LtiPlatform]]:
    q = (
        select(LtiContext, CourseClass, LtiPlatform)
        .join(CourseClass, CourseClass.id == LtiContext.class_id)
        .join(LtiPlatform, LtiPlatform.id == LtiContext.platform_id)
        .order_by(LtiPlatform.id, LtiContext.id)
    )
    return [(c, k, p) for c, k, p in db.execute(q)]


def map_context(db: Session, *, context: LtiContext, klass: CourseClass, by: User | None, via: str = "web") -> None:
    """Map an LMS course to another class: launches and roster syncs from it give roles in that class from now on.
    Roles people already hold in the old class stay there (a class's staff take them out)."""
    platform = db.get(LtiPlatform, context.platform_id)
    assert platform is not None
    before = db.get(CourseClass, context.class_id)
    db.add(
        LtiAudit(
            action="context-mapped",
            platform_id=platform.id,
            issuer=platform.issuer,
            client_id=platform.client_id,
            by_id=by.id if by else None,
            by_email=by.email if by else "",
            via=via,
            before={"context_id": context.context_id, "class": before.slug if before else None},
            after={"context_id": context.context_id, "class": klass.slug},
        )
    )
    context.class_id = klass.id
    db.commit()
