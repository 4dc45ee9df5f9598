"""Request dependencies: database session, current user, role checks, CSRF, and ownership lookups.

SessionDep      a SQLAlchemy session for this request
SettingsDep     the app's Settings;  HostDep  what this host's lab workers can run (labhost.HostCapacity)
CurrentUser     the logged-in user, or 401 (pages redirect to /login); a browser's login is a server-side
                session row (app/services/accounts/sessions.py) named by the token in its signed cookie; a script's is
                an API token (app/services/accounts/tokens.py), accepted under /api/v1/ only (see `token_refused`)
require_role()  stacked on CurrentUser: 403 unless the user holds the site role (and logged in with a browser):
                AdminUser (a site admin: classes, LMS platforms, authoring grants, the cluster), AuthorUser (lessons)
ClassStaff      path {slug}: the user's Scope in that class (app/services/classes/scopes.py) when they are its
                grader or instructor, else 403 (404 for no such class); ClassInstructor: its instructors only
PostedForm      the request's form fields, read without blocking, for plain `def` handlers
ViewerJob       path {job_id}: a job for its owner, an instructor of their class, or a grader of a report that
                cites it, else 404
OwnedBundle     path {bundle_id}: an upload for its owner (or an instructor of their class), else 404
ViewerReport    path {report_id}: a lab report for its owner or staff of a class that sees it, else 404
                (the three lookups above give a request with an API token its owner's own things only, whatever
                the account's roles: `acts_as_learner`)
GradedReport    path {slug}/{report_id}: a submitted report of that class the grader (or instructor) grades, else 404
LessonWithLab   path {lesson_id}: the current version of a lesson that has a lab, else 404

Lookups raise the domain's NotFound (app/services/errors.py); app/web/factory.py maps it to 404. A thing that
exists but is not the user's answers exactly like a missing one, leaking nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated

import annotated_types as at
from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from app.core.config import Settings
from app.core.db import release
from app.core.models import Bundle, Job, LabReport, User
from app.services.accounts import sessions, tokens
from app.services.classes import registry as class_registry
from app.services.classes import scopes
from app.services.cluster import nodes as cluster
from app.services.errors import NotFound
from app.services.grading import grades as grading
from app.services.jobs import bundles as bundle_service
from app.services.jobs import lifecycle as job_service
from app.services.jobs.labhost import HostCapacity
from app.services.learning import lessons as lesson_service
from app.web.csrf import CSRF_FORM_FIELD, CSRF_HEADER, SESSION_KEY, csrf_matches, csrf_token_for

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}

# Every integer a request hands to the database (ids, versions, seeds) fits a 32-bit column, so a
# huge number is a 422 naming the parameter instead of an overflow deep in SQLite or PostgreSQL.
DbInt = Annotated[int, at.Interval(ge=-(2**31), le=2**31 - 1)]


class LoginRequired(Exception):
    """Raised for a page that needs a user; the app turns it into a redirect (or 401 for the API)."""


async def get_db(request: Request) -> AsyncIterator[Session]:
    # async on purpose: opening a Session does no I/O, and a sync generator costs two thread-pool hops per
    # request (enter and exit); the queries themselves run in the route's or dependency's worker thread.
    # The session holds a connection only from its first query to the next `release` (app/core/db.py): after the
    # user lookup, before a page renders (app/web/templates.py), and at the latest when the handler returns.
    with request.app.state.sessions() as db:
        request.state.db = db
        yield db


# scope="function": closed when the handler returns, before the response is sent, so a slow reader never
# holds a connection (a yield dependency's default, "request", ends only after the last byte is sent).
SessionDep = Annotated[Session, Depends(get_db, scope="function")]


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header[:7].lower() == "bearer " else None


API_PREFIX = "/api/v1/"
TOKEN_REFUSED = (
    "An API token opens only the JSON API under /api/v1/ (jobs, results, artifacts, uploads, the tools). "
    "The account page, creating tokens, reset links and instructor or grader pages need a browser login."
)
STAFF_TOKEN_REFUSED = "Instructor and grader actions need a browser login; an API token acts only as a learner would."


def acts_as_learner(request: Request) -> bool:
    """Whether this request may reach only its user's own jobs, uploads and reports: it came with an API token.

    Why: a token is long-lived and sits in scripts and shell histories; whoever finds an instructor's or a
    grader's must not read, cancel or delete other learners' work with it. Staff work needs a browser login."""
    return bool(getattr(request.state, "via_token", False))


def _unseen(request: Request, what: str) -> str:
    """The 404's words for a thing the user cannot see; with a token, why (said whether or not it exists)."""
    if acts_as_learner(request):
        return f"No {what} of yours: an API token reaches only its own account's jobs, uploads and reports."
    return f"No {what} that you can see."


