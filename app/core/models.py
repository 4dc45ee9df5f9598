"""Database tables (SQLAlchemy 2). The schema itself is owned by the Alembic migrations.

The jobs table is the one source of truth for a lab job: status, progress, attempts,
lease and heartbeat, error and result. A queue, where one is used, carries only job ids.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Constraint names are fixed so that migrations can alter them on SQLite (batch mode) and PostgreSQL alike.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Site roles, held across the whole server: `admin` (an operator: creates classes, registers LMS platforms, grants
# authoring; made from the command line) and `author` (edits and publishes lessons, which are shared content).
# Everything about learners is a role *in a class* (ClassMember, app/core/class_models.py), never a site role.
ROLES = ("admin", "author")
JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
FINISHED_STATUSES = ("succeeded", "failed", "cancelled")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """Timestamps are stored in UTC and always come back timezone-aware.

    PostgreSQL answers in the session's time zone and SQLite drops the zone; both are normalised
    to UTC here, once, instead of every comparison with `utcnow()` and every page having to.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)  # PostgreSQL answers in the session's zone


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {datetime: UTCDateTime()}


class Person(Protocol):
    """Whom a read or a visit is for: a `User` row, or the `Reader` the most-read pages get instead
    (app/services/accounts/sessions.py). Functions that only go by the user's id take this."""

    @property
    def id(self) -> int: ...


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(254), unique=True)  # stored lower-cased
    display_name: Mapped[str] = mapped_column(String(80))
    password_hash: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    role_rows: Mapped[list[UserRole]] = relationship(
        back_populates="user", cascade="all, delete-orphan", lazy="selectin"
    )

    @property
    def roles(self) -> set[str]:
        return {r.role for r in self.role_rows}

    def has_role(self, role: str) -> bool:
        return role in self.roles


