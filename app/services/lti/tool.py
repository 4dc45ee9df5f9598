"""pylti1p3 (2.0.0) wired to this course: it ships Django and Flask adapters only, so these are the small
framework-free ones it asks for, fed plain parameters by app/web/routes/lti.py.

    LtiRequest        pylti1p3's Request: the login's or launch's parameters (query and form), and https or not
    DbStorage         its LaunchDataStorage: keys in the lti_states table, each with an expiry
    ServerCookies     its CookieService, kept server-side: the OIDC `state` is looked up by its own value
    ToolConf          its ToolConfAbstract: registrations and deployments from the database, the tool's key
    Login             its OIDCLogin: the redirect to the platform, with the state bound to its nonce
    Launch            its MessageLaunch, each check named, so a refused launch says which one failed

Why state lives on the server: a launch is a cross-site POST from the LMS, often inside an iframe, and the
course's cookies are SameSite=Lax, which such a POST does not carry (and browsers block third-party cookies
in iframes anyway). pylti1p3's defaults keep the state in a cookie and the nonce in the session; here both are
rows keyed by the state value, bound together at login and deleted at the launch that uses them, so a replayed
launch (the same state again) or one whose nonce is not the one issued with its state is refused.
"""

from __future__ import annotations

import typing as t
from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit

import jwt
import requests
from pylti1p3.cookie import CookieService
from pylti1p3.deployment import Deployment
from pylti1p3.exception import LtiException, OIDCException
from pylti1p3.launch_data_storage.base import LaunchDataStorage
from pylti1p3.message_launch import MessageLaunch
from pylti1p3.oidc_login import OIDCLogin
from pylti1p3.redirect import Redirect
from pylti1p3.registration import Registration
from pylti1p3.request import Request
from pylti1p3.session import SessionService
from pylti1p3.tool_config.abstract import ToolConfAbstract
from sqlalchemy.orm import Session

from app.core.models import LtiPlatform
from app.services.lti import registry as lti

HTTP_TIMEOUT_S = 10  # each call to the LMS (JWKS, token, roster, scores): a hung LMS must not hold a worker thread
JWKS_CACHE_S = 300  # a platform that rotates its key is heard within five minutes; a burst of launches fetches once
CLOCK_LEEWAY_S = 5  # iat/exp: the LMS's clock and ours may differ by a few seconds


class TimedSession(requests.Session):
    """pylti1p3 calls the LMS through a requests.Session without a timeout; this one always has one."""

    def request(self, method, url, *args, **kwargs):
        kwargs.setdefault("timeout", HTTP_TIMEOUT_S)
        return super().request(method, url, *args, **kwargs)


class Refused(Exception):
    """A launch refused: `check` names the failed check (state, format, nonce, audience, azp, signature, exp, iat,
    nbf, expired, deployment, message, context, role, size; at login initiation iss, login_hint, registration,
    login), `message` says what was wrong in words an instructor can act on."""

    def __init__(self, check: str, message: str):
        super().__init__(f"{check}: {message}")
        self.check, self.message = check, message


class LtiRequest(Request):
    def __init__(self, params: Mapping[str, str], *, secure: bool):
        self._params = dict(params)
        self._secure = secure

    @property
    def session(self) -> dict:  # unused: DbStorage replaces pylti1p3's session storage
        return {}

    def is_secure(self) -> bool:
        return self._secure

    def get_param(self, key: str) -> str:
        return self._params.get(key)  # type: ignore[return-value]  # pylti1p3 treats None as missing


class DbStorage(LaunchDataStorage[t.Any]):
    def __init__(self, db: Session):
        super().__init__()
        self.db = db

    def get_session_cookie_name(self) -> None:  # keyed by state and nonce, never by a browser's cookie
        return None

    def can_set_keys_expiration(self) -> bool:
        return True

    def get_value(self, key: str) -> t.Any:
        return lti.state_get(self.db, key=self._prepare_key(key))

    def set_value(self, key: str, value: t.Any, exp: int | None = None) -> None:
        lti.state_put(self.db, key=self._prepare_key(key), value=value, ttl_s=min(exp or lti.STATE_S, 86400))

    def check_value(self, key: str) -> bool:
        return self.get_value(key) is not None