def token_refused(request: Request) -> bool:
    """Whether this request presents an API token where tokens are not accepted.

    Why a token is API-only: it is long-lived and sits in scripts and shell histories, so a leaked one must
    not reach what would let its finder keep the account (a new password, more tokens) or act as staff
    (reset links for anyone). Reading results and submitting jobs is all a script needs."""
    return bearer_token(request) is not None and not request.url.path.startswith(API_PREFIX)


def get_optional_user(request: Request, db: SessionDep) -> User | None:
    """The user of a valid bearer token (scripts) or else of the browser's server-side session.

    A request that presents a token is judged by the token alone: a bad token is a 401, never a
    silent fall-back to whatever cookie the client also holds. A cookie whose session ended (logout,
    "log out everywhere", a password change, the idle or absolute lifetime) names no user.
    """
    token = bearer_token(request)
    if token is not None:
        if token_refused(request):
            raise HTTPException(403, TOKEN_REFUSED)
        user = tokens.user_for(db, plaintext=token)
        if user is None:
            raise HTTPException(
                401,
                "The API token is unknown or revoked (a password change, a reset link or “log out everywhere” "
                "revokes every token of the account). Make a new one on your account page.",
                headers={"WWW-Authenticate": "Bearer"},
            )
        request.state.via_token = True
    else:
        user = None
        sid = request.session.get(SESSION_KEY)
        if isinstance(sid, str):
            settings: Settings = request.app.state.settings
            active = sessions.lookup(db, token=sid, idle_s=settings.session_idle_s, max_s=settings.session_max_s)
            if active is None:
                del request.session[SESSION_KEY]  # ended or expired: the browser is logged out from now on
            else:
                user = active.user
                request.state.session_id = active.session.id
    release(db)  # the handler runs in another thread hop: do not hold the connection while waiting for it
    request.state.user = user
    return user


OptionalUser = Annotated[User | None, Depends(get_optional_user)]


class Viewer:
    """The login of one of the most-read pages (lesson parts, the dashboard), for `async def` handlers that
    do their reads on the event loop: `await viewer.required()` / `await viewer.optional()` give a
    `sessions.Reader` (the user's id, email, name and roles; no ORM object).

    Why: under load a lesson page spent more time handing work between the event loop and worker threads
    (two thread hops per request, each a wake-up and a GIL hand-over) than rendering; with its reads on the
    loop a page serves about twice the requests (bench/lesson_throughput.py). Only reads run there: in WAL
    mode SQLite readers never wait on a lock, PostgreSQL readers never wait on row locks, and the admission
    gate keeps a pool connection free for every admitted request (app/core/db.py), so a read waits for nothing
    but the database itself. The read is one Core statement on the request's connection, no ORM objects:
    building the session, user and role objects was half the login's cost (bench/page_breakdown.py, row
    `login`). Anything that may wait on a lock (the
    session's touch or expiry, an API token's last-use stamp) goes to a worker thread through
    `get_optional_user`, with the same rules as every other route's CurrentUser / OptionalUser."""

    def __init__(self, request: Request, db: Session):
        self.request, self.db = request, db

    async def optional(self) -> sessions.Reader | None:
        request = self.request
        sid = request.session.get(SESSION_KEY)
        if bearer_token(request) is None:
            if not isinstance(sid, str):
                request.state.user = None
                return None
            settings: Settings = request.app.state.settings
            peeked = sessions.peek(
                self.db.connection(), token=sid, idle_s=settings.session_idle_s, max_s=settings.session_max_s
            )
            if peeked is not None:
                request.state.session_id = peeked.session_id
                request.state.user = peeked.reader
                return peeked.reader
        return await run_in_threadpool(_optional_reader, request, self.db)  # a write to do, a token, or no row

    async def required(self) -> sessions.Reader:
        user = await self.optional()
        if user is None:
            raise LoginRequired()
        return user


