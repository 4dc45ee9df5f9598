"""One settings object, read from the environment (COURSE_* variables and DATABASE_URL).

Outside development a default or missing secret key is refused, so a deployed server never
signs sessions with a key that is printed in this file.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from labs.resources import MIB, default_job_memory_bytes

ROOT = Path(__file__).resolve().parents[2]
DEV_SECRET = "development-only-secret-change-me"


class SettingsError(ValueError):
    pass


def _int(env: dict, name: str, default: int, lo: int, hi: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}: got {raw!r}, expected a whole number from {lo} to {hi}") from None
    if not lo <= value <= hi:
        raise SettingsError(f"{name}: got {value}, expected a whole number from {lo} to {hi}")
    return value


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def _flag(env: dict, name: str, default: bool) -> bool:
    """An on/off setting. Anything but the usual spellings is refused: `COURSE_DISPATCHER=false` once meant on,
    since only "0" counted as off."""
    raw = (env.get(name) or "").strip().lower()
    if raw == "":
        return default
    if raw in TRUE_WORDS or raw in FALSE_WORDS:
        return raw in TRUE_WORDS
    raise SettingsError(f"{name}: got {env.get(name)!r}, expected {'/'.join(TRUE_WORDS)} or {'/'.join(FALSE_WORDS)}")


# Below this, no lab runs at all: one Python process with torch imported holds ~450 MiB before a lab allocates
# anything (labs.resources.PROCESS_BASE_BYTES). The top is only a guard against a typo in the unit.
JOB_MEMORY_MB_RANGE = (512, 4 * 2**20)


def _job_memory_bytes(env: dict) -> int:
    """COURSE_JOB_MEMORY_MB in MiB, checked like every number here (`8G` or `abc` once fell back to the default
    without a word); unset: labs.resources' default, a share of this host's memory."""
    mb = _int(env, "COURSE_JOB_MEMORY_MB", 0, *JOB_MEMORY_MB_RANGE)
    return mb * MIB if mb else default_job_memory_bytes()


# A key shorter than this is guessable offline from one signed cookie; token_urlsafe(48) gives 64 characters.
MIN_SECRET_CHARS = 32
MAKE_SECRET = 'python -c "import secrets; print(secrets.token_urlsafe(48))"'


def _secret_key(env: dict, environment: str) -> str:
    secret = env.get("COURSE_SECRET_KEY", "")
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


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
EXECUTORS = ("embedded", "ray")


def _choice(env: dict, name: str, default: str, allowed: tuple[str, ...]) -> str:
    raw = env.get(name) or default
    raw = raw.upper() if allowed[0].isupper() else raw.lower()
    if raw not in allowed:
        raise SettingsError(f"{name}: got {env.get(name)!r}, expected one of {', '.join(allowed)}")
    return raw


def _smtp_url(raw: str) -> str:
    if raw and urlsplit(raw).scheme not in ("smtp", "smtps", "smtp+starttls"):
        raise SettingsError(
            f"COURSE_SMTP_URL: got scheme {urlsplit(raw).scheme!r}, expected smtp://, smtp+starttls:// or smtps://"
        )
    return raw


LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: only this machine can reach a server bound there."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def check_bind(settings: Settings, host: str) -> None:
    """Refuse to serve a network with the published development key: anyone could sign a cookie with it."""
    if settings.secret_key == DEV_SECRET and not is_loopback(host):
        raise SettingsError(
            f"COURSE_SECRET_KEY: the development default may only serve on a loopback address, not --host {host}; "
            "set COURSE_SECRET_KEY to a long random string (and COURSE_ENV=production for a real deployment)"
        )


def check_executor(settings: Settings, command: str) -> None:
    """A dispatcher (run alone, or started by `serve`) needs the ray package here; without it, it died in a
    ModuleNotFoundError traceback and serve restarted it for ever."""
    runs_dispatcher = command == "dispatcher" or (command == "serve" and settings.dispatcher)
    if settings.executor == "ray" and runs_dispatcher and importlib.util.find_spec("ray") is None:
        where = (
            ""
            if command == "dispatcher"
            else " (serve starts the dispatcher; COURSE_DISPATCHER=0 if it runs elsewhere)"
        )
        raise SettingsError(
            f"COURSE_EXECUTOR: ray needs the ray package on this host{where}; install it with "
            ".venv/bin/python -m pip install -c constraints.txt -e '.[ray]'"
        )


@dataclass(frozen=True)
class Settings:
    environment: str = "development"  # development | test | production
    data_dir: Path = ROOT / "data"  # SQLite file, job bundles and uploads live here
    database_url: str = ""  # empty: SQLite file under data_dir
    secret_key: str = DEV_SECRET  # signs session cookies
    lessons_dir: Path = ROOT / "lessons"  # authored course content (data, no code)
    embedded_workers: int = 1  # worker processes started with the server; 0 = run `python -m app worker` yourself
    job_time_limit_s: int = 600  # a lab subprocess is killed after this
    lease_s: int = 30  # a running job whose heartbeat is older than this is requeued or failed
    heartbeat_s: float = 2.0  # how often the worker renews its lease while a lab runs
    max_attempts: int = 2  # attempts before a job whose worker vanished is failed
    python: str = field(default_factory=lambda: sys.executable)  # interpreter that runs `python -m labs`
    secure_cookies: bool = (
        False  # cookies only over HTTPS; on by default in production (COURSE_SECURE_COOKIES=0 to opt out)
    )
    web_processes: int = 1  # uvicorn worker processes serving HTTP; the lab workers are started once, not per process
    log_level: str = "INFO"  # the stdlib logging level of the server and workers
    access_log: bool = False  # one log line per request: off by default, since it costs every request a write
    # How much one web process takes on at once (app/web/middleware/admission.py). One number sizes the thread pool, the
    # database pool and the admission gate together, so a request admitted is never left waiting for a
    # connection or a thread; what is not admitted waits in a bounded queue or is told to come back (503).
    web_concurrency: int = 8  # requests one web process works on at once = its threads = its database connections
    web_queue: int = 512  # requests one web process keeps waiting for a slot; beyond that: 503 with Retry-After
    web_queue_timeout_s: float = 15.0  # the longest a request waits for a slot (or a database lock) before a 503
    web_max_connections: int = 4096  # open HTTP connections per web process, idle ones too (uvicorn's hard cap)
    session_idle_s: int = 72 * 3600  # a session unused this long ends (a learner back after a long weekend logs in)
    session_max_s: int = 14 * 24 * 3600  # every session ends this long after login, however active
    reset_link_s: int = 48 * 3600  # a password-reset link works once, within this long of being issued
    smtp_url: str = ""  # smtp[s]://user:password@host:port; empty: reset links are shown to the instructor to pass on
    mail_from: str = ""  # the From address of reset mails (default: course@<smtp host>)
    public_url: str = ""  # the address learners use (https://course.example.org), for links in mail and the CLI
    # The per-job memory budget the workers enforce on a lab's process group (COURSE_JOB_MEMORY_MB; by default a
    # quarter of this host's memory, at most 8 GiB: labs.resources.default_job_memory_bytes).
    job_memory_bytes: int = field(default_factory=default_job_memory_bytes)
    executor: str = "embedded"  # embedded: worker processes started by serve | ray: a dispatcher submits Ray tasks
    ray_address: str = ""  # the Ray cluster the dispatcher joins (e.g. ray-head:6379); empty: RAY_ADDRESS or auto
    dispatcher: bool = True  # ray mode: serve also starts the dispatcher (0 when it runs as its own service)
    # A queued job no online node could ever run (a GPU backend with every GPU node gone) is failed with the
    # reason after this long, instead of waiting for a node that may not come back.
    unplaceable_s: int = 600

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

    @property
    def jobs_dir(self) -> Path:
        return self.data_dir / "jobs"

    @classmethod
    def from_env(cls, env: dict | None = None, *, signs_sessions: bool = True, **overrides) -> Settings:
        """The settings, every value checked (SettingsError names the first bad one).

        signs_sessions=False for commands that serve nothing and sign nothing (a Ray node's `ray-node-flags` and
        the health checks): the secret key is then neither required nor read, so a node, which has none, starts.
        """
        env = dict(os.environ if env is None else env)
        environment = env.get("COURSE_ENV", "development")
        if environment not in ("development", "test", "production"):
            raise SettingsError(f"COURSE_ENV: got {environment!r}, expected development, test or production")
        # a key nobody can know: nothing that runs without one signs anything with it
        secret = _secret_key(env, environment) if signs_sessions else secrets.token_urlsafe(32)
        values = dict(
            environment=environment,
            data_dir=Path(env.get("COURSE_DATA_DIR") or ROOT / "data").resolve(),
            database_url=env.get("DATABASE_URL", ""),
            secret_key=secret,
            lessons_dir=Path(env.get("COURSE_LESSONS_DIR") or ROOT / "lessons").resolve(),
            embedded_workers=_int(env, "COURSE_WORKERS", 1, 0, 8),
            job_time_limit_s=_int(env, "COURSE_JOB_TIME_LIMIT", 600, 5, 7200),
            lease_s=_int(env, "COURSE_LEASE_SECONDS", 30, 2, 3600),
            max_attempts=_int(env, "COURSE_MAX_ATTEMPTS", 2, 1, 10),
            secure_cookies=_flag(env, "COURSE_SECURE_COOKIES", environment == "production"),
            web_processes=_int(env, "COURSE_WEB_PROCESSES", 1, 1, 64),
            log_level=_choice(env, "COURSE_LOG_LEVEL", "INFO", LOG_LEVELS),
            access_log=_flag(env, "COURSE_ACCESS_LOG", False),
            web_concurrency=_int(env, "COURSE_WEB_CONCURRENCY", 8, 1, 256),
            web_queue=_int(env, "COURSE_WEB_QUEUE", 512, 0, 100_000),
            web_queue_timeout_s=float(_int(env, "COURSE_WEB_QUEUE_TIMEOUT", 15, 1, 120)),
            web_max_connections=_int(env, "COURSE_WEB_MAX_CONNECTIONS", 4096, 16, 1_000_000),
            session_idle_s=_int(env, "COURSE_SESSION_IDLE_HOURS", 72, 1, 24 * 90) * 3600,
            session_max_s=_int(env, "COURSE_SESSION_MAX_DAYS", 14, 1, 365) * 24 * 3600,
            reset_link_s=_int(env, "COURSE_RESET_LINK_HOURS", 48, 1, 24 * 14) * 3600,
            smtp_url=_smtp_url(env.get("COURSE_SMTP_URL", "")),
            mail_from=env.get("COURSE_MAIL_FROM", ""),
            public_url=env.get("COURSE_PUBLIC_URL", "").rstrip("/"),
            executor=_choice(env, "COURSE_EXECUTOR", "embedded", EXECUTORS),
            ray_address=env.get("RAY_ADDRESS", ""),
            dispatcher=_flag(env, "COURSE_DISPATCHER", True),
            unplaceable_s=_int(env, "COURSE_UNPLACEABLE_SECONDS", 600, 5, 86400),
            job_memory_bytes=_job_memory_bytes(env),
        )
        values.update(overrides)
        return cls(**values)
