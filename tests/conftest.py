"""Shared fixtures: real SQLite and PostgreSQL databases, the app, logged-in clients, a worker.

PostgreSQL is a real server started once per test session from the Debian binaries
(`scripts/setup.sh --test` installs them) in a temporary directory on a free loopback port.

A database test runs on SQLite; one marked `both_backends` runs on PostgreSQL as well. That marker belongs on
what the backend changes: sessions, login throttling, jobs and the queue, concurrency, migrations, and races
(grading saves, publishing), where locking, isolation and the dialect differ.

Migrating a database and publishing every lesson takes about a second, and every test that starts the app
did it. A test whose fixtures include `app` gets a copy of a database migrated and published once per
session (per backend): the app's start-up finds nothing changed and publishes nothing. Any other test
gets an empty database, as migration and publishing tests need.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

from app.core import migrate
from app.core.config import Settings
from app.core.db import make_engine, make_sessionmaker

ROOT = Path(__file__).resolve().parent.parent

# tests.leftovers: the run fails, naming them, if processes it started outlive it; tests.scheduling: how
# `--dist loadgroup` shares files out between the xdist processes (one of them gets every Ray file)
pytest_plugins = ["tests.leftovers", "tests.scheduling"]

# One OpenMP thread for torch in the test processes and the labs they start themselves (jobs an executor starts get
# the threads it chooses). Two suite workers share two cores: a lab running torch's default two threads beside a busy
# core spins in OpenMP's barriers, and fp8-step's default run took 38.6 s beside one busy loop against 5.6 s with one
# thread (5.1 s with two on a quiet machine). A value set by whoever runs the suite is kept.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_async(coro):
    """asyncio.run in a thread of its own: Playwright's sync API keeps an event loop running in the main thread
    of a test process once a browser test has run there, and asyncio.run refuses to start beside it."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail("PostgreSQL binaries are missing: run `scripts/setup.sh --test` (installs Debian's postgresql)")
    return Path(found[-1]).parent


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL cluster; yields a base URL without a database name."""
    bindir = _pg_bin()
    base = Path(tempfile.mkdtemp(prefix="course-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    run_as: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    PG_SOCKETS[port] = sock
    subprocess.run(
        [*run_as, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *run_as,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-w",
            "-l",
            str(base / "log"),
            "-o",
            f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            [*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True
        )
        shutil.rmtree(base, ignore_errors=True)


_db_counter = 0
PG_SOCKETS: dict[int, Path] = {}  # a test server's port -> its Unix socket dir (for processes off the host network)


def pg_url_by_socket(url: str) -> str:
    """The same database reached through the test server's Unix socket instead of TCP on 127.0.0.1 (a process in
    another network namespace, e.g. the Ray cluster's, has a loopback of its own)."""
    u = make_url(url)
    return u.set(host=None, query={**u.query, "host": str(PG_SOCKETS[u.port])}).render_as_string(hide_password=False)


def _new_pg_database(base_url: str, template: str | None = None) -> str:
    """A new database on the test server: empty, or a copy of `template` (which must have no open connections)."""
    global _db_counter
    _db_counter += 1
    name = f"course_{os.getpid()}_{_db_counter}"
    copy_of = f' TEMPLATE "{template}"' if template else ""
    admin = create_engine(f"{base_url}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{copy_of}'))
    admin.dispose()
    return f"{base_url}/{name}"


def _prepare_once(db_url: str, data_dir: Path, *, publish: bool = True) -> None:
    """Migrate, and publish as the app's start-up does, then close every connection (a PostgreSQL template must
    have none; a SQLite file is copied whole, so its write-ahead log is folded into it first)."""
    from app.services import startup

    if publish:
        startup.prepare(
            Settings.from_env({"COURSE_ENV": "test", "COURSE_DATA_DIR": str(data_dir)}, database_url=db_url)
        )
    else:
        migrate.upgrade(db_url)
    if db_url.startswith("sqlite"):
        engine = make_engine(db_url)
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        engine.dispose()


@pytest.fixture(scope="session")
def published_sqlite(tmp_path_factory) -> Path:
    """A SQLite file migrated and published once per session; tests get copies."""
    base = tmp_path_factory.mktemp("published-sqlite")
    _prepare_once(f"sqlite:///{base / 'course.db'}", base / "data")
    return base / "course.db"


@pytest.fixture(scope="session")
def published_postgres(postgres_server, tmp_path_factory) -> str:
    """The name of a PostgreSQL database migrated and published once per session; tests get copies."""
    url = _new_pg_database(postgres_server)
    _prepare_once(url, tmp_path_factory.mktemp("published-postgres"))
    return make_url(url).database or ""


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory) -> Path:
    """A SQLite file migrated to the latest revision once per session, nothing published; `db` tests get copies."""
    base = tmp_path_factory.mktemp("migrated-sqlite")
    _prepare_once(f"sqlite:///{base / 'course.db'}", base / "data", publish=False)
    return base / "course.db"


@pytest.fixture(scope="session")
def migrated_postgres(postgres_server, tmp_path_factory) -> str:
    """The name of a PostgreSQL database migrated once per session, nothing published; `db` tests get copies."""
    url = _new_pg_database(postgres_server)
    _prepare_once(url, tmp_path_factory.mktemp("migrated-postgres"), publish=False)
    return make_url(url).database or ""


# A test that uses one of these fixtures, however indirectly, carries the marker: `-m "not browser"` and `make
# test-quick` then skip exactly what needs Chromium, the Ray cluster or the PostgreSQL server. A test that reaches
# PostgreSQL by parametrization (`both_backends`, a "postgres" param) gets the marker on that param.
NEEDS = {"browser": "browser", "ray_cluster": "ray", "postgres_server": "postgres"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for fixture, marker in NEEDS.items():
            if fixture in item.fixturenames and item.get_closest_marker(marker) is None:
                item.add_marker(marker)


def pytest_generate_tests(metafunc):
    """`db_url` is SQLite, and PostgreSQL as well for a test marked `both_backends`, unless the test names its
    own kinds with @pytest.mark.parametrize("db_url", [...], indirect=True) or a module overrides the fixture with
    params of its own."""
    if "db_url" not in metafunc.fixturenames:
        return
    if any(d.params for d in metafunc._arg2fixturedefs.get("db_url", ())[-1:]):
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        if "db_url" in ([n.strip() for n in names.split(",")] if isinstance(names, str) else names):
            return
    kinds: list = ["sqlite"]
    if metafunc.definition.get_closest_marker("both_backends"):
        kinds.append(pytest.param("postgres", marks=pytest.mark.postgres))
    metafunc.parametrize("db_url", kinds, indirect=True)


@pytest.fixture
def db_url(request, tmp_path) -> str:
    """A database of the kind the test is parametrized with: migrated and published when the test starts the
    app (`app` among its fixtures), migrated when it opens a session (`db`), empty otherwise (the migration and
    publishing tests'). Each is a copy of a template made once per session: migrating an empty database took
    about a third of a test process's time."""
    kind = getattr(request, "param", "sqlite")
    template = "published" if "app" in request.fixturenames else "migrated" if "db" in request.fixturenames else None
    if kind == "sqlite":
        path = tmp_path / "course.db"
        if template:
            shutil.copyfile(request.getfixturevalue(f"{template}_sqlite"), path)
        return f"sqlite:///{path}"
    name = request.getfixturevalue(f"{template}_postgres") if template else None
    return _new_pg_database(request.getfixturevalue("postgres_server"), name)


@pytest.fixture
def settings(db_url, tmp_path) -> Settings:
    return Settings.from_env(
        {"COURSE_ENV": "test", "COURSE_DATA_DIR": str(tmp_path / "data")},
        database_url=db_url,
        embedded_workers=0,  # tests drive the worker explicitly (or start a real server)
        lease_s=5,
        heartbeat_s=0.2,
    )


@pytest.fixture
def db(settings):
    """A session on the test's database, at the latest migration (db_url copied it from a template)."""
    engine = make_engine(settings.db_url)
    with make_sessionmaker(engine)() as session:
        yield session
    engine.dispose()


@pytest.fixture
def app(settings):
    from app.web.factory import create_app

    return create_app(settings)


class Browserless:
    """A TestClient wrapper that knows the CSRF token and how to log in."""

    def __init__(self, client):
        self.client = client

    def csrf(self, path: str = "/login") -> str:
        html = self.client.get(path).text
        return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)

    def register(self, email: str, password: str = "correct horse", name: str = "Ann"):
        return self.client.post(
            "/register",
            data={"email": email, "password": password, "display_name": name, "csrf_token": self.csrf("/register")},
            follow_redirects=False,
        )

    def login(self, email: str, password: str = "correct horse"):
        return self.client.post(
            "/login", data={"email": email, "password": password, "csrf_token": self.csrf()}, follow_redirects=False
        )

    def post(self, path: str, data: dict | None = None, **kw):
        if "json" in kw or "content" in kw:  # API calls carry the token in a header instead
            return self.client.post(path, **kw)
        data = dict(data or {})
        data.setdefault("csrf_token", self.csrf())
        return self.client.post(path, data=data, **kw)

    def api_token(self) -> str:
        return self.client.get("/api/v1/me").json()["csrf_token"]

    def __getattr__(self, name):
        return getattr(self.client, name)


@pytest.fixture
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        yield Browserless(c)


@pytest.fixture
def make_client(app):
    """A factory for extra, independent clients (another learner, a grader)."""
    from fastapi.testclient import TestClient

    opened = []

    def make():
        c = TestClient(app)
        c.__enter__()
        opened.append(c)
        return Browserless(c)

    yield make
    for c in opened:
        c.__exit__(None, None, None)


CLASS_ROLES = ("learner", "grader", "instructor")  # in the order of their powers


def user_with_roles(db, email: str, roles=("learner",), password: str = "correct horse", name: str = ""):
    """An account with roles named as they were before classes, given as the move to classes gives them (migration
    0013): "learner", "grader" and "instructor" are that role in the class "default" (the strongest named, one
    role per class), and an instructor also holds the site roles "admin" and "author", as one an operator made does.
    "admin" and "author" alone are those site roles. Tests of classes make their classes and roles explicitly."""
    from app.services.accounts import users
    from app.services.classes import registry as class_registry

    in_class = [r for r in roles if r in CLASS_ROLES]
    site = {r for r in roles if r not in CLASS_ROLES} | ({"admin", "author"} if "instructor" in in_class else set())
    user = users.create_user(
        db, email=email, password=password, display_name=name or email.split("@")[0], roles=sorted(site)
    )
    if in_class:
        default = class_registry.by_slug(db, slug="default")
        assert default is not None, "migration 0013 makes the class 'default'"
        role = max(in_class, key=CLASS_ROLES.index)
        class_registry.enrol(db, klass=default, user_id=user.id, role=role, via="migration")
    return user


def default_class(db):
    """The class the move to classes made ("default"), where user_with_roles puts its class roles."""
    from app.services.classes import registry as class_registry

    return class_registry.by_slug(db, slug="default")


def default_scope(db, user, role: str = "instructor"):
    """`user` looking at the class "default" as its `role` (app/services/classes/scopes.py), for service tests."""
    from app.services.classes.scopes import Scope

    return Scope(default_class(db), role, user)


@pytest.fixture
def make_user(settings, db):
    """make(email, roles=("learner",)): an account, its roles as user_with_roles reads them."""

    def make(email: str, roles=("learner",), password: str = "correct horse"):
        return user_with_roles(db, email, roles, password)

    return make


@pytest.fixture
def worker(settings):
    from app.executors.embedded import Worker

    w = Worker(settings, worker_id="test-worker")
    yield w
    w.engine.dispose()


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")