def _optional_reader(request: Request, db: Session) -> sessions.Reader | None:
    """get_optional_user as a Reader, in the worker thread: a token's user loads its roles here, not on the loop."""
    user = get_optional_user(request, db)
    reader = None if user is None else sessions.Reader.of(user)
    request.state.user = reader  # the page shows the same kind of user whichever way it was read
    return reader


async def get_viewer(request: Request, db: SessionDep) -> Viewer:  # no I/O here
    return Viewer(request, db)


ViewerDep = Annotated[Viewer, Depends(get_viewer)]


async def get_current_user(user: OptionalUser) -> User:  # no I/O: async skips a thread-pool hop
    if user is None:
        raise LoginRequired()
    return user


CurrentUser = Annotated[User, Depends(get_current_user)]


def require_role(*roles: str) -> Callable[[Request, User], Awaitable[User]]:
    async def check(request: Request, user: CurrentUser) -> User:
        if acts_as_learner(request):
            raise HTTPException(403, STAFF_TOKEN_REFUSED)
        if not user.roles & set(roles):
            raise HTTPException(
                403,
                f"This page is for {' or '.join(roles)}s (a site role, given on the command line); your site roles: "
                f"{', '.join(sorted(user.roles)) or 'none'}.",
            )
        return user

    return check


AdminUser = Annotated[User, Depends(require_role("admin"))]
AuthorUser = Annotated[User, Depends(require_role("author"))]

ROLE_WORDS = {"instructor": "instructors", "grader": "graders"}


def _class_scope(roles: tuple[str, ...]) -> Callable[..., scopes.Scope]:
    def check(request: Request, slug: str, user: CurrentUser, db: SessionDep) -> scopes.Scope:
        if acts_as_learner(request):
            raise HTTPException(403, STAFF_TOKEN_REFUSED)
        klass, scope = scopes.staff_scope(db, user=user, slug=slug, roles=roles)
        if klass is None:
            raise NotFound(f"There is no class {slug[:40]!r}.")
        if scope is None:
            mine = class_registry.role_in(db, class_id=klass.id, user_id=user.id)
            raise HTTPException(
                403,
                f"This page is for the {' and '.join(ROLE_WORDS[r] for r in roles)} of {klass.title}; "
                f"your role in it: {mine or 'none'}.",
            )
        request.state.scope = scope  # the page's class navigation reads it, and its switcher the other classes
        request.state.staff_classes = scopes.staff_scopes(db, user=user)
        return scope

    return check


ClassStaff = Annotated[scopes.Scope, Depends(_class_scope(("grader", "instructor")))]
ClassInstructor = Annotated[scopes.Scope, Depends(_class_scope(("instructor",)))]


CSRF_REFUSED = (
    "The form's security token is missing or out of date (the login changed since this page was loaded), "
    "so nothing was saved. Reload the page and send it again."
)
# A script on the JSON API with the login cookie: it is told which header to send and where to read its value.
CSRF_HEADER_MISSING = (
    "No X-CSRF-Token header: a request authenticated by the login cookie must send the session's CSRF token in "
    "the X-CSRF-Token header (or a multipart upload's csrf_token field). GET /api/v1/me returns it as "
    "csrf_token, and this response's X-CSRF-Token header carries it. An Authorization: Bearer API token needs "
    "none. Nothing was changed."
)
CSRF_HEADER_STALE = (
    "The X-CSRF-Token header does not match this session's token (a login since it was read starts a new "
    "session); this response's X-CSRF-Token header carries the current one. Nothing was changed."
)


def csrf_refusal(request: Request, presented: object) -> str:
    """Why a request's CSRF token was refused: a page's form is told to reload; a JSON API call names the header
    it lacked, or says its value went stale."""
    if not request.url.path.startswith("/api/"):
        return CSRF_REFUSED
    return CSRF_HEADER_STALE if presented else CSRF_HEADER_MISSING


