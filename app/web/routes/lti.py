"""LTI 1.3 pages: the LMS's login initiation and launches, the tool's JWKS, and the instructors' LTI page.

    GET  /lti/jwks.json              the tool's public key set (a stable URL to give the LMS)
    GET|POST /lti/login              OIDC login initiation from the LMS -> redirect to its authorization URL
    POST /lti/launch                 the LMS posts the signed id_token here (resource link or deep linking)
    GET  /lti/enter/{ticket}         a verified launch's one-time hand-off: logs this browser in, opens the page
    POST /lti/deep-link              the instructor's pick in the deep-linking page -> signed answer to the LMS
    GET  /lti                        instructors: registrations, links, the tool's URLs; the registration form
    POST /lti/platforms              register a platform (or add deployment ids)
    POST /lti/links/{id}/roster      Names and Role Provisioning: sync the link's course roster
    POST /lti/links/{id}/grades      Assignment and Grade Services: send released report grades
    POST /lti/links/{id}/practice    the same for a lesson link: each learner's practice score

Sessions: a launch arrives as a cross-site POST, often in an iframe; the course's cookies are SameSite=Lax and no
course page may be framed. So the launch itself sets no login: it answers a small page (which the LMS may
frame) with one button that opens the lesson in a new window, through a one-time, two-minute ticket. That
top-level request is first-party, so the login cookie it sets is the ordinary SameSite=Lax one. LMS placements
configured to open in a new window (docs/lti.md) take the same path with one more click.

CSRF: the login initiation and the launch POST come from the LMS and cannot carry our token. The login changes
nothing but a short-lived state row; the launch is authenticated by the id_token's signature (the platform's
JWKS), its audience, and the state and nonce issued at login, each single-use (app/services/lti/tool.py). The
deep-linking form carries its ticket, a one-time secret bound to that verified launch, as its synchronizer
token. Every other POST here is the instructors' and goes through csrf_protect.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from pylti1p3.deep_link_resource import DeepLinkResource
from pylti1p3.lineitem import LineItem
from starlette.concurrency import run_in_threadpool

from app.core.config import Settings
from app.core.models import User
from app.services.errors import FieldError, NotFound
from app.services.lti import registry as lti
from app.services.lti import sync as lti_sync
from app.services.lti.tool import Launch, Login, LtiRequest, Refused, ToolConf
from app.web.deps import DbInt, InstructorUser, PostedForm, SessionDep, SettingsDep, csrf_protect
from app.web.middleware.headers import CSP_NONCE_KEY, csp
from app.web.routes.auth import start_session
from app.web.templates import render

launches = APIRouter()  # posted by the LMS: authenticated by the id_token, not by our CSRF token (see above)
staff = APIRouter(dependencies=[Depends(csrf_protect)])
router = APIRouter()

TOOL_PATHS = {"login": "/lti/login", "launch": "/lti/launch", "jwks": "/lti/jwks.json"}


def _base(request: Request, settings: Settings) -> str:
    return settings.site_url  # never the request's Host header: the client chooses it


def _conf(db, settings: Settings) -> ToolConf:
    return ToolConf(db, lti.tool_key(settings.data_dir))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _framed_by(request: Request, response: Response, *, frame: list[str], form: list[str] = ()) -> Response:  # type: ignore[assignment]
    """The course's CSP, except that the LMS may frame this page (and a form may post back to it)."""
    policy = csp(getattr(request.state, CSP_NONCE_KEY, "")).replace(
        "frame-ancestors 'none'", "frame-ancestors " + " ".join(sorted({"'self'", *map(_origin, frame)}))
    )
    if form:
        policy = policy.replace(
            "form-action 'self'", "form-action " + " ".join(sorted({"'self'", *map(_origin, form)}))
        )
    response.headers["content-security-policy"] = policy
    return response


def _frame_origins(message: Launch) -> list[str]:
    """Who may frame the launch page: the platform's own addresses, and the one the signed launch says the user
    came from (its return URL; Canvas's issuer and login host are not the school's domain the course page is on)."""
    platform = message.platform
    urls = [platform.issuer, platform.auth_login_url]
    presentation = message.claim("launch_presentation", {}) or {}
    deep = message.body.get("https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings", {}) or {}
    for url in (presentation.get("return_url"), deep.get("deep_link_return_url")):
        if isinstance(url, str) and url.startswith("https://"):
            urls.append(url)
    return urls


def _refused(request: Request, exc: Refused, status: int = 400) -> Response:
    return render(request, "lti/refused.html", {"check": exc.check, "message": exc.message}, status_code=status)


