"""An LMS built on `lti1p3platform` (0.1.8, from the package index; its authors' reading of LTI 1.3, not ours), served
over real HTTP by uvicorn: the second platform the LTI tests drive, beside tests/lti_platform/platform.py.

The package does the protocol: the OIDC login initiation it sends the tool (OIDCLoginAbstract), the id_token it
builds and signs after the tool's authorization request (LTIAdvantageMessageLaunchAbstract: claims, NRPS, AGS and
deep-linking settings), the access tokens it issues for the tool's signed client assertion (get_access_token), its
Names and Role Provisioning and score services (NamesRoleProvisioningService, AssignmentsGradesService: they check
the access token and its scopes), and the deep-linking answer's verification (validate_deeplinking_resp). What is
here is the storage those abstract classes ask for (members, courses, line items) and Starlette routes around them.

    lms = Reference.start()                            one per test module
    lms.tool_jwks = ...                                the tool's published keys (the package verifies with them)
    lms.initiation(sub, context=..., custom=...)       the package's login initiation URL at the tool (a path + query)
    lms.sign(claims)                                   claims signed as the package signs (tests of refusals)
    lms.scores, lms.deep_link_items                    what the tool sent back
"""

from __future__ import annotations

import html
import secrets
import threading
import time
import typing as t
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.membership import Context
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.oidc_login import OIDCLoginAbstract
from lti1p3platform.registration import Registration
from lti1p3platform.request import Request as PackageRequest
from lti1p3platform.score import UpdateScoreStatus
from lti1p3platform.service_connector import AssignmentsGradesService, NamesRoleProvisioningService
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from tests.conftest import free_port

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
LEARNER, INSTRUCTOR, MENTOR = f"{MEMBERSHIP}#Learner", f"{MEMBERSHIP}#Instructor", f"{MEMBERSHIP}#Mentor"
TOOL_LAUNCH = "http://testserver/lti/launch"  # the tool under test is a TestClient app at this address


def _pem() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private.decode(), public.decode()


class Conf(LTI1P3PlatformConfAbstract):
    """The package's platform configuration: one registration of the tool."""

    def init_platform_config(self, **kwargs: t.Any) -> None:
        self._registration = kwargs["registration"]

    def get_registration_by_params(self, **kwargs: t.Any) -> Registration:
        return self._registration


class Req(PackageRequest):
    def build_metadata(self, request: t.Any) -> t.Any:
        return request  # already the package's TRequest dict


class Login(OIDCLoginAbstract):
    def set_lti_message_hint(self, **kwargs: t.Any) -> None:
        self._lti_message_hint = kwargs["hint"]

    def get_redirect(self, url: str) -> str:
        return url


class Launch(LTIAdvantageMessageLaunchAbstract):
    """The package's launch, fed the message the test asked for (by its lti_message_hint)."""

    def __init__(self, request: Req, conf: Conf, lms: Reference):
        super().__init__(request, conf)
        self.lms = lms

    def get_preflight_response(self) -> dict[str, t.Any]:
        return self._request.get_data  # type: ignore[union-attr]

    def prepare_launch(self, preflight_response: dict[str, t.Any]) -> None:
        message = self.lms.messages.pop(preflight_response.get("lti_message_hint", ""))
        member = self.lms.members[preflight_response["login_hint"]]
        self.set_user_data(member.sub, member.roles, member.name, f"{member.sub}@reference.example.edu")
        self.set_launch_context_claim(message["context"], context_title=f"Reference {message['context']}")
        self.set_custom_parameters_claim(message["custom"])
        self.set_nrps(f"{self.lms.base}/memberships/{message['context']}")
        if message["kind"] == "deep":
            self.set_dl(f"{self.lms.base}/deep_link_return", title="Pick", accept_types={"ltiResourceLink"})
        else:
            self.set_resource_link_claim(message["link"], title="Reference link")
            item = message["lineitem"]
            self.lms.columns[item] = message["context"]
            self.set_ags(f"{self.lms.base}/lineitems", f"{self.lms.base}/lineitems/{item}")

    def render_launch_form(self, launch_data: dict[str, t.Any], **kwargs: t.Any) -> HTMLResponse:
        page = (
            f'<form method="post" action="{html.escape(launch_data["launch_url"])}">'
            f'<input type="hidden" name="id_token" value="{launch_data["id_token"]}">'
            f'<input type="hidden" name="state" value="{html.escape(launch_data["state"])}"></form>'
        )
        return HTMLResponse(page)