async def csrf_protect(request: Request) -> None:
    """Every state-changing request must present the session's CSRF token (form field or header).

    Requests authenticated by a bearer token are exempt under /api/v1/: a browser never attaches that header
    to a cross-site request by itself, which is what CSRF protection guards against. Anywhere else a token is
    refused outright (`token_refused`), before the CSRF check could give a misleading answer.
    """
    if request.method not in UNSAFE:
        return
    if token_refused(request):
        raise HTTPException(403, TOKEN_REFUSED)
    if bearer_token(request) is not None:
        return
    presented: object = request.headers.get(CSRF_HEADER)
    if not presented:
        ctype = request.headers.get("content-type", "")
        if ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            form = await request.form()  # Starlette caches it, so the route still sees the body
            presented = form.get(CSRF_FORM_FIELD)
            request.state.posted_form = form  # for the refusal page: what was sent is offered back (app/web/factory.py)
    if not csrf_matches(request.session, presented if isinstance(presented, str) else None):
        # The session's current token rides along, so a page whose token went stale (a login in another tab
        # starts a new session) can take it and send again without a reload that would lose what was typed
        # (static/requests.js). Another site's page cannot read a response header of ours.
        raise HTTPException(
            403, csrf_refusal(request, presented), headers={CSRF_HEADER: csrf_token_for(request.session)}
        )


async def posted_form(request: Request) -> FormData:
    """The request's form, parsed on the event loop (Starlette caches it, so csrf_protect's read is reused).

    Lets a handler whose fields are not known in advance stay a plain `def`: its queries then run in a
    worker thread instead of blocking the event loop, as they did in an `async def` handler."""
    return await request.form()


PostedForm = Annotated[FormData, Depends(posted_form)]


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_host(request: Request, db: SessionDep) -> HostCapacity:
    """What one job can get now: this host's probe (embedded), or the Ray cluster's last snapshot (ray), within
    the course's per-job time limit."""
    settings: Settings = request.app.state.settings
    if settings.executor == "ray":
        host: HostCapacity = cluster.host_capacity(db, memory_bytes=settings.job_memory_bytes)
    else:
        host = request.app.state.host
    return host.with_time_limit(settings.job_time_limit_s)


HostDep = Annotated[HostCapacity, Depends(get_host)]


# ---------------------------------------------------------------- ownership lookups


def viewer_job(job_id: DbInt, request: Request, user: CurrentUser, db: SessionDep) -> Job:
    job = job_service.get_job_for(db, job_id=job_id, user=user, as_learner=acts_as_learner(request))
    if job is None:
        raise NotFound(_unseen(request, f"job {job_id}"))
    return job


ViewerJob = Annotated[Job, Depends(viewer_job)]


def owned_bundle(bundle_id: DbInt, request: Request, user: CurrentUser, db: SessionDep) -> Bundle:
    bundle = bundle_service.get_for(db, bundle_id=bundle_id, user=user, as_learner=acts_as_learner(request))
    if bundle is None:
        raise NotFound(_unseen(request, f"upload {bundle_id}"))
    return bundle


OwnedBundle = Annotated[Bundle, Depends(owned_bundle)]


def viewer_report(report_id: DbInt, request: Request, user: CurrentUser, db: SessionDep) -> LabReport:
    report = grading.report_for_viewer(db, report_id=report_id, user=user, as_learner=acts_as_learner(request))
    if report is None:
        raise NotFound(_unseen(request, f"lab report {report_id}"))
    return report


ViewerReport = Annotated[LabReport, Depends(viewer_report)]


def graded_report(report_id: DbInt, scope: ClassStaff, db: SessionDep) -> LabReport:
    user = scope.user
    report = grading.report_for_grader(db, report_id=report_id, scope=scope)
    if report is None:
        own = db.get(LabReport, report_id)
        if own is not None and own.owner_id == user.id:  # theirs: saying so tells them nothing new
            raise NotFound(
                f"Report {report_id} is your own lab report: nobody grades their own, so another grader will. "
                f"You can read it at /lessons/{own.lesson_id}/report."
            )
        raise NotFound(f"No submitted report {report_id} that you grade in {scope.klass.title}.")
    return report


GradedReport = Annotated[LabReport, Depends(graded_report)]


def lesson_with_lab(lesson_id: str, user: CurrentUser, db: SessionDep) -> lesson_service.Current:
    cur = lesson_service.current(db, lesson_id=lesson_id)
    if cur is None:
        raise NotFound(f"There is no lesson {lesson_id!r}.")
    if cur.lesson.lab is None:
        raise NotFound(f"Lesson {lesson_id!r} has no lab, so it has no lab report.")
    return cur


LessonWithLab = Annotated[lesson_service.Current, Depends(lesson_with_lab)]