class UserRole(Base):
    __tablename__ = "user_roles"
    __table_args__ = (UniqueConstraint("user_id", "role"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(20))
    user: Mapped[User] = relationship(back_populates="role_rows")


class Job(Base):
    __tablename__ = "jobs"
    # the fair queue reads queued and running jobs per learner in id order (app/services/jobs/queue.py)
    __table_args__ = (Index("ix_jobs_status_owner_id", "status", "owner_id", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    lab: Mapped[str] = mapped_column(String(40))
    params: Mapped[dict] = mapped_column(JSON, default=dict)
    backend: Mapped[str] = mapped_column(
        String(20), default="auto"
    )  # what runs: te|torch-cuda|cpu (auto resolved on submit)
    queue: Mapped[str] = mapped_column(String(10), default="cpu")  # cpu | gpu (routing in distributed mode)
    status: Mapped[str] = mapped_column(String(10), default="queued", index=True)
    progress: Mapped[float] = mapped_column(default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=2)
    worker_id: Mapped[str | None] = mapped_column(String(80))
    lease_expires_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict | None] = mapped_column(JSON)
    bundle_dir: Mapped[str | None] = mapped_column(String(255))  # relative to the data dir
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    # What the catalog says one run needs (labs.catalog resources(params, backend)), fixed when the job is
    # created or, for `auto` in the distributed mode, when the dispatcher resolves it: placement and ETA read these.
    ranks: Mapped[int] = mapped_column(Integer, default=1)
    gpus: Mapped[int] = mapped_column(Integer, default=0)
    requested_backend: Mapped[str] = mapped_column(String(20), default="auto")  # as the learner asked
    node: Mapped[str | None] = mapped_column(String(120))  # where the last attempt ran (host, or Ray node)
    placement: Mapped[dict | None] = mapped_column(JSON)  # what the executor granted: devices, node id, pid
    # GPU-seconds charged to the learner's daily limit: gpus x run time of attempts that ended by the lab
    # itself or by the learner (cancel); never an attempt lost to infrastructure.
    gpu_seconds: Mapped[float] = mapped_column(default=0.0)
    cancel_requested_at: Mapped[datetime | None]

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES


class JobLoss(Base):
    """One attempt of a job lost to infrastructure (jobs.lost, jobs.reap_expired): the job went back to the queue
    or, after its last attempt, failed; never charged. The instructor's cluster page lists the recent ones with
    where they ran, so a node or worker that keeps losing work stands out (the job row keeps only its latest)."""

    __tablename__ = "job_losses"

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    worker_id: Mapped[str | None] = mapped_column(String(80))
    node: Mapped[str | None] = mapped_column(String(120))  # the job's node then: a host, or a Ray node's hostname
    reason: Mapped[str] = mapped_column(Text)
    outcome: Mapped[str] = mapped_column(String(10))  # what the job became: queued | failed | cancelled
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)


class LessonVersion(Base):
    """An immutable published version of one lesson: the text of every file, as authored. Files on disk (when they
    change) and the browser editor publish them; attempts and answers point at the version they were given under."""

    __tablename__ = "lesson_versions"
    __table_args__ = (UniqueConstraint("lesson_id", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    lesson_id: Mapped[str] = mapped_column(String(64), index=True)
    version: Mapped[int] = mapped_column(Integer)
    # relative path -> YAML text; deferred: pages need only the id/version/hash, since the built
    # Lesson is cached per version and the texts are read only on a cache miss or by the editor.
    files: Mapped[dict] = mapped_column(JSON, deferred=True)
    content_hash: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(10))  # files | editor
    author_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LessonDraft(Base):
    """A lesson's next version, saved in the editor, not published: staff preview it, learners never see it. One
    per lesson; publishing makes it the next LessonVersion (app/services/learning/drafts.py)."""

    __tablename__ = "lesson_drafts"

    id: Mapped[int] = mapped_column(primary_key=True)
    lesson_id: Mapped[str] = mapped_column(String(64), unique=True)
    base_version: Mapped[int | None] = mapped_column(Integer)  # None: a new lesson, never published
    files: Mapped[dict] = mapped_column(JSON)  # relative path -> YAML text, as a LessonVersion holds them
    author_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class PartProgress(Base):
    __tablename__ = "part_progress"
    __table_args__ = (UniqueConstraint("user_id", "lesson_id", "part_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    lesson_id: Mapped[str] = mapped_column(String(64))
    part_id: Mapped[str] = mapped_column(String(64))
    seconds_spent: Mapped[int] = mapped_column(Integer, default=0)
    first_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    done_at: Mapped[datetime | None]
    # the lesson version the learner last opened this part under (learning.visit); NULL: not known (rows from
    # before it was recorded), which never leads to an "updated since you last read it" notice
    version_seen: Mapped[int | None] = mapped_column(Integer)
    # when the page's last report of reading time for this part was accepted (learning.add_time): the next report
    # credits no more than the wall time since. Kept apart from last_seen_at, which says where "resume" goes.
    time_reported_at: Mapped[datetime | None]


class Response(Base):
    """A learner's written answer (pause-and-reason or free response). Append-only: never overwritten."""

    __tablename__ = "responses"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    lesson_id: Mapped[str] = mapped_column(String(64))
    lesson_version: Mapped[int] = mapped_column(Integer)
    item_id: Mapped[str] = mapped_column(String(64))  # pause id or question id
    kind: Mapped[str] = mapped_column(String(20))  # pause | free_response
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Attempt(Base):
    """One graded answer to a practice question, with the variant and lesson version it answered."""

    __tablename__ = "attempts"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    lesson_id: Mapped[str] = mapped_column(String(64))
    lesson_version: Mapped[int] = mapped_column(Integer)
    question_id: Mapped[str] = mapped_column(String(64))
    variant_seed: Mapped[int] = mapped_column(Integer)
    answer: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(12))  # correct | incorrect | answered
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# ---------------------------------------------------------------- lab reports and grading

REPORT_STATUSES = ("draft", "submitted", "claimed", "graded")


class GraderAssignment(Base):
    """Which lessons a grader grades in one class; a grader sees that class's reports of these lessons only (its
    instructors see all of the class's)."""

    __tablename__ = "grader_assignments"
    __table_args__ = (UniqueConstraint("class_id", "user_id", "lesson_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    lesson_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Bundle(Base):
    """A lab bundle uploaded by a learner (a zip of result.json and artifacts made by `python -m labs run`)."""

    __tablename__ = "bundles"

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    lab: Mapped[str] = mapped_column(String(40))
    filename: Mapped[str] = mapped_column(String(255))  # as uploaded, shown escaped
    size_bytes: Mapped[int] = mapped_column(Integer)  # compressed, as received
    # on disk: result.json and the artifacts it lists (nothing else is kept); what the storage quota counts
    stored_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    bundle_dir: Mapped[str] = mapped_column(String(255))  # relative to the data dir
    result: Mapped[dict] = mapped_column(JSON)  # the validated result.json
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LabReport(Base):
    """One learner's lab report for one lesson: a working draft plus append-only submitted versions.

    `revision` grows with every claim, release and status change, so claims are conditional updates.
    """

    __tablename__ = "lab_reports"
    __table_args__ = (UniqueConstraint("owner_id", "lesson_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    lesson_id: Mapped[str] = mapped_column(String(64), index=True)
    status: Mapped[str] = mapped_column(String(12), default="draft", index=True)  # REPORT_STATUSES
    draft: Mapped[dict] = mapped_column(
        JSON, default=dict
    )  # {"evidence": {slot: {"job"|"bundle": id}}, "answers": {q: text}}
    claimed_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), index=True)
    claimed_at: Mapped[datetime | None]
    revision: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    submitted_at: Mapped[datetime | None]  # of the latest version; the queue's stable order


class ReportVersion(Base):
    """A submitted report, never changed afterwards except for its automatic checks (re-run on regrade)."""

    __tablename__ = "report_versions"
    __table_args__ = (UniqueConstraint("report_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    report_id: Mapped[int] = mapped_column(ForeignKey("lab_reports.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    lesson_version: Mapped[int] = mapped_column(Integer)
    evidence: Mapped[dict] = mapped_column(JSON)  # {slot id: {"job": id} | {"bundle": id}}
    answers: Mapped[dict] = mapped_column(JSON)  # {question id: text}
    checks: Mapped[dict] = mapped_column(JSON, default=dict)  # {slot id: {"status", "checks": [...]}}
    checked_at: Mapped[datetime | None]
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)


class Grade(Base):
    """One saved grade of one report version. Append-only: every save (or rubric recompute) is a new
    revision, and (version_id, revision) is unique, so of two saves from the same revision the second
    is refused by the database itself; nothing saved is ever overwritten."""

    __tablename__ = "grades"
    __table_args__ = (UniqueConstraint("version_id", "revision"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("report_versions.id", ondelete="CASCADE"), index=True)
    revision: Mapped[int] = mapped_column(Integer)
    grader_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))  # None: recompute
    rubric_version: Mapped[int] = mapped_column(Integer)  # lesson version whose rubric.yaml was used
    rubric_hash: Mapped[str] = mapped_column(String(64))
    scores: Mapped[dict] = mapped_column(JSON)  # {item id: {"level": id, "fraction": f, "points": p}}
    total: Mapped[float] = mapped_column()
    max_total: Mapped[float] = mapped_column()
    feedback: Mapped[str] = mapped_column(Text, default="")  # shown to the learner
    notes: Mapped[str] = mapped_column(Text, default="")  # graders and instructors only
    reason: Mapped[str] = mapped_column(Text, default="")  # e.g. "recomputed: rubric v7 changed points"
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # when the learner could first see it: at the save, or (its lesson holding grades, GradeHold) at the release
    released_at: Mapped[datetime | None]


class GradeHold(Base):
    """A lesson whose grades one class holds until released (all at once, so its learners see them together); a
    lesson without a row releases each grade as it is saved."""

    __tablename__ = "grade_holds"
    __table_args__ = (UniqueConstraint("class_id", "lesson_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"), index=True)
    lesson_id: Mapped[str] = mapped_column(String(64))
    held_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiToken(Base):
    """A personal token for scripts (`Authorization: Bearer …`). Only its SHA-256 is stored."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(80))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(12))  # shown in the list so a learner can tell tokens apart
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


# ---------------------------------------------------------------- sign-in: sessions, throttle, password resets


class UserSession(Base):
    """One logged-in browser. The cookie carries a random token and only its SHA-256 is stored here, so
    the row *is* the session: deleting it ends that browser's login at once (logout, "log out everywhere",
    a password change or reset), and a copied cookie is worth nothing afterwards."""

    __tablename__ = "user_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # the per-request lookup's index
    created_at: Mapped[datetime] = mapped_column(default=utcnow)  # the absolute lifetime counts from here
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)  # the idle lifetime; touched at most once a minute
    user_agent: Mapped[str] = mapped_column(String(200), default="")  # so a learner can tell their sessions apart
    user: Mapped[User] = relationship()


class LoginThrottle(Base):
    """Failed logins counted per key ("account:<email>" or "address:<client>"); see app/services/accounts/throttle.py."""

    __tablename__ = "login_throttle"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(300), unique=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_failure_at: Mapped[datetime] = mapped_column(default=utcnow)
    locked_until: Mapped[datetime | None]


class PasswordReset(Base):
    """A one-time password-reset link an instructor issued. Only the token's SHA-256 is stored."""

    __tablename__ = "password_resets"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    used_at: Mapped[datetime | None]


# ---------------------------------------------------------------- the fair queue's limits and the cluster


class QueueLimit(Base):
    """Per-learner job limits and storage quota set by instructors: the course default (user_id NULL) or one
    learner's override.

    A NULL limit means no limit of that kind.
    """

    __tablename__ = "queue_limits"
    __table_args__ = (UniqueConstraint("user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    max_in_flight: Mapped[int | None] = mapped_column(Integer)  # queued + running at once
    max_per_hour: Mapped[int | None] = mapped_column(Integer)  # jobs created in any rolling hour
    max_gpu_seconds_per_day: Mapped[int | None] = mapped_column(Integer)  # charged GPU-seconds, rolling 24 h
    max_stored_mib: Mapped[int | None] = mapped_column(Integer)  # uploaded bundles on disk, MiB (2**20 bytes)
    max_stored_bundles: Mapped[int | None] = mapped_column(Integer)  # uploaded bundles kept at once
    updated_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class ClusterNode(Base):
    """One Ray node as the dispatcher last saw it: what the web tier knows of the cluster (it never calls Ray)."""

    __tablename__ = "cluster_nodes"

    node_id: Mapped[str] = mapped_column(String(64), primary_key=True)  # Ray's hex node id
    hostname: Mapped[str] = mapped_column(String(255), default="")
    alive: Mapped[bool] = mapped_column(Boolean, default=True)
    resources: Mapped[dict] = mapped_column(JSON, default=dict)  # totals: CPU, GPU, memory, course_te_gpu ...
    labels: Mapped[dict] = mapped_column(JSON, default=dict)  # course-te, course-cc, course-fp8 ... from the probe
    seen_at: Mapped[datetime] = mapped_column(default=utcnow)  # the dispatcher's last snapshot that listed it


# --- the Ray dispatcher's election (app/services/cluster/dispatch_lease.py, docs/dispatcher.md) -----------------------


class DispatcherLease(Base):
    """The one active dispatcher: whoever holds this row's unexpired lease. Taken and renewed with one conditional
    UPDATE per cycle (the database's compare-and-set), so two dispatchers never both believe they are active."""

    __tablename__ = "dispatcher_lease"

    name: Mapped[str] = mapped_column(String(20), primary_key=True)  # "ray": one deployment, one row
    holder: Mapped[str | None] = mapped_column(String(120))  # dispatcher id host:pid:uuid; None: released
    acquired_at: Mapped[datetime | None]  # when the holder became active
    renewed_at: Mapped[datetime | None]  # its last heartbeat
    expires_at: Mapped[datetime | None]  # a standby takes over after this


class DispatcherSeen(Base):
    """Each dispatcher process's latest cycle: active or standing by, and its last error, for the cluster page."""

    __tablename__ = "dispatchers_seen"

    id: Mapped[str] = mapped_column(String(120), primary_key=True)  # host:pid:uuid, as in jobs.worker_id
    role: Mapped[str] = mapped_column(String(10))  # active | standby | stopped
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    seen_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    error: Mapped[str | None] = mapped_column(Text)  # why its last cycle failed; None after a good one


# Classes and LTI live in their own module (it imports Base from here); imported last so that every table is in
# Base.metadata for Alembic and the ORM, and so that `from app.core.models import LtiPlatform` keeps working.
from app.core.class_models import (  # noqa: E402, F401
    ClassMember,
    CourseClass,
    LtiAudit,
    LtiContext,
    LtiContextMember,
    LtiDeployment,
    LtiIdentity,
    LtiLink,
    LtiPlatform,
    LtiScoreSent,
    LtiState,
    LtiTicket,
)