class Scores(AssignmentsGradesService):
    """The package's score service; a score is kept with the course its column is in, and whether the person is
    in that course (an LMS that did not check would store it)."""

    lms: Reference

    def update_score(self, line_item_id: str, score: t.Any) -> UpdateScoreStatus:
        context = self.lms.columns.get(line_item_id)
        member = self.lms.members.get(str(score.get("userId")))
        in_course = member is not None and context in member.contexts
        self.lms.scores.append({"lineitem": line_item_id, "context": context, "in_course": in_course, **score})
        return UpdateScoreStatus.SUCCESS

    def find_lineitems(self, *args: t.Any, **kwargs: t.Any) -> t.Any:
        return {"content": [], "has_next": False}

    def find_lineitem(self, line_item_id: str) -> t.Any:
        return {"id": line_item_id}

    def create_lineitem(self, creation_data: t.Any) -> t.Any:
        return creation_data

    def update_lineitem(self, update_data: t.Any) -> t.Any:
        return update_data

    def delete_lineitem(self, line_item_id: str) -> None:
        return None

    def get_results(self, *args: t.Any, **kwargs: t.Any) -> t.Any:
        return {"content": [], "has_next": False}


class Roster(NamesRoleProvisioningService):
    lms: Reference
    context_id: str

    def get_member_data_page(self, *args: t.Any, **kwargs: t.Any) -> t.Any:
        content = [
            {"user_id": m.sub, "name": m.name, "roles": m.roles, "status": "Active"}
            for m in self.lms.members.values()
            if self.context_id in m.contexts
        ]
        return {"content": content, "has_next": False}

    def get_context_by_id(self) -> Context:
        return Context(id=self.context_id, label=self.context_id, title=f"Reference {self.context_id}")


@dataclass
class Member:
    sub: str
    name: str
    roles: list[str]
    contexts: list[str]