@launches.get("/lti/jwks.json")
def jwks(db: SessionDep, settings: SettingsDep) -> Response:
    return JSONResponse(_conf(db, settings).public_jwks(), headers={"cache-control": "public, max-age=300"})


@launches.api_route("/lti/login", methods=["GET", "POST"])
async def login(request: Request, db: SessionDep, settings: SettingsDep) -> Response:
    params = dict(request.query_params)
    if request.method == "POST":
        params.update({k: v for k, v in (await request.form()).items() if isinstance(v, str)})
    req = LtiRequest(params, secure=request.url.scheme == "https")
    launch_url = _base(request, settings) + TOOL_PATHS["launch"]

    def redirect_url() -> str:
        lti.purge_states(db)
        return Login(db, req, _conf(db, settings)).auth_url(launch_url)

    try:
        url = await run_in_threadpool(redirect_url)
    except Refused as exc:
        return _refused(request, exc)
    return RedirectResponse(url, status_code=302)


@launches.post("/lti/launch")
def launch(request: Request, db: SessionDep, settings: SettingsDep, form: PostedForm) -> Response:
    params = {k: v for k, v in form.items() if isinstance(v, str)}
    conf = _conf(db, settings)
    message = Launch(db, LtiRequest(params, secure=request.url.scheme == "https"), conf)
    try:
        message.validate()
    except Refused as exc:
        return _refused(request, exc)
    platform = message.platform
    body = message.body
    roles = lti.course_roles(list(message.claim("roles", [])))
    frame = _frame_origins(message)
    if message.is_deep_link_launch():
        if "instructor" not in roles:
            return _refused(request, Refused("role", "only an instructor chooses what a link opens"), 403)
        user, _ = lti.user_for(
            db, platform=platform, sub=str(body["sub"]), name=body.get("name", ""), email=body.get("email"), roles=roles
        )
        ticket = lti.issue_ticket(db, kind="deep_link", user=user, target=message.get_launch_id())
        ctx = {"ticket": ticket, "targets": lti.targets(db), "platform": platform}
        return _framed_by(request, render(request, "lti/deep_link.html", ctx), frame=frame)
    if not message.is_resource_launch():
        return _refused(request, Refused("message", "this course answers resource-link and deep-linking launches"))
    custom = message.claim("custom", {}) or {}
    link_claim = message.claim("resource_link", {}) or {}
    target = lti.target(db, str(custom.get("target", "")))
    if target is None:
        known = next((row for row in lti.links(db) if row.resource_link_id == link_claim.get("id")), None)
        target = lti.target(db, known.target) if known else None
    if target is None:
        return _refused(
            request,
            Refused(
                "target",
                f"this link names no lesson of the course (custom target {custom.get('target', '')!r}); an "
                "instructor picks one with the LMS's deep-linking (“external tool”) dialog",
            ),
        )
    user, _ = lti.user_for(
        db, platform=platform, sub=str(body["sub"]), name=body.get("name", ""), email=body.get("email"), roles=roles
    )
    lti.remember_link(
        db,
        platform=platform,
        deployment_id=str(message.claim("deployment_id", "")),
        resource_link_id=str(link_claim.get("id")),
        target_key=target.key,
        context=message.claim("context", {}) or {},
        nrps=body.get("https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"),
        ags=body.get("https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"),
    )
    lti.let_grade(db, user=user, target=target.key)
    ticket = lti.issue_ticket(db, kind="enter", user=user, target=target.path)
    ctx = {"ticket": ticket, "target": target, "who": user.display_name, "platform": platform}
    return _framed_by(request, render(request, "lti/launch.html", ctx), frame=frame)


@launches.get("/lti/enter/{ticket}")
def enter(request: Request, db: SessionDep, ticket: str) -> Response:
    """A GET that logs in: the ticket is a 256-bit secret made by a verified launch, used once within two minutes,
    like a reset link's token; what it opens is fixed by that launch."""
    row = lti.take_ticket(db, kind="enter", token=ticket)
    if row is None:
        exc = Refused("ticket", "this link was used already or is over two minutes old: launch it from the LMS again")
        return _refused(request, exc)
    user = db.get(User, row.user_id)
    if user is None:
        raise NotFound("That account no longer exists.")
    start_session(request, db, user)
    return RedirectResponse(row.target, status_code=303)


