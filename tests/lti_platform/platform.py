"""A minimal LTI 1.3 platform (an LMS's side) for the tests, built on joserfc, served over real HTTP by uvicorn.

It knows nothing of the course's code: it signs id_tokens with its own RSA key, publishes its JWKS, answers
the OIDC authorization request with the form an LMS posts to the tool, issues OAuth2 access tokens for a
client assertion signed with the tool's key (checked against the tool's published JWKS), and serves Names and
Role Provisioning (paged, two members a page) and the Assignment and Grade Services' scores endpoint.

A second platform, built on the `lti1p3platform` package from the package index rather than written here, is
tests/lti_platform/reference.py: the tests drive both, so neither this platform's reading of the specification nor
pylti1p3's is the only one the course is checked against.

Several LMS courses (contexts): each member belongs to some, a launch names one, the roster lists one course's
members, and each score records the course its column belongs to and whether the person is in it, so a test can
see a grade sent to the wrong course.

    platform = Platform.start(tool_jwks=...)          one per test module
    platform.login_params(user, ..., context=...)    what the LMS sends to the tool's login initiation URL
    platform.resign(id_token, key=..., drop=(), **changes)   a changed copy of an id_token (tests of refusals)
    platform.scores, platform.deep_link_items         what the tool sent back
"""

from __future__ import annotations

import html
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field

import uvicorn
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from tests.conftest import free_port

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
LEARNER = f"{MEMBERSHIP}#Learner"
INSTRUCTOR = f"{MEMBERSHIP}#Instructor"
TA = f"{MEMBERSHIP}/Instructor#TeachingAssistant"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCHOOL = "https://school.example.edu"
NRPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"


COURSE = "course-42"
TITLES = {COURSE: "GPU Systems, fall term"}


@dataclass
class Member:
    sub: str
    name: str
    email: str
    roles: list[str]
    contexts: list[str] = field(default_factory=lambda: [COURSE])
    status: str = "Active"


