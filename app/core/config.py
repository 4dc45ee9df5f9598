"""One settings object, read from the environment (COURSE_* variables and DATABASE_URL).

Two classes, one source. `CourseEnv` is what an operator writes: every variable's name, default, bounds
and reason, in the operator's units (hours, days, MiB); docs/settings.md is generated from it
(`python -m app settings-doc`). `Settings` is what the code reads: the same values in the code's units
(seconds, bytes, absolute paths), each field naming the variables it is read from and no default of its own,
built by `Settings.from_env`, and a frozen dataclass so a test can `dataclasses.replace` one value.

A value the app cannot use stops it with one line naming the variable, the value and what was expected
(`SettingsError`; `python -m app` prints it as `configuration error: ...`). Outside development a default
or missing secret key is refused, so a deployed server never signs sessions with a key printed in this file.
"""

from __future__ import annotations

import os
import secrets
import sys
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from app.core.envtypes import ON_OFF, Addresses, DatabaseUrl, Environment, Executor, LogLevel, OnOff, PublicUrl, SmtpUrl
from labs.api import MIB, default_job_memory_bytes

ROOT = Path(__file__).resolve().parents[2]
DEV_SECRET = "development-only-secret-change-me"


class SettingsError(ValueError):
    pass


# A key shorter than this is guessable offline from one signed cookie; token_urlsafe(48) gives 64 characters.
MIN_SECRET_CHARS = 32
MAKE_SECRET = 'python -c "import secrets; print(secrets.token_urlsafe(48))"'
# Accounts one address may register per 10 minutes: a handful of people sharing one network registering
# together fit; a script making accounts to multiply its job limits and queue turns does not.
REGISTRATIONS_PER_ADDRESS = 20
DEFAULT_SITE_URL = "http://127.0.0.1:8000"  # `serve`'s default --host and --port