@launches.post("/lti/deep-link")
def deep_link(request: Request, db: SessionDep, settings: SettingsDep, form: PostedForm) -> Response:
    ticket, key = str(form.get("ticket", "")), str(form.get("target", ""))
    chosen = lti.target(db, key)
    if chosen is None:
        raise FieldError("target", f"got {key!r}; pick one of the lessons or labs listed")
    row = lti.take_ticket(db, kind="deep_link", token=ticket)
    if row is None:
        return _refused(request, Refused("ticket", "this choice was sent already or expired: open the dialog again"))
    conf = _conf(db, settings)
    message = Launch.restore(db, conf, row.target)
    resource = (
        DeepLinkResource()
        .set_url(_base(request, settings) + TOOL_PATHS["launch"])
        .set_title(chosen.title)
        .set_custom_params({"target": chosen.key})
    )
    if chosen.key.startswith("lab:"):  # a lab report is graded: ask the LMS for a gradebook column with the link
        resource.set_lineitem(LineItem().set_tag(chosen.key).set_label(chosen.title).set_score_maximum(100))
    link = message.get_deep_link()
    settings_claim = message.body.get("https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings", {})
    return_url = settings_claim.get("deep_link_return_url", "")
    ctx = {"jwt": link.get_response_jwt([resource]), "return_url": return_url, "chosen": chosen}
    return _framed_by(
        request,
        render(request, "lti/deep_link_return.html", ctx),
        frame=_frame_origins(message),
        form=[return_url],
    )


# --- instructors -----------------------------------------------------------------------------------------------


def _page(request: Request, db, settings: Settings, *, status_code: int = 200, **extra) -> Response:
    base = _base(request, settings)
    ctx = {
        "platforms": lti.platforms(db),
        "links": lti.links(db),
        "tool_urls": {name: base + path for name, path in TOOL_PATHS.items()},
        "errors": {},
        "form": {},
        "done": None,
        **extra,
    }
    return render(request, "lti/platforms.html", ctx, status_code=status_code)


@staff.get("/lti")
def platforms_page(request: Request, db: SessionDep, settings: SettingsDep, user: InstructorUser) -> Response:
    return _page(request, db, settings)


FORM_FIELDS = ("name", "issuer", "client_id", "auth_login_url", "auth_token_url", "key_set_url", "auth_audience")


@staff.post("/lti/platforms")
def add_platform(
    request: Request, db: SessionDep, settings: SettingsDep, user: InstructorUser, form: PostedForm
) -> Response:
    values = {f: str(form.get(f, "")) for f in (*FORM_FIELDS, "deployment_ids")}
    try:
        row = lti.register(
            db,
            **{f: values[f] for f in FORM_FIELDS},
            deployment_ids=lti.deployment_list(values["deployment_ids"]),
            created_by=user,
        )
    except FieldError as exc:
        db.rollback()
        return _page(request, db, settings, status_code=422, errors={exc.field: exc.message}, form=values)
    return _page(request, db, settings, done=f"Registered {row.name} ({row.issuer}, client id {row.client_id}).")


def _link_or_404(db, link_id: int):
    row = lti.link(db, link_id=link_id)
    if row is None:
        raise NotFound(f"There is no LTI link {link_id}.")
    return row


@staff.post("/lti/links/{link_id}/roster")
def roster(request: Request, db: SessionDep, settings: SettingsDep, user: InstructorUser, link_id: DbInt) -> Response:
    link = _link_or_404(db, link_id)
    result = lti_sync.sync_roster(db, link=link, key=lti.tool_key(settings.data_dir))
    done = (
        f"Roster of {link.context_title or link.context_id}: {result.members} members, {result.created} new "
        f"accounts, {result.roles_added} roles added."
    )
    return _page(request, db, settings, done=done)


@staff.post("/lti/links/{link_id}/grades")
def grades(request: Request, db: SessionDep, settings: SettingsDep, user: InstructorUser, link_id: DbInt) -> Response:
    link = _link_or_404(db, link_id)
    result = lti_sync.send_grades(db, link=link, key=lti.tool_key(settings.data_dir))
    done = (
        f"Grades for {link.target}: {result.sent} sent, {result.already} sent before, {result.without_grade} "
        "learners without a released grade."
    )
    return _page(request, db, settings, done=done)


@staff.post("/lti/links/{link_id}/practice")
def practice(request: Request, db: SessionDep, settings: SettingsDep, user: InstructorUser, link_id: DbInt) -> Response:
    link = _link_or_404(db, link_id)
    sent = lti_sync.send_practice(db, link=link, key=lti.tool_key(settings.data_dir))
    return _page(request, db, settings, done=f"Practice scores for {link.target}: {sent} sent.")


router.include_router(launches)
router.include_router(staff)
