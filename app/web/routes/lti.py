"""LTI 1.3 addresses the LMS and its users reach: login initiation, launches, the tool's JWKS, and the hand-offs.

    GET  /lti/jwks.json              the tool's public key set (a stable URL to give the LMS)
    GET|POST /lti/login              OIDC login initiation from the LMS -> redirect to its authorization URL
    POST /lti/launch                 the LMS posts the signed id_token here (resource link or deep linking)
    GET  /lti/enter/{ticket}         a verified launch's one-time hand-off: logs this browser in, opens the page
    POST /lti/deep-link              the instructor's pick in the deep-linking page -> signed answer to the LMS

The site admin's registrations and the classes' LMS pages are app/web/routes/lti_pages.py.

What a launch may change: it signs in (or makes) the account of its `sub` on that platform, maps its LMS course to
a class (a new one the first time), gives that person the role the LMS's roles map to *in that class only*
(app/services/lti/contexts.py), and records the link. It never gives a site role, never changes a registration,
and never touches another class. Every refusal is the page of lti/refused.html naming the failed check, never a
500, an oversized launch included.

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

from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from pylti1p3.deep_link_resource import DeepLinkResource
from pylti1p3.exception import LtiException
from pylti1p3.lineitem import LineItem
from starlette.concurrency import run_in_threadpool

from app.core.config import Settings
from app.core.models import User
from app.services.errors import FieldError, NotFound
from app.services.lti import contexts
from app.services.lti import registry as lti
from app.services.lti.tool import Launch, Login, LtiRequest, Refused, ToolConf
from app.web.deps import PostedForm, SessionDep, SettingsDep
from app.web.middleware.headers import CSP_NONCE_KEY, csp
from app.web.routes.auth import start_session
from app.web.templates import render

launches = APIRouter()  # posted by the LMS: authenticated by the id_token, not by our CSRF token (see above)
router = APIRouter()

# An id_token with every claim a platform sends is a few kilobytes; deep-linking settings and custom parameters
# add a few more. A launch larger than this is refused with the LTI page, read no further.
LAUNCH_LIMIT = 256 * 1024
# The route's own limit is set past anything a client could send, so that Starlette's body limit (which answers a
# bare "Content Too Large" in place of any page) never fires there; `_launch_form` enforces LAUNCH_LIMIT itself.
UNBOUNDED = 2**62

TOOL_PATHS = {"login": "/lti/login", "launch": "/lti/launch", "jwks": "/lti/jwks.json"}


def tool_base(request: Request, settings: Settings) -> str:
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
    launch_url = tool_base(request, settings) + TOOL_PATHS["launch"]

    def redirect_url() -> str:
        lti.purge_states(db)
        return Login(db, req, _conf(db, settings)).auth_url(launch_url)

    try:
        url = await run_in_threadpool(redirect_url)
    except Refused as exc:
        return _refused(request, exc)
    return RedirectResponse(url, status_code=302)


async def _launch_form(request: Request) -> dict[str, str]:
    """The launch's form fields, read up to LAUNCH_LIMIT; Refused("size") past it, Refused("format") for a body
    that is not a form."""
    too_large = Refused("size", f"the launch is larger than the {LAUNCH_LIMIT // 1024} KiB an LTI launch may be")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > LAUNCH_LIMIT:
        raise too_large
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise Refused("format", f"the launch is not a form post (its content type is {ctype[:60]!r})")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > LAUNCH_LIMIT:
            raise too_large
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=50, strict_parsing=False)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refused("format", f"the launch's form cannot be read ({exc})") from exc
    return dict(pairs)


@launches.post("/lti/launch", max_body_size=UNBOUNDED)
async def launch(request: Request, db: SessionDep, settings: SettingsDep) -> Response:
    try:
        params = await _launch_form(request)
    except Refused as exc:
        return _refused(request, exc, 413 if exc.check == "size" else 400)
    return await run_in_threadpool(_launch, request, db, settings, params)


def _launch(request: Request, db, settings: Settings, params: dict[str, str]) -> Response:
    message = Launch(db, LtiRequest(params, secure=request.url.scheme == "https"), _conf(db, settings))
    try:
        message.validate()
        return _launched(request, db, message)
    except Refused as exc:
        db.rollback()
        return _refused(request, exc, 403 if exc.check == "role" else 400)
    except FieldError as exc:
        db.rollback()
        return _refused(request, Refused(exc.field, exc.message))
    except LtiException as exc:  # a claim pylti1p3 could not read: the launch's, not ours
        db.rollback()
        return _refused(request, Refused("message", str(exc) or "the launch message is not valid LTI 1.3"))


def _claim_dict(message: Launch, name: str) -> dict:
    value = message.claim(name, {}) or {}
    if not isinstance(value, dict):
        raise Refused("message", f"the launch's {name} claim is not an object")
    return value


def _launched(request: Request, db, message: Launch) -> Response:
    """What a verified launch does (the module's docstring says what it may and may not change)."""
    platform = message.platform
    body = message.body
    sub = body.get("sub")
    if not isinstance(sub, str) or not sub.strip() or len(sub) > 255:
        raise Refused("message", "the id_token has no usable sub (the LMS's id of the user)")
    name = str(body["name"]) if isinstance(body.get("name"), str) else ""
    email = str(body["email"]) if isinstance(body.get("email"), str) else None
    context = contexts.context_for(db, platform=platform, claim=message.claim("context"))
    klass = contexts.class_of(db, context)
    role = contexts.class_role(message.claim("roles", []))
    frame = _frame_origins(message)
    if message.is_deep_link_launch():
        if role != "instructor":
            raise Refused("role", "only an instructor of the LMS course chooses what a link opens")
        user, _ = lti.user_for(db, platform=platform, sub=sub, name=name, email=email)
        contexts.seen(db, context=context, user_id=user.id, role=role)
        ticket = lti.issue_ticket(db, kind="deep_link", user=user, target=message.get_launch_id())
        ctx = {"ticket": ticket, "targets": lti.targets(db, klass=klass), "platform": platform, "klass": klass}
        return _framed_by(request, render(request, "lti/deep_link.html", ctx), frame=frame)
    if not message.is_resource_launch():
        raise Refused("message", "this course answers resource-link and deep-linking launches")
    custom = _claim_dict(message, "custom")
    link_claim = _claim_dict(message, "resource_link")
    link_id = link_claim.get("id")
    if not isinstance(link_id, str) or not link_id:
        raise Refused("message", "the launch names no resource link (its resource_link claim has no id)")
    target = lti.target(db, str(custom.get("target", "")), klass=klass)
    if target is None:
        known = lti.link_of(db, platform_id=platform.id, resource_link_id=link_id)
        target = lti.target(db, known.target, klass=klass) if known else None
    if target is None:
        raise Refused(
            "target",
            f"this link names no lesson that {klass.title} offers (custom target {str(custom.get('target', ''))[:80]!r});"
            " an instructor picks one with the LMS's deep-linking (“external tool”) dialog",
        )
    user, _ = lti.user_for(db, platform=platform, sub=sub, name=name, email=email)
    contexts.seen(db, context=context, user_id=user.id, role=role)
    lti.remember_link(
        db,
        platform=platform,
        deployment_id=str(message.claim("deployment_id", ""))[:255],
        resource_link_id=link_id[:255],
        target_key=target.key,
        context=context,
        nrps=_claim_or_none(body, "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"),
        ags=_claim_or_none(body, "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"),
    )
    lti.let_grade(db, klass=klass, user=user, role=role, target=target.key)
    ticket = lti.issue_ticket(db, kind="enter", user=user, target=target.path)
    ctx = {"ticket": ticket, "target": target, "who": user.display_name, "platform": platform, "klass": klass}
    return _framed_by(request, render(request, "lti/launch.html", ctx), frame=frame)


def _claim_or_none(body, name: str) -> dict | None:
    value = body.get(name)
    return value if isinstance(value, dict) else None


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
    if lti.target(db, key, klass=None) is None:
        raise FieldError("target", f"got {key[:80]!r}; pick one of the lessons or labs listed")
    row = lti.take_ticket(db, kind="deep_link", token=ticket)
    if row is None:
        return _refused(request, Refused("ticket", "this choice was sent already or expired: open the dialog again"))
    conf = _conf(db, settings)
    try:
        message = Launch.restore(db, conf, row.target)
    except Refused as exc:
        return _refused(request, exc)
    context = contexts.context_for(db, platform=message.platform, claim=message.claim("context"))
    klass = contexts.class_of(db, context)
    chosen = lti.target(db, key, klass=klass)
    if chosen is None:
        return _refused(request, Refused("target", f"{klass.title} does not offer {key[:80]!r}: open the dialog again"))
    resource = (
        DeepLinkResource()
        .set_url(tool_base(request, settings) + TOOL_PATHS["launch"])
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


router.include_router(launches)
