"""Classes (course instances) and the LTI tables that tie an LMS course to one of them.

A class is one offering of the course: a term, a section, an LMS course. It offers a set of the shared lessons,
and its people hold a role *in it* (learner, grader, instructor): what a staff member may see of learners is
what their class's learners did in its lessons (app/services/classes/scopes.py). An LMS context (a course in
Canvas or Moodle) maps to exactly one class, and an LMS launch can give roles in that class only.

Imported at the end of app/core/models.py, which re-exports every name here.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.core.models import Base, utcnow

# A person's role in one class. Staff roles: an instructor sees and changes everything of the class (its roster,
# people, holds, LMS links); a grader grades the lessons the class assigns them.
CLASS_ROLES = ("learner", "grader", "instructor")
STAFF_ROLES = ("grader", "instructor")
# How a person came to be in a class: shown to its staff, and roster sync marks as left only those the LMS added.
JOINED_VIA = ("invite", "lms", "staff", "admin", "register", "cli", "migration")


class CourseClass(Base):
    """One offering of the course, addressed by its slug (/classes/<slug>/...)."""

    __tablename__ = "classes"

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(40), unique=True)  # lowercase letters, digits and dashes
    title: Mapped[str] = mapped_column(String(120))
    term: Mapped[str] = mapped_column(String(60), default="")  # "Fall 2026": shown beside the title
    # the lesson ids the class offers; None: every published lesson, including ones published later
    lesson_ids: Mapped[list | None] = mapped_column(JSON)
    # who knows this joins as a learner (/join/<code>); a new code makes the old one worthless
    invite_code: Mapped[str] = mapped_column(String(40), unique=True)
    # whoever registers on the site joins as a learner: the class migration 0013 makes of an existing server's
    # people has it, so registering keeps its meaning there; a class made later is joined by invitation, an LMS, or
    # its staff
    open_registration: Mapped[bool] = mapped_column(Boolean, default=False)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def offers(self, lesson_id: str) -> bool:
        return self.lesson_ids is None or lesson_id in self.lesson_ids


class ClassMember(Base):
    """A person's one role in one class. A member the LMS roster no longer lists is marked `left_at`, never
    deleted: their answers, runs, reports and grades stay, and the roster shows them as having left."""

    __tablename__ = "class_members"
    __table_args__ = (
        UniqueConstraint("class_id", "user_id"),
        # "whose classes": every staff check and the class switcher read by user
        Index("ix_class_members_user_id_role", "user_id", "role"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(12))  # CLASS_ROLES
    via: Mapped[str] = mapped_column(String(10))  # JOINED_VIA
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    left_at: Mapped[datetime | None]
    klass: Mapped[CourseClass] = relationship()


# --- LTI 1.3 (app/services/lti/registry.py): the course as a tool inside a university's LMS -----------------------


class LtiPlatform(Base):
    """An LMS registered with the course: where its OIDC login, token service and public keys are.
    One issuer may register the course several times (one client id each: Canvas per developer key)."""

    __tablename__ = "lti_platforms"
    __table_args__ = (UniqueConstraint("issuer", "client_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(80))  # shown to instructors: "Canvas (university)"
    issuer: Mapped[str] = mapped_column(String(255))  # the id_token's `iss`
    client_id: Mapped[str] = mapped_column(String(255))  # the id_token's `aud`
    auth_login_url: Mapped[str] = mapped_column(String(500))  # OIDC authorization endpoint
    auth_token_url: Mapped[str] = mapped_column(String(500))  # OAuth2 token endpoint (roster, grades)
    key_set_url: Mapped[str] = mapped_column(String(500))  # the platform's JWKS
    auth_audience: Mapped[str | None] = mapped_column(String(500))  # token `aud` when not the token URL (Moodle)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    deployments: Mapped[list[LtiDeployment]] = relationship(
        back_populates="platform", cascade="all, delete-orphan", order_by="LtiDeployment.deployment_id"
    )


class LtiDeployment(Base):
    """A deployment id the platform may launch with; a launch naming any other is refused."""

    __tablename__ = "lti_deployments"
    __table_args__ = (UniqueConstraint("platform_id", "deployment_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"), index=True)
    deployment_id: Mapped[str] = mapped_column(String(255))
    platform: Mapped[LtiPlatform] = relationship(back_populates="deployments")


class LtiIdentity(Base):
    """Which course user a platform's `sub` is: the pair (platform, sub) is the identity, never the email."""

    __tablename__ = "lti_identities"
    __table_args__ = (UniqueConstraint("platform_id", "sub"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"), index=True)
    sub: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LtiState(Base):
    """Short-lived launch state kept on the server, keyed by the OIDC `state` (and nonces, launch data):
    pylti1p3's session and cookie storage, which an iframe's cross-site POST could not carry in cookies."""

    __tablename__ = "lti_states"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[dict | list | str | bool | None] = mapped_column(JSON)
    expires_at: Mapped[datetime] = mapped_column(index=True)


class LtiLink(Base):
    """A resource link placed in a course of the LMS, with what it opens and the services its launches offered
    (the roster's memberships URL, the gradebook column)."""

    __tablename__ = "lti_links"
    __table_args__ = (UniqueConstraint("platform_id", "resource_link_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"), index=True)
    deployment_id: Mapped[str] = mapped_column(String(255))
    resource_link_id: Mapped[str] = mapped_column(String(255))
    context_id: Mapped[str] = mapped_column(String(255), default="")
    context_title: Mapped[str] = mapped_column(String(255), default="")
    # the LMS course the link is placed in, and so the one class whose members its roster and grades concern
    lti_context_id: Mapped[int | None] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"), index=True)
    target: Mapped[str] = mapped_column(String(80))  # "lesson:<id>" | "lab:<lesson id>"
    memberships_url: Mapped[str | None] = mapped_column(String(500))  # NRPS
    lineitem_url: Mapped[str | None] = mapped_column(String(500))  # AGS: this link's gradebook column
    lineitems_url: Mapped[str | None] = mapped_column(String(500))
    ags_scopes: Mapped[list] = mapped_column(JSON, default=list)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class LtiTicket(Base):
    """A one-time, two-minute hand-off from a verified launch to the page it opens (only its SHA-256 is kept):
    `enter` logs the browser in at the top level; `deep_link` lets the picker's form answer that one launch."""

    __tablename__ = "lti_tickets"

    id: Mapped[int] = mapped_column(primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(10))  # enter | deep_link
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    target: Mapped[str] = mapped_column(String(500))  # enter: the course path; deep_link: the launch key
    expires_at: Mapped[datetime]
    used_at: Mapped[datetime | None]


class LtiScoreSent(Base):
    """A grade passed back to the LMS gradebook, so each saved grade is sent once per link."""

    __tablename__ = "lti_scores_sent"
    __table_args__ = (UniqueConstraint("link_id", "grade_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    link_id: Mapped[int] = mapped_column(ForeignKey("lti_links.id", ondelete="CASCADE"), index=True)
    grade_id: Mapped[int] = mapped_column(ForeignKey("grades.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    sent_at: Mapped[datetime] = mapped_column(default=utcnow)


class LtiContext(Base):
    """An LMS course (the launch's context claim) and the one class it maps to. Made at the first launch from
    that course, with a class of its own; a site admin may map it to another class instead."""

    __tablename__ = "lti_contexts"
    __table_args__ = (UniqueConstraint("platform_id", "context_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"), index=True)
    context_id: Mapped[str] = mapped_column(String(255))
    title: Mapped[str] = mapped_column(String(255), default="")
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LtiContextMember(Base):
    """Who the LMS says is in one of its courses (seen at a launch or a roster sync), and who left it. Grades and
    practice scores for a link go to these people only, never to everyone the platform ever launched."""

    __tablename__ = "lti_context_members"
    __table_args__ = (UniqueConstraint("lti_context_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    lti_context_id: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[str | None] = mapped_column(String(12))  # the class role the LMS's roles map to; None: no role
    seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    left_at: Mapped[datetime | None]


class LtiAudit(Base):
    """Every change to what the course trusts of an LMS: a registration made or changed (its URLs and keys before
    and after), deployment ids added, an LMS course mapped to another class. Never updated or deleted."""

    __tablename__ = "lti_audit"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    action: Mapped[str] = mapped_column(String(20))  # registered | changed | deployments | context-mapped
    platform_id: Mapped[int | None] = mapped_column(ForeignKey("lti_platforms.id", ondelete="SET NULL"))
    issuer: Mapped[str] = mapped_column(String(255))  # kept as text: the record outlives the registration
    client_id: Mapped[str] = mapped_column(String(255))
    by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    by_email: Mapped[str] = mapped_column(String(254), default="")  # "" from the command line
    via: Mapped[str] = mapped_column(String(10))  # web | cli | migration
    before: Mapped[dict] = mapped_column(JSON, default=dict)
    after: Mapped[dict] = mapped_column(JSON, default=dict)
    note: Mapped[str] = mapped_column(Text, default="")