@dataclass
class Platform:
    base: str
    issuer: str = "https://lms.example.edu"
    client_id: str = "course-tool-1"
    deployment_id: str = "dep-1"
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "lms-key-1"}))
    tool_jwks: dict = field(default_factory=dict)  # the tool's, as published at its /lti/jwks.json
    members: dict[str, Member] = field(default_factory=dict)
    messages: dict[str, dict] = field(default_factory=dict)  # lti_message_hint -> what the launch is
    tokens: dict[str, set[str]] = field(default_factory=dict)  # access token -> scopes
    columns: dict[str, str] = field(default_factory=dict)  # line item -> the course its column is in
    scores: list[dict] = field(default_factory=list)
    deep_link_items: list[dict] = field(default_factory=list)
    down: bool = False  # the gradebook answers 503, as an LMS in maintenance does
    server: uvicorn.Server | None = None

    # --- test-side API ---------------------------------------------------------------------------------------

    @classmethod
    def start(cls) -> Platform:
        port = free_port()
        platform = cls(base=f"http://127.0.0.1:{port}")
        app = Starlette(
            routes=[
                Route("/jwks", platform._jwks),
                Route("/auth", platform._auth),
                Route("/token", platform._token, methods=["POST"]),
                Route("/memberships/{context}", platform._memberships),
                Route("/lineitems/{item}/scores", platform._score, methods=["POST"]),
                Route("/deep_link_return", platform._deep_link_return, methods=["POST"]),
            ]
        )
        platform.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        threading.Thread(target=platform.server.run, daemon=True).start()
        deadline = time.monotonic() + 10
        while not platform.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the test platform did not start within 10 s")
            time.sleep(0.02)
        return platform

    def stop(self) -> None:
        if self.server:
            self.server.should_exit = True

    def registration(self) -> dict:
        """What an instructor copies from the LMS into the course's registration form."""
        return {
            "name": "Test LMS",
            "issuer": self.issuer,
            "client_id": self.client_id,
            "deployment_ids": self.deployment_id,
            "auth_login_url": f"{self.base}/auth",
            "auth_token_url": f"{self.base}/token",
            "key_set_url": f"{self.base}/jwks",
            "auth_audience": "",
        }

    def add_member(self, sub: str, name: str, roles: list[str], contexts: tuple[str, ...] = (COURSE,)) -> Member:
        self.members[sub] = Member(sub, name, f"{sub}@students.example.edu", roles, list(contexts))
        return self.members[sub]

    def login_params(
        self,
        sub: str,
        *,
        kind: str = "resource",
        link: str = "link-1",
        custom: dict | None = None,
        lineitem: str = "1",
        context: str = COURSE,
    ) -> dict:
        hint = secrets.token_hex(8)
        message = {"kind": kind, "link": link, "custom": custom or {}, "lineitem": lineitem, "context": context}
        self.messages[hint] = message
        return {
            "iss": self.issuer,
            "login_hint": sub,
            "target_link_uri": "http://testserver/lti/launch",
            "lti_message_hint": hint,
            "client_id": self.client_id,
            "lti_deployment_id": self.deployment_id,
        }

    def sign(self, claims: dict, key: RSAKey | None = None) -> str:
        key = key or self.key
        return jwt.encode({"alg": "RS256", "kid": self.key.kid}, claims, key)

    def claims_of(self, token: str) -> dict:
        return dict(jwt.decode(token, self.key).claims)

    def resign(self, token: str, key: RSAKey | None = None, drop: tuple[str, ...] = (), **changes) -> str:
        """The id_token's claims less `drop` and with `changes` (names starting lti_ are LTI claim names), signed by
        `key`: a forgery when that is not the platform's key, though its header still names the platform's kid."""
        claims = self.claims_of(token)
        for name in drop:
            claims.pop(name, None)
        for name, value in changes.items():
            claims[LTI + name.removeprefix("lti_") if name.startswith("lti_") else name] = value
        return self.sign(claims, key)

    # --- the platform's endpoints ---------------------------------------------------------------------------

    async def _jwks(self, request: Request) -> Response:
        return JSONResponse({"keys": [self.key.as_dict(private=False)]})

    async def _auth(self, request: Request) -> Response:
        q = request.query_params
        if q.get("client_id") != self.client_id or q.get("response_type") != "id_token" or q.get("scope") != "openid":
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        message = self.messages.pop(q.get("lti_message_hint", ""), None)
        member = self.members.get(q.get("login_hint", ""))
        if message is None or member is None:
            return JSONResponse({"error": "login_required"}, status_code=400)
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": self.client_id,
            "sub": member.sub,
            "iat": now,
            "exp": now + 300,
            "nonce": q["nonce"],
            "name": member.name,
            "email": member.email,
            LTI + "version": "1.3.0",
            LTI + "deployment_id": self.deployment_id,
            LTI + "roles": member.roles,
            LTI + "context": {"id": message["context"], "title": TITLES.get(message["context"], message["context"])},
            LTI + "custom": message["custom"],
            # the page the LMS shows the link on: Canvas's issuer is not the school's domain that frames the tool
            LTI + "launch_presentation": {"document_target": "iframe", "return_url": SCHOOL + "/courses/42"},
            "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": {
                "context_memberships_url": f"{self.base}/memberships/{message['context']}",
                "service_versions": ["2.0"],
            },
        }
        if message["kind"] == "deep":
            claims[LTI + "message_type"] = "LtiDeepLinkingRequest"
            claims["https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"] = {
                "deep_link_return_url": f"{self.base}/deep_link_return",
                "accept_types": ["ltiResourceLink"],
                "accept_presentation_document_targets": ["iframe", "window"],
                "data": "opaque-42",
            }
        else:
            claims[LTI + "message_type"] = "LtiResourceLinkRequest"
            claims[LTI + "target_link_uri"] = q["redirect_uri"]
            claims[LTI + "resource_link"] = {"id": message["link"], "title": "Course link"}
            self.columns[message["lineitem"]] = message["context"]
            claims["https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"] = {
                "scope": [SCORE_SCOPE, LINEITEM_SCOPE],
                "lineitems": f"{self.base}/lineitems",
                "lineitem": f"{self.base}/lineitems/{message['lineitem']}",
            }
        token, state = self.sign(claims), q["state"]
        page = (
            f'<form method="post" action="{html.escape(q["redirect_uri"])}">'
            f'<input type="hidden" name="id_token" value="{token}">'
            f'<input type="hidden" name="state" value="{html.escape(state)}"></form>'
        )
        return HTMLResponse(page)

    def _tool_claims(self, token: str) -> dict:
        decoded = jwt.decode(token, KeySet.import_key_set(self.tool_jwks))
        return dict(decoded.claims)

    async def _token(self, request: Request) -> Response:
        form = await request.form()
        if form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        try:
            claims = self._tool_claims(str(form.get("client_assertion", "")))
            jwt.JWTClaimsRegistry(
                iss={"essential": True, "value": self.client_id},
                sub={"essential": True, "value": self.client_id},
                aud={"essential": True, "value": f"{self.base}/token"},
            ).validate(claims)
        except Exception as exc:  # any failure of the assertion is the client's: 401 says which
            return JSONResponse({"error": "invalid_client", "error_description": str(exc)}, status_code=401)
        access = secrets.token_urlsafe(16)
        self.tokens[access] = set(str(form.get("scope", "")).split())
        return JSONResponse({"access_token": access, "token_type": "bearer", "expires_in": 3600})

    def _scopes(self, request: Request) -> set[str]:
        auth = request.headers.get("authorization", "")
        return self.tokens.get(auth.removeprefix("Bearer "), set())

    async def _memberships(self, request: Request) -> Response:
        if NRPS_SCOPE not in self._scopes(request):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        page = int(request.query_params.get("page", "0"))
        context = request.path_params["context"]
        everyone = [
            {"user_id": m.sub, "name": m.name, "email": m.email, "roles": m.roles, "status": m.status}
            for m in self.members.values()
            if context in m.contexts
        ]
        chunk = everyone[2 * page : 2 * page + 2]
        headers = {}
        if 2 * page + 2 < len(everyone):
            headers["link"] = f'<{self.base}/memberships/{context}?page={page + 1}>; rel="next"'
        body = {"id": str(request.url), "context": {"id": context}, "members": chunk}
        return JSONResponse(
            body, headers=headers, media_type="application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
        )

    async def _score(self, request: Request) -> Response:
        if SCORE_SCOPE not in self._scopes(request):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        if self.down:
            return JSONResponse({"error": "maintenance"}, status_code=503)
        if request.headers.get("content-type") != "application/vnd.ims.lis.v1.score+json":
            return JSONResponse({"error": "unsupported content type"}, status_code=415)
        item, score = request.path_params["item"], await request.json()
        context = self.columns.get(item)
        member = self.members.get(str(score.get("userId")))
        in_course = member is not None and context in member.contexts and member.status == "Active"
        self.scores.append({"lineitem": item, "context": context, "in_course": in_course, **score})
        return Response(status_code=204)

    async def _deep_link_return(self, request: Request) -> Response:
        form = await request.form()
        claims = self._tool_claims(str(form.get("JWT", "")))
        jwt.JWTClaimsRegistry(
            iss={"essential": True, "value": self.client_id}, aud={"essential": True, "value": self.issuer}
        ).validate(claims)
        assert claims[LTI + "message_type"] == "LtiDeepLinkingResponse"
        assert claims["https://purl.imsglobal.org/spec/lti-dl/claim/data"] == "opaque-42"
        self.deep_link_items.extend(claims["https://purl.imsglobal.org/spec/lti-dl/claim/content_items"])
        return HTMLResponse("<p>Link added</p>")


def new_key() -> RSAKey:
    """A key that is not the platform's: what a forger signs with."""
    return RSAKey.generate_key(2048, parameters={"kid": f"forger-{uuid.uuid4().hex[:6]}"})


def form_fields(page: str) -> tuple[str, dict[str, str]]:
    """The action and hidden fields of an auto-posting form (the platform's, or the tool's deep-linking answer)."""
    import re

    action = html.unescape(re.search(r'<form[^>]*action="([^"]+)"', page).group(1))
    fields = {html.unescape(n): html.unescape(v) for n, v in re.findall(r'name="([^"]+)" value="([^"]*)"', page)}
    return action, fields