@dataclass
class Reference:
    base: str
    issuer: str = "https://reference-lms.example.edu"
    client_id: str = "reference-tool"
    deployment_id: str = "ref-dep-1"
    keys: tuple[str, str] = field(default_factory=_pem)  # (private, public) PEM
    tool_jwks: dict = field(default_factory=dict)
    members: dict[str, Member] = field(default_factory=dict)
    messages: dict[str, dict] = field(default_factory=dict)
    columns: dict[str, str] = field(default_factory=dict)
    scores: list[dict] = field(default_factory=list)
    deep_link_items: list[dict] = field(default_factory=list)
    server: uvicorn.Server | None = None

    @classmethod
    def start(cls) -> Reference:
        port = free_port()
        lms = cls(base=f"http://127.0.0.1:{port}")
        app = Starlette(
            routes=[
                Route("/jwks", lms._jwks),
                Route("/auth", lms._auth),
                Route("/token", lms._token, methods=["POST"]),
                Route("/memberships/{context}", lms._memberships),
                Route("/lineitems/{item}/scores", lms._score, methods=["POST"]),
                Route("/deep_link_return", lms._deep_link_return, methods=["POST"]),
            ]
        )
        lms.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        threading.Thread(target=lms.server.run, daemon=True).start()
        deadline = time.monotonic() + 10
        while not lms.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the reference platform did not start within 10 s")
            time.sleep(0.02)
        return lms

    def stop(self) -> None:
        if self.server:
            self.server.should_exit = True

    def registration(self) -> Registration:
        """The package's registration of the tool, built afresh each time (the tool's JWKS may have been given since)."""
        reg = (
            Registration()
            .set_iss(self.issuer)
            .set_client_id(self.client_id)
            .set_deployment_id(self.deployment_id)
            .set_launch_url(TOOL_LAUNCH)
            .set_deeplink_launch_url(TOOL_LAUNCH)
            .set_oidc_login_url("http://testserver/lti/login")
            .set_platform_private_key(self.keys[0])
            .set_platform_public_key(self.keys[1])
        )
        return reg.set_tool_key_set(self.tool_jwks) if self.tool_jwks else reg  # type: ignore[arg-type]

    def conf(self) -> Conf:
        return Conf(registration=self.registration())

    def registration_form(self) -> dict[str, str]:
        """What an admin copies from this LMS into the course's registration form."""
        return {
            "name": "Reference LMS",
            "issuer": self.issuer,
            "client_id": self.client_id,
            "deployment_ids": self.deployment_id,
            "auth_login_url": f"{self.base}/auth",
            "auth_token_url": f"{self.base}/token",
            "key_set_url": f"{self.base}/jwks",
            "auth_audience": "",
        }

    def add_member(self, sub: str, name: str, roles: list[str], contexts: tuple[str, ...]) -> Member:
        self.members[sub] = Member(sub, name, roles, list(contexts))
        return self.members[sub]

    def initiation(
        self,
        sub: str,
        *,
        context: str,
        custom: dict | None = None,
        kind: str = "resource",
        link: str = "ref-link",
        lineitem: str = "1",
    ) -> str:
        """The package's OIDC login initiation: the tool's login URL with iss, login_hint, lti_message_hint, client
        id and deployment id, as a path and query for the TestClient."""
        hint = secrets.token_hex(8)
        self.messages[hint] = {
            "kind": kind,
            "context": context,
            "custom": custom or {},
            "link": link,
            "lineitem": lineitem,
        }
        login = Login(None, self.conf())
        login.set_lti_message_hint(hint=hint)
        if kind == "deep":
            login.set_deeplinking_launch_url()
        url = login.initiate_login(sub)
        parts = urlsplit(url)
        return f"{parts.path}?{parts.query}"

    def sign(self, claims: dict) -> str:
        """Claims signed as the package signs an id_token (its key, its kid), with no expiry added."""
        reg = self.registration()
        return Registration.encode_and_sign(dict(claims), self.keys[0], headers={"kid": reg.get_kid()})

    @staticmethod
    def claims_of(token: str) -> dict:
        return jwt.decode(token, options={"verify_signature": False})

    # --- the platform's endpoints: each is the package's handler -------------------------------------------------

    async def _jwks(self, request: Request) -> Response:
        return JSONResponse(self.conf().get_jwks())

    async def _auth(self, request: Request) -> Response:
        req = Req(
            {"method": "GET", "get_data": dict(request.query_params), "form_data": {}, "headers": request.headers}
        )
        try:
            return Launch(req, self.conf(), self).lti_launch()
        except Exception as exc:  # the package refused the tool's authorization request
            return JSONResponse({"error": "invalid_request", "error_description": repr(exc)}, status_code=400)

    async def _token(self, request: Request) -> Response:
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        try:
            return JSONResponse(self.conf().get_access_token(form))
        except Exception as exc:  # a bad assertion is the client's: 401 says which
            return JSONResponse({"error": "invalid_client", "error_description": repr(exc)}, status_code=401)

    def _request(self, request: Request, body: t.Any = None) -> Req:
        return Req({"method": request.method, "get_data": dict(request.query_params), "form_data": {},
                    "headers": request.headers, "json": body})  # fmt: skip

    @staticmethod
    def _answer(resp) -> Response:
        return JSONResponse(resp.result if resp.result is not None else {"message": resp.message}, status_code=resp.code,
                            media_type=resp.media_type)  # fmt: skip

    async def _memberships(self, request: Request) -> Response:
        context = request.path_params["context"]
        service = Roster(self._request(request), self.conf(), f"{self.base}/memberships/{context}")
        service.lms, service.context_id = self, context
        return self._answer(service.handle_resp(service.handle_get_members))

    async def _score(self, request: Request) -> Response:
        service = Scores(self._request(request, await request.json()), self.conf(), f"{self.base}/lineitems")
        service.lms = self
        item = request.path_params["item"]
        return self._answer(service.handle_resp(service.handle_update_score, line_item_id=item))

    async def _deep_link_return(self, request: Request) -> Response:
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        self.deep_link_items.extend(self.conf().validate_deeplinking_resp(form))
        return HTMLResponse("<p>Link added</p>")