class ServerCookies(CookieService):
    def __init__(self, db: Session):
        self.db = db

    def get_cookie(self, name: str) -> str | None:
        value = lti.state_get(self.db, key=f"cookie-{name}")
        return value if isinstance(value, str) else None

    def set_cookie(self, name: str, value: str | int, exp: int | None = 3600) -> None:
        lti.state_put(self.db, key=f"cookie-{name}", value=str(value), ttl_s=exp or lti.STATE_S)


def registration_of(platform: LtiPlatform, key: lti.ToolKey) -> Registration:
    reg = Registration()
    reg.set_issuer(platform.issuer).set_client_id(platform.client_id)
    reg.set_auth_login_url(platform.auth_login_url).set_auth_token_url(platform.auth_token_url)
    reg.set_key_set_url(platform.key_set_url)
    if platform.auth_audience:
        reg.set_auth_audience(platform.auth_audience)
    reg.set_tool_private_key(key.private_pem).set_tool_public_key(key.public_pem)
    return reg


class ToolConf(ToolConfAbstract[LtiRequest]):
    """Every issuer may have several client ids (pylti1p3's recommended relation for new tools)."""

    def __init__(self, db: Session, key: lti.ToolKey):
        self.db, self.key = db, key
        self.platform: LtiPlatform | None = None  # the registration the last lookup found

    def check_iss_has_one_client(self, iss: str) -> bool:
        return False

    def check_iss_has_many_clients(self, iss: str) -> bool:
        return True

    def find_registration_by_issuer(self, iss: str, *args, **kwargs) -> Registration:
        return self.find_registration_by_params(iss, None, *args, **kwargs)  # type: ignore[arg-type]

    def find_registration_by_params(self, iss: str, client_id: str, *args, **kwargs) -> Registration:
        self.platform = lti.find_platform(self.db, issuer=iss, client_id=client_id)
        return registration_of(self.platform, self.key) if self.platform else None  # type: ignore[return-value]

    def find_deployment(self, iss: str, deployment_id: str) -> Deployment | None:
        return self.find_deployment_by_params(iss, deployment_id, None)  # type: ignore[arg-type]

    def find_deployment_by_params(
        self, iss: str, deployment_id: str, client_id: str, *args, **kwargs
    ) -> Deployment | None:
        found = lti.find_platform(self.db, issuer=iss, client_id=client_id)
        if found is None or not lti.has_deployment(self.db, platform_id=found.id, deployment_id=deployment_id):
            return None
        return Deployment().set_deployment_id(deployment_id)

    def public_jwks(self) -> dict:
        return {"keys": [Registration.get_jwk(self.key.public_pem)]}


class LocationRedirect(Redirect[str]):
    def __init__(self, url: str):
        self.url = url

    def do_redirect(self) -> str:
        return self.url

    def do_js_redirect(self) -> str:
        return self.url

    def set_redirect_url(self, location: str) -> None:
        self.url = location

    def get_redirect_url(self) -> str:
        return self.url


def _services(db: Session, request: LtiRequest) -> tuple[SessionService, ServerCookies, DbStorage]:
    return SessionService(request), ServerCookies(db), DbStorage(db)


class Login(OIDCLogin[LtiRequest, ToolConf, SessionService, ServerCookies, str]):
    # pylti1p3 (oidc_login.py `validate_oidc_login`) raises OIDCException with these words; each is a check of its own
    MISSING = {"Could not find issuer": "iss", "Could not find login hint": "login_hint"}

    def __init__(self, db: Session, request: LtiRequest, conf: ToolConf):
        session, cookies, storage = _services(db, request)
        super().__init__(request, conf, session, cookies, launch_data_storage=storage)
        self.db = db

    def get_redirect(self, url: str) -> Redirect[str]:
        return LocationRedirect(url)

    def _refusal(self, exc: Exception) -> Refused:
        """The login initiation's failed check, named, in words an instructor comparing registrations can act on."""
        iss, client_id = self._get_request_param("iss"), self._get_request_param("client_id")
        missing = self.MISSING.get(str(exc))
        if missing:
            return Refused(missing, f"the login initiation has no {missing} parameter; the LMS must send it")
        if str(exc) == "Could not find registration details":
            return Refused(
                "registration",
                f"no platform is registered with issuer {iss!r} and client id {client_id!r}: register the platform "
                "on the LTI page, or compare its issuer and client id with the LMS's",
            )
        return Refused("login", f"{exc} (issuer {iss!r}): register the platform on the LTI page first")

    def auth_url(self, launch_url: str) -> str:
        """The platform's authorization URL to send the browser to; raises Refused("login", …)."""
        try:
            url = self._prepare_redirect_url(launch_url)
        except (LtiException, OIDCException) as exc:
            raise self._refusal(exc) from exc
        query = parse_qs(urlsplit(url).query)
        state, nonce = query["state"][0], query["nonce"][0]
        platform = t.cast(ToolConf, self._tool_config).platform
        assert platform is not None
        lti.state_put(self.db, key=f"launch-{state}", value={"nonce": nonce, "platform_id": platform.id})
        return url