class CourseEnv(BaseSettings):
    """The environment variables an operator sets, in the order docs/settings.md lists them. Unset or empty
    means the default. The bounds are the sane range, and a value outside them is a typo caught at start-up."""

    # Validation runs on variable names (the aliases); names are case-sensitive as the shell's are.
    model_config = SettingsConfigDict(frozen=True, case_sensitive=True, env_ignore_empty=True, extra="ignore")

    environment: Environment = Field(
        "development",
        alias="COURSE_ENV",
        description="`production`: `COURSE_SECRET_KEY` required, Secure cookies and HSTS on by default",
    )
    secret_key: str = Field(
        "",
        alias="COURSE_SECRET_KEY",
        json_schema_extra={"accepts": f"text; in production at least {MIN_SECRET_CHARS} characters"},
        description=(
            f"signs session cookies; unset: a published development key (test: a random one), refused off "
            f"loopback; in production required, at least {MIN_SECRET_CHARS} characters (`{MAKE_SECRET}`)"
        ),
    )
    data_dir: Path | None = Field(
        None,
        alias="COURSE_DATA_DIR",
        description=(
            "the SQLite file (`course.db`), job bundles (`jobs/`) and uploads (`bundles/`); unset: `data/` in the "
            "checkout"
        ),
    )
    lessons_dir: Path | None = Field(
        None,
        alias="COURSE_LESSONS_DIR",
        description="the lesson folders published at start-up; unset: `lessons/` in the checkout",
    )
    database_url: DatabaseUrl = Field(
        "",
        alias="DATABASE_URL",
        json_schema_extra={"accepts": "a `postgresql+psycopg://` (or `sqlite:///`) URL"},
        description=(
            "the database, `postgresql+psycopg://user:pw@host/db`, the password percent-encoded (`@` as `%40`, "
            "`/` as `%2F`, `:` as `%3A`, `%` as `%25`; an unencoded `@` is refused); unset: the SQLite file "
            "`course.db` in the data folder"
        ),
    )
    secure_cookies: OnOff | None = Field(
        None,
        alias="COURSE_SECURE_COOKIES",
        description="cookies only over HTTPS, and HSTS; unset: on in production; off for a plain-HTTP trial",
    )
    web_processes: int = Field(
        1,
        ge=1,
        le=64,
        alias="COURSE_WEB_PROCESSES",
        description="uvicorn processes serving HTTP (lab workers are started once, not per process)",
    )
    web_concurrency: int = Field(
        8,
        ge=1,
        le=256,
        alias="COURSE_WEB_CONCURRENCY",
        description=(
            "requests one web process works on at once; its threads and database connections are this plus "
            "its password-hashing slots (cores ÷ (2 × `COURSE_WEB_PROCESSES`), at least 1)"
        ),
    )
    web_queue: int = Field(
        512,
        ge=0,
        le=100_000,
        alias="COURSE_WEB_QUEUE",
        description="requests one web process keeps waiting for a slot; beyond that, 503 with Retry-After",
    )
    web_queue_timeout: int = Field(
        15,
        ge=1,
        le=120,
        alias="COURSE_WEB_QUEUE_TIMEOUT",
        description="seconds a request waits for a slot (or a database lock) before a 503",
    )
    web_max_connections: int = Field(
        4096,
        ge=16,
        le=1_000_000,
        alias="COURSE_WEB_MAX_CONNECTIONS",
        description="open HTTP connections per web process, idle ones too (uvicorn's hard cap)",
    )
    web_connections_per_address: int = Field(
        256,
        ge=1,
        le=1_000_000,
        alias="COURSE_WEB_CONNECTIONS_PER_ADDRESS",
        description=(
            "open connections one client address (an IPv6 /64) may hold per web process; a class behind one NAT "
            "is a few hundred; the proxies in `COURSE_FORWARDED_ALLOW_IPS` are not capped"
        ),
    )
    web_header_timeout: int = Field(
        5,
        ge=1,
        le=60,
        alias="COURSE_WEB_HEADER_TIMEOUT",
        description="seconds a connection may take to send a request's headers before it is closed",
    )
    web_body_timeout: int = Field(
        10,
        ge=1,
        le=120,
        alias="COURSE_WEB_BODY_TIMEOUT",
        description=(
            "seconds a request body may take to arrive, plus one per 64 KiB of it; beyond, 408 and the "
            "connection closed"
        ),
    )
    executor: Executor = Field(
        "embedded",
        alias="COURSE_EXECUTOR",
        description="embedded: lab workers started by serve; ray: a dispatcher submits Ray tasks",
    )
    ray_address: str = Field(
        "",
        alias="RAY_ADDRESS",
        json_schema_extra={"accepts": "host:port"},
        description="Ray's own: the head the dispatcher joins (`ray-head:6379`); unset: Ray's auto-detection",
    )
    dispatcher: OnOff = Field(
        True,
        alias="COURSE_DISPATCHER",
        description="ray mode: serve also starts the dispatcher; off when it runs as its own service",
    )
    workers: int = Field(
        1,
        ge=0,
        le=8,
        alias="COURSE_WORKERS",
        description="embedded lab workers started with the server; 0 to run `python -m app worker` yourself",
    )
    # Below 512, no lab runs at all: a Python process with torch imported holds ~450 MiB before a lab allocates
    # anything (labs.resources.PROCESS_BASE_BYTES). The top is only a guard against a typo in the unit.
    job_memory_mb: int | None = Field(
        None,
        ge=512,
        le=4 * 2**20,
        alias="COURSE_JOB_MEMORY_MB",
        description=(
            "MiB one lab run may use: the form refuses runs estimated above it, the worker enforces it; unset: a "
            "quarter of this host's memory, at most 8 GiB. In Ray mode set it on each lab host"
        ),
    )
    job_time_limit: int = Field(
        600, ge=5, le=7200, alias="COURSE_JOB_TIME_LIMIT", description="seconds before a lab run is killed"
    )
    # Read by labs/catalog.py itself, in every process that lists or runs labs; here so it is documented and typed.
    lab_path: str = Field(
        "",
        alias="COURSE_LAB_PATH",
        json_schema_extra={"accepts": "folders separated by `:`"},
        description=(
            "more folders of lab folders, after labs/ (docs/architecture.md, Add a lab); set it alike for the "
            "server, its workers and every lab host"
        ),
    )
    lease_seconds: int = Field(
        30,
        ge=2,
        le=3600,
        alias="COURSE_LEASE_SECONDS",
        description="a running job whose heartbeat is older than this is requeued, or failed after its last attempt",
    )
    max_attempts: int = Field(
        2,
        ge=1,
        le=10,
        alias="COURSE_MAX_ATTEMPTS",
        description="attempts before a job whose worker or node vanished is failed",
    )
    unplaceable_seconds: int = Field(
        600,
        ge=5,
        le=86400,
        alias="COURSE_UNPLACEABLE_SECONDS",
        description="a queued job no online node could ever run is failed with the reason after this long",
    )
    session_idle_hours: int = Field(
        72,
        ge=1,
        le=24 * 90,
        alias="COURSE_SESSION_IDLE_HOURS",
        description="a login unused this long ends (a learner back after a long weekend logs in again)",
    )
    session_max_days: int = Field(
        14, ge=1, le=365, alias="COURSE_SESSION_MAX_DAYS", description="every login ends this long after it began"
    )
    reset_link_hours: int = Field(
        48,
        ge=1,
        le=24 * 14,
        alias="COURSE_RESET_LINK_HOURS",
        description="a password-reset link works once, within this long",
    )
    registrations_per_address: int | None = Field(
        None,
        ge=0,
        le=100_000,
        alias="COURSE_REGISTRATIONS_PER_ADDRESS",
        json_schema_extra={"accepts": "a whole number from 0 to 100000"},
        description=(
            f"accounts one client address may register per 10 minutes (beyond: 429 with Retry-After); 0: no "
            f"limit; unset: {REGISTRATIONS_PER_ADDRESS} (test: 0, the suites register hundreds of learners from "
            "loopback). A class registering at once behind one NAT or proxy address needs more, for that day"
        ),
    )
    smtp_url: SmtpUrl = Field(
        "",
        alias="COURSE_SMTP_URL",
        json_schema_extra={"accepts": "an `smtp://`, `smtp+starttls://` or `smtps://` URL"},
        description=(
            "mails password-reset links through `smtps://user:password@host:port` (or `smtp://`, "
            "`smtp+starttls://`); unset: the instructor is shown the link to pass on"
        ),
    )
    mail_from: str = Field(
        "",
        alias="COURSE_MAIL_FROM",
        json_schema_extra={"accepts": "an email address"},
        description="the From address of reset mails; unset: `course@` the SMTP host",
    )
    public_url: PublicUrl = Field(
        "",
        alias="COURSE_PUBLIC_URL",
        json_schema_extra={"accepts": "an http:// or https:// URL"},
        description=(
            "the address learners use (`https://course.example.org`), for every link that leaves the site (reset "
            "links, mails, the LTI URLs); required in production; unset: the address `serve` was started on, and "
            "`http://127.0.0.1:8000` from the CLI (never a request's Host header, which the client chooses)"
        ),
    )
    forwarded_allow_ips: Addresses = Field(
        "",
        alias="COURSE_FORWARDED_ALLOW_IPS",
        json_schema_extra={"accepts": "IP addresses or networks, comma-separated, or `*`"},
        description="the proxies whose X-Forwarded-For and -Proto are believed (the client address the login and "
        "registration throttles count); unset: none, so no client chooses its address; set it to the proxy's address",
    )
    log_level: LogLevel = Field("INFO", alias="COURSE_LOG_LEVEL", description="logging level of the server and workers")
    access_log: OnOff = Field(
        False,
        alias="COURSE_ACCESS_LOG",
        description="one log line per request; off by default, since it costs every request a write",
    )
    log_format: Literal["text", "json"] = Field(
        "text",
        alias="COURSE_LOG_FORMAT",
        description="`text`: one readable line per record; `json`: one JSON object per line, for a log collector",
    )
    metrics_token: str = Field(
        "",
        alias="COURSE_METRICS_TOKEN",
        json_schema_extra={"accepts": "a long random string"},
        description=(
            "turns on `GET /metrics` (Prometheus) for requests carrying `Authorization: Bearer <token>`; unset: "
            "no metrics are served"
        ),
    )
    dispatcher_lease_seconds: int = Field(
        5,
        ge=2,
        le=60,
        alias="COURSE_DISPATCHER_LEASE_SECONDS",
        description=(
            "ray mode: the active dispatcher renews its lease in the database every cycle; a standby takes over "
            "when it is this old (docs/dispatcher.md)"
        ),
    )
    dispatcher_alive_seconds: int = Field(
        30,
        ge=3,
        le=600,
        alias="COURSE_DISPATCHER_ALIVE_SECONDS",
        description=(
            "`dispatcher-health` fails a dispatcher whose last completed cycle is older than this (a cycle takes "
            "about half a second; compose checks every 10 s)"
        ),
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only what `read` hands in: os.environ or a .env file read behind its back would leak into tests."""
        return (init_settings,)

    @classmethod
    def read(cls, env: Mapping[str, str]) -> CourseEnv:
        """The values in `env`, not in os.environ: a test, or a node's command, passes its own."""
        try:
            return cls(**_MappingSource(cls, env)())
        except ValidationError as exc:
            raise SettingsError(_first_error(exc, env)) from None


class _MappingSource(EnvSettingsSource):
    """pydantic-settings' environment reader (names, empty values, case) over a mapping of our choosing.
    `_load_env_vars` is the one method that reads os.environ; tests/app/test_settings.py notices if that moves."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._mapping = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k: v for k, v in self._mapping.items() if not (self.env_ignore_empty and v == "")}


def _field_by_alias(name: str) -> FieldInfo | None:
    return next((f for f in CourseEnv.model_fields.values() if f.alias == name), None)


def _first_error(exc: ValidationError, env: Mapping[str, str]) -> str:
    """`NAME: got VALUE, expected WHAT` for the first bad variable; WHAT comes from the field, as in the docs."""
    error = exc.errors()[0]
    name = str(error["loc"][0])
    if error["type"] == "value_error":  # our own validators say what they got and expected
        return f"{name}: {error['ctx']['error']}"
    info = _field_by_alias(name)
    expected = allowed(info) if info is not None else error["msg"]
    if error["type"] in ("greater_than_equal", "less_than_equal"):
        return f"{name}: got {str(error['input']).strip()}, expected {expected}"
    return f"{name}: got {env.get(name, error['input'])!r}, expected {expected}"


def _bare(annotation: Any) -> Any:
    """The type under Optional and Annotated: `OnOff | None` -> bool."""
    while True:
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) is Annotated:
            annotation = args[0]
        elif type(None) in args:
            annotation = next(a for a in args if a is not type(None))
        else:
            return annotation


def allowed(info: FieldInfo) -> str:
    """What a variable accepts, in words: the error message and the docs table both say it this way."""
    kind = _bare(info.annotation)
    if typing.get_origin(kind) is Literal:
        return "one of " + ", ".join(typing.get_args(kind))
    if kind is bool:
        return ON_OFF
    if kind is int:
        lo = next((m.ge for m in info.metadata if isinstance(m, annotated_types.Ge)), None)
        hi = next((m.le for m in info.metadata if isinstance(m, annotated_types.Le)), None)
        return f"a whole number from {lo} to {hi}"
    if isinstance(info.json_schema_extra, dict) and "accepts" in info.json_schema_extra:
        return str(info.json_schema_extra["accepts"])
    if kind is Path:
        return "a folder"
    return "text"


def _secret_key(secret: str, environment: str) -> str:
    """The key that signs sessions: refused when missing, the published default or short in production."""
    if not secret:
        if environment == "production":
            raise SettingsError(
                f"COURSE_SECRET_KEY: must be set in production (a long random string; make one with `{MAKE_SECRET}`)"
            )
        return DEV_SECRET if environment == "development" else secrets.token_urlsafe(32)
    if secret == DEV_SECRET and environment == "production":
        raise SettingsError("COURSE_SECRET_KEY: the development default is refused in production")
    if environment == "production" and len(secret) < MIN_SECRET_CHARS:
        raise SettingsError(
            f"COURSE_SECRET_KEY: got {len(secret)} characters, expected at least {MIN_SECRET_CHARS} in production; "
            f"make one with `{MAKE_SECRET}`"
        )
    return secret


def _env(*names: str, to: Callable[..., Any] | None = None) -> Any:
    """A setting read from the `CourseEnv` fields `names`, where its default, bounds and reason are written (and
    nowhere else): `to(*values)` turns them into the code's units; without `to`, the one value as it is."""
    return field(metadata={"reads": names, "to": to})


def _hours(n: int) -> int:
    return n * 3600


def _days(n: int) -> int:
    return n * 24 * 3600


def _secure_cookies(on: bool | None, environment: str) -> bool:
    return environment == "production" if on is None else on


def _registrations(per_address: int | None, environment: str) -> int:
    """The test environment registers hundreds of learners from loopback: no limit there unless one is set."""
    if per_address is not None:
        return per_address
    return 0 if environment == "test" else REGISTRATIONS_PER_ADDRESS


def _job_memory(mb: int | None) -> int:
    return mb * MIB if mb else default_job_memory_bytes()


@dataclass(frozen=True)
class Settings:
    """The settings in the units the code works in, each read from `CourseEnv` (`_env` names the variables it
    comes from); what each means, its default and its bounds are written there, once."""

    environment: str = _env("environment")
    data_dir: Path = _env("data_dir", to=lambda p: (p or ROOT / "data").resolve())  # absolute
    database_url: str = _env("database_url")  # empty: the SQLite file under data_dir (db_url)
    secret_key: str = _env("secret_key", "environment", to=_secret_key)
    lessons_dir: Path = _env("lessons_dir", to=lambda p: (p or ROOT / "lessons").resolve())  # absolute
    embedded_workers: int = _env("workers")
    job_time_limit_s: int = _env("job_time_limit")
    lease_s: int = _env("lease_seconds")
    max_attempts: int = _env("max_attempts")
    secure_cookies: bool = _env("secure_cookies", "environment", to=_secure_cookies)
    web_processes: int = _env("web_processes")
    log_level: str = _env("log_level")
    access_log: bool = _env("access_log")
    log_format: str = _env("log_format")
    metrics_token: str = _env("metrics_token")
    # How much one web process takes on at once (app/web/middleware/admission.py). One number sizes the thread
    # pool, the database pool and the admission gate together, so a request admitted is never left waiting for
    # a connection or a thread; what is not admitted waits in a bounded queue or is told to come back (503).
    web_concurrency: int = _env("web_concurrency")
    web_queue: int = _env("web_queue")
    web_queue_timeout_s: float = _env("web_queue_timeout", to=float)
    web_max_connections: int = _env("web_max_connections")
    # Slow or stalled clients (app/cli/connections.py, app/web/middleware/admission.py): what one address may
    # hold open, and how long headers and a body may take to arrive.
    web_connections_per_address: int = _env("web_connections_per_address")
    web_header_timeout_s: float = _env("web_header_timeout", to=float)
    web_body_timeout_s: float = _env("web_body_timeout", to=float)
    session_idle_s: int = _env("session_idle_hours", to=_hours)
    session_max_s: int = _env("session_max_days", to=_days)
    reset_link_s: int = _env("reset_link_hours", to=_hours)
    # per throttle.REGISTRATION_WINDOW_S; 0: no limit
    registrations_per_address: int = _env("registrations_per_address", "environment", to=_registrations)
    smtp_url: str = _env("smtp_url")
    mail_from: str = _env("mail_from")
    # without a trailing slash; `serve` sets the address it was started on when none is given
    public_url: str = _env("public_url", to=lambda url: url.rstrip("/"))
    forwarded_allow_ips: str = _env("forwarded_allow_ips")  # uvicorn's forwarded_allow_ips; empty: no proxy is trusted
    job_memory_bytes: int = _env("job_memory_mb", to=_job_memory)
    executor: str = _env("executor")
    ray_address: str = _env("ray_address")
    dispatcher: bool = _env("dispatcher")
    unplaceable_s: int = _env("unplaceable_seconds")
    dispatcher_lease_s: float = _env("dispatcher_lease_seconds", to=float)  # app/services/cluster/dispatch_lease.py
    dispatcher_alive_s: float = _env("dispatcher_alive_seconds", to=float)  # app/executors/ray_health.py
    lab_path: str = _env("lab_path")  # labs/catalog.py reads the variable itself: labs import nothing from app
    # The two settings no variable sets: the worker's own pace, and the interpreter that runs `python -m labs`.
    heartbeat_s: float = 2.0  # how often a worker renews its lease while a lab runs (well inside lease_s)
    python: str = field(default_factory=lambda: sys.executable)

    @property
    def site_url(self) -> str:
        """Every link that leaves the site starts here (`serve` sets public_url to its address when unset)."""
        return self.public_url or DEFAULT_SITE_URL

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'course.db'}"

    @property
    def db_where(self) -> str:
        """The database in words an operator can check, never with its password: the SQLite file, or the URL."""
        from sqlalchemy import make_url

        url = make_url(self.db_url)
        if url.get_backend_name() == "sqlite":
            return f"SQLite file {url.database}"
        return url.render_as_string(hide_password=True)

    @property
    def password_concurrency(self) -> int:
        """Password hashes one web process runs at once: the web processes share half the cores (argon2
        runs 4 lanes of 64 MiB each), so hashing never takes the whole machine from page loads."""
        return max(1, (os.cpu_count() or 1) // (2 * self.web_processes))

    @property
    def web_threads(self) -> int:
        """Threads, and database connections, one web process needs: one per request it admits."""
        return self.web_concurrency + self.password_concurrency

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, signs_sessions: bool = True, **overrides) -> Settings:
        """The settings, every value checked (SettingsError names the first bad one); `overrides` replace values.

        signs_sessions=False for commands that serve nothing and sign nothing (a Ray node's `ray-node-flags` and
        the health checks): the secret key is then neither required nor read, so a node, which has none, starts.
        """
        e = CourseEnv.read(os.environ if env is None else env)
        values: dict[str, Any] = {
            f.name: _read(f.metadata, e)
            for f in fields(cls)
            if "reads" in f.metadata and (signs_sessions or f.name != "secret_key")
        }
        if not signs_sessions:  # a key nobody can know: nothing that runs without one signs anything with it
            values["secret_key"] = secrets.token_urlsafe(32)
        values.update(overrides)
        return cls(**values)


def _read(metadata: Mapping[str, Any], e: CourseEnv) -> Any:
    """One setting's value from the variables its `_env` names."""
    values = [getattr(e, name) for name in metadata["reads"]]
    return metadata["to"](*values) if metadata["to"] else values[0]
