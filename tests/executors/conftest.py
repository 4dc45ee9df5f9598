"""Fixtures for the Ray executor tests: one local Ray cluster per test session (a head and a node with four
logical GPUs in a network namespace of their own, tests/executors/raycluster.py), a PostgreSQL database per test,
the web app in ray mode, and dispatcher processes started the way a deployment starts them (`python -m app
dispatcher`), inside the cluster's namespace."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core import migrate
from app.core.config import Settings
from app.core.db import make_engine, make_sessionmaker
from tests.conftest import ROOT, Browserless, _new_pg_database, pg_url_by_socket
from tests.executors.raycluster import pids_with, start_cluster
from tests.leftovers import alive


@pytest.fixture(scope="session")
def ray_cluster():
    cluster = start_cluster()
    try:
        cluster.wait_nodes(gpus=4)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def ray_settings(postgres_server, tmp_path) -> Settings:
    url = _new_pg_database(postgres_server)
    migrate.upgrade(url)
    return Settings.from_env(
        {"COURSE_ENV": "test", "COURSE_DATA_DIR": str(tmp_path / "web-data")},
        database_url=url,
        executor="ray",
        embedded_workers=0,
        lease_s=5,
    )


@pytest.fixture
def ray_db(ray_settings):
    engine = make_engine(ray_settings.db_url)
    with make_sessionmaker(engine)() as session:
        yield session
    engine.dispose()


@pytest.fixture
def ray_client(ray_settings):
    from app.web.factory import create_app

    with TestClient(create_app(ray_settings)) as c:
        yield Browserless(c)


class Dispatchers:
    """Starts `python -m app dispatcher` processes against the test's database and the session's cluster."""

    def __init__(self, settings: Settings, cluster, log_dir: Path):
        self.settings, self.cluster, self.log_dir = settings, cluster, log_dir
        self.procs: list[subprocess.Popen] = []

    def start(self, **env_extra: str) -> subprocess.Popen:
        env = dict(
            self.cluster.env,
            COURSE_ENV="test",
            COURSE_DATA_DIR=str(self.settings.data_dir),
            # in the cluster's network namespace 127.0.0.1 is not the host's: PostgreSQL through its socket
            DATABASE_URL=pg_url_by_socket(self.settings.db_url) if self.cluster.enter else self.settings.db_url,
            COURSE_EXECUTOR="ray",
            RAY_ADDRESS=self.cluster.address,
            COURSE_LEASE_SECONDS=str(self.settings.lease_s),
            **env_extra,
        )
        log = open(self.log_dir / f"dispatcher-{len(self.procs)}.log", "w")
        proc = subprocess.Popen(
            [*self.cluster.enter, sys.executable, "-m", "app", "dispatcher"], cwd=ROOT, env=env, stdout=log, stderr=log
        )
        self.procs.append(proc)
        return proc

    def logs(self, tail: int | None = 4000) -> str:
        """The dispatchers' logs, the last `tail` characters of each (None: whole)."""
        return "\n".join(p.read_text()[-tail if tail else 0 :] for p in sorted(self.log_dir.glob("dispatcher-*.log")))

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def dispatchers(ray_settings, ray_cluster, tmp_path):
    d = Dispatchers(ray_settings, ray_cluster, tmp_path)
    yield d
    d.stop_all()


def lab_alive(pid: int | None) -> bool:
    return alive(pid) if pid else False


def lab_processes(job_id: int) -> list[int]:
    """`python -m labs run` processes writing this job's output on the node (none may outlive the job)."""
    return [pid for pid in pids_with("labs run", f"job-{job_id}-attempt-") if lab_alive(pid)]


@pytest.fixture
def make_client_for(ray_settings, ray_client):
    """Another logged-in client of the same app (registers, or logs in a user given roles)."""
    from tests.conftest import user_with_roles

    opened = []
    app = ray_client.client.app

    def make(email: str, roles=("learner",)) -> Browserless:
        c = TestClient(app)
        c.__enter__()
        opened.append(c)
        b = Browserless(c)
        if roles == ("learner",):
            b.register(email)
        else:
            engine = make_engine(ray_settings.db_url)
            with make_sessionmaker(engine)() as db:
                user_with_roles(db, email, roles, name="Prof")
            engine.dispose()
            b.login(email)
        return b

    yield make
    for c in opened:
        c.__exit__(None, None, None)