_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"


class Launch(MessageLaunch[LtiRequest, ToolConf, SessionService, ServerCookies]):
    def __init__(self, db: Session, request: LtiRequest, conf: ToolConf):
        session, cookies, storage = _services(db, request)
        super().__init__(request, conf, session, cookies, launch_data_storage=storage, requests_session=TimedSession())
        self.db = db
        self._issued: dict | None = None
        self.set_public_key_caching(storage, JWKS_CACHE_S)

    def _get_request_param(self, key: str) -> str:
        return self._request.get_param(key)

    @classmethod
    def restore(cls, db: Session, conf: ToolConf, launch_id: str) -> Launch:
        request = LtiRequest({}, secure=True)
        session, cookies, storage = _services(db, request)
        try:
            return t.cast(Launch, cls.from_cache(launch_id, request, conf, session, cookies, storage))
        except LtiException as exc:
            raise Refused("state", "this launch is no longer known; launch the link from the LMS again") from exc

    @classmethod
    def from_cache(cls, launch_id, request, tool_config, session_service=None, cookie_service=None,
                   launch_data_storage=None, requests_session=None):  # fmt: skip
        obj = cls(launch_data_storage.db, request, tool_config)
        launch_data = obj.get_session_service().get_launch_data(launch_id)
        if not launch_data:
            raise LtiException("Launch data not found")
        return (
            obj.set_launch_id(launch_id)
            .set_auto_validation(enable=False)
            .set_jwt({"body": launch_data})
            .set_restored()
            .validate_registration()
        )

    def validate(self) -> Launch:
        """pylti1p3's checks in its order, each failure named; the launch is cached for deep linking."""
        if self._restored:
            raise LtiException("Can't validate restored launch")
        self._validated = True
        try:
            self.validate_state()
            self._step("format", self.validate_jwt_format)
            self.validate_nonce()
            self.validate_registration()
            self.validate_jwt_signature()
            self._step("deployment", self.validate_deployment)
            self._step("message", self.validate_message)
            self.save_launch_data()
        except Exception:
            self._validated = False
            raise
        return self

    @staticmethod
    def _step(check: str, fn: t.Callable[[], object]) -> None:
        try:
            fn()
        except LtiException as exc:
            detail = {
                "deployment": "the deployment id in the launch is not registered for this platform",
                "format": "the id_token is not a JWT",
            }.get(check, str(exc))
            raise Refused(check, f"{detail} ({exc})") from exc

    def validate_state(self) -> Launch:
        state = self._get_request_param("state")
        if not state:
            raise Refused("state", "the launch carries no state: it did not come through this course's login")
        issued = lti.state_take(self.db, key=f"launch-{state}")
        if not isinstance(issued, dict):
            raise Refused(
                "state",
                "the launch's state is unknown, already used or expired (a launch replayed, or over ten minutes "
                "after its login)",
            )
        self._issued = issued
        return self

    def validate_nonce(self) -> Launch:
        nonce = self._get_jwt_body().get("nonce")
        if not self._issued or not nonce or nonce != self._issued.get("nonce"):
            raise Refused("nonce", "the id_token's nonce is not the one issued with this launch's state")
        lti.state_take(self.db, key=f"lti1p3-nonce-{nonce}")  # pylti1p3's own record of it, spent with the state
        return self

    def get_client_id(self) -> str:
        """The client id the id_token is for. `aud` may be one string or a list (OIDC Core 2): the registered client
        id may stand anywhere in the list, not only first. With several entries, `azp` names the one the token was
        issued to (IMS Security Framework 5.1.3 steps 3-5); it is checked in validate_jwt_signature."""
        body = self._get_jwt_body()
        aud = body.get("aud")
        if isinstance(aud, str):
            return aud
        if not isinstance(aud, list) or not aud or not all(isinstance(a, str) for a in aud):
            raise LtiException("the id_token's aud is neither a client id nor a list of them")
        azp = body.get("azp")
        iss = body.get("iss")
        candidates = [azp, *aud] if isinstance(azp, str) and azp in aud else aud
        for candidate in candidates:
            if isinstance(iss, str) and lti.find_platform(self.db, issuer=iss, client_id=candidate) is not None:
                return candidate
        return aud[0]

    def validate_registration(self) -> Launch:
        try:
            super().validate_registration()
        except LtiException as exc:
            body = self._get_jwt_body()
            raise Refused(
                "audience",
                f"the id_token's audience {body.get('aud')!r} is not a client id registered for issuer "
                f"{body.get('iss')!r}",
            ) from exc
        conf_platform = self._tool_config.platform
        if self._issued and conf_platform and self._issued.get("platform_id") != conf_platform.id:
            raise Refused("audience", "the launch names another platform registration than its login did")
        return self

    def validate_jwt_signature(self) -> Launch:
        """pylti1p3 decodes with verify_aud off; here the audience and issuer are checked with the signature, and
        the claims the IMS Security Framework (1.0, 5.1.3) requires of an id_token: `exp` and `iat` present (a token
        without them would be good forever), `nbf` honoured when present, and `azp` equal to this client id when
        present, and present whenever `aud` names more than one client."""
        try:
            public_key, alg = self.get_public_key()
        except LtiException as exc:
            raise Refused("signature", f"no key of the platform's JWKS matches the id_token ({exc})") from exc
        registration = self._registration
        assert registration is not None, "validate_registration ran first"
        client_id = registration.get_client_id()
        try:
            claims = jwt.decode(
                self._get_id_token(),
                public_key,
                algorithms=[alg],
                audience=client_id,
                issuer=registration.get_issuer(),
                leeway=CLOCK_LEEWAY_S,
                options={"require": ["exp", "iat"], "verify_nbf": True, "verify_iat": True},
            )
        except jwt.MissingRequiredClaimError as exc:
            name = exc.claim if exc.claim in ("exp", "iat") else "message"
            what = {"exp": "an expiry time", "iat": "an issue time"}.get(exc.claim, f"its {exc.claim} claim")
            raise Refused(
                name, f"the id_token has no {exc.claim} ({what}), which an LTI 1.3 id_token must carry"
            ) from exc
        except jwt.ExpiredSignatureError as exc:
            raise Refused("expired", "the id_token has expired (its exp is in the past)") from exc
        except jwt.ImmatureSignatureError as exc:
            if "nbf" in str(exc):
                raise Refused("nbf", "the id_token is not valid yet (its nbf is in the future)") from exc
            raise Refused("iat", "the id_token says it was issued in the future (its iat)") from exc
        except jwt.InvalidAudienceError as exc:
            raise Refused("audience", f"the id_token is not addressed to this course's client id ({exc})") from exc
        except jwt.InvalidIssuedAtError as exc:
            raise Refused("iat", f"the id_token's iat is not a time ({exc})") from exc
        except jwt.InvalidTokenError as exc:
            raise Refused(
                "signature", f"the id_token's signature does not verify with the platform's key ({exc})"
            ) from exc
        aud, azp = claims.get("aud"), claims.get("azp")
        if isinstance(aud, list) and len(aud) > 1 and azp is None:
            raise Refused("azp", f"the id_token names several audiences ({', '.join(map(str, aud))}) but no azp")
        if azp is not None and azp != client_id:
            raise Refused("azp", f"the id_token was issued to {azp!r} (its azp), not to this course's client id")
        return self

    # --- what the launch says -----------------------------------------------------------------------------

    def claim(self, name: str, default: t.Any = None) -> t.Any:
        return self._get_jwt_body().get(_CLAIM + name, default)

    @property
    def body(self) -> Mapping[str, t.Any]:
        return self._get_jwt_body()

    @property
    def platform(self) -> LtiPlatform:
        found = self._tool_config.platform
        assert found is not None, "validated launches have a registration"
        return found
