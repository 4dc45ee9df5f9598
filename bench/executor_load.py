"""A class's load under each executor, in one run: N simulated learners (200 by default) at once on PostgreSQL.

    .venv/bin/python bench/executor_load.py [--learners 200] [--drain 90] [--executors embedded,ray]

Each learner registers, reads the six parts of lesson 06, answers a pause-and-reason prompt, marks a part done
and submits a small job (env-check on cpu) through the JSON API, all at once with the others. Then the run waits
up to --drain seconds for the queue, cancels (as each learner, through DELETE /api/v1/jobs/{id}) whatever has not
started, and waits for every job to end. For each executor it prints throughput, p50/p99 request latency, errors,
and queue latency (submit -> start, from the jobs table) p50/p99 over the jobs that started; then it checks the
database: every registered learner, every acknowledged answer and every acknowledged job is there, and every job
ended (succeeded, failed or cancelled), none left queued or running. Exit 1 if any check fails.

Embedded: `python -m app serve` with one lab worker (the shape of docs/deploying.md). Ray: the same server with
COURSE_EXECUTOR=ray and its dispatcher, against a local cluster (a head and one node with four CPU slots, the
tests' helper). Loopback only; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import glob
import http.cookiejar
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LESSON = "transformer-scaling"
PARTS = ["orient", "history", "mental-model", "code-trace", "deep-dives", "practice"]
TIMEOUT_S = 60  # one request; far beyond any acceptable latency, so a hang shows as an error, not a stall


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    def __init__(self) -> None:
        bindir = Path(sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))[-1]).parent
        self.base = Path(tempfile.mkdtemp(prefix="bench-pg-"))
        self.data, sock = self.base / "data", self.base / "sock"
        sock.mkdir()
        self.run_as: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres")
            shutil.chown(sock, "postgres")
            self.run_as = ["runuser", "-u", "postgres", "--"]
        self.bindir, self.port = bindir, free_port()
        subprocess.run(
            [*self.run_as, str(bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"],
            check=True,
            capture_output=True,
        )
        opts = f"-p {self.port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300"
        subprocess.run(
            [
                *self.run_as,
                str(bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-w",
                "-l",
                str(self.base / "log"),
                "-o",
                opts,
                "start",
            ],
            check=True,
            capture_output=True,
        )

    def new_database(self, name: str) -> str:
        from sqlalchemy import create_engine, text

        admin = create_engine(
            f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres", isolation_level="AUTOCOMMIT"
        )
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        subprocess.run(
            [*self.run_as, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(self.base, ignore_errors=True)


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.server_errors = 0
        self.connection_errors = 0
        self.other: dict[int, int] = {}

    def record(self, seconds: float, status: int | None) -> None:
        with self.lock:
            self.latencies.append(seconds)
            if status is None:
                self.connection_errors += 1
            elif status >= 500:
                self.server_errors += 1
            elif status >= 400:
                self.other[status] = self.other.get(status, 0) + 1


class Learner:
    def __init__(self, base: str, n: int, stats: Stats):
        self.base, self.email, self.stats = base, f"learner{n}@bench.example.org", stats
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.answered = False
        self.job_id: int | None = None

    def call(
        self, method: str, path: str, data: bytes | None = None, headers: dict | None = None
    ) -> tuple[int | None, str]:
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers or {})
        t0 = time.perf_counter()
        status: int | None
        try:
            with self.opener.open(req, timeout=TIMEOUT_S) as r:
                status, body = r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read().decode(errors="replace")
        except OSError:
            status, body = None, ""
        self.stats.record(time.perf_counter() - t0, status)
        return status, body

    def form(self, path: str, fields: dict) -> tuple[int | None, str]:
        body = urllib.parse.urlencode(fields).encode()
        return self.call("POST", path, body, {"Content-Type": "application/x-www-form-urlencoded"})

    def session(self) -> None:
        _, page = self.call("GET", "/register")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
        if not csrf:
            return
        self.form(
            "/register",
            {
                "email": self.email,
                "password": "correct horse battery",
                "display_name": "Bench",
                "csrf_token": csrf.group(1),
            },
        )
        first = ""
        for part in PARTS:
            _, body = self.call("GET", f"/lessons/{LESSON}/{part}")
            if not first and f"/lessons/{LESSON}/pauses/" in body:
                first = body  # the first part with a pause-and-reason prompt
        pause = re.search(rf'action="/lessons/{LESSON}/pauses/([^"]+)"', first)
        version = re.search(r'name="version" value="(\d+)"', first)
        token = re.search(r'name="csrf_token" value="([^"]+)"', first)
        if pause and version and token:
            status, _ = self.form(
                f"/lessons/{LESSON}/pauses/{pause.group(1)}",
                {"answer": "FP8 needs a scale per tensor.", "version": version.group(1), "csrf_token": token.group(1)},
            )
            self.answered = status == 200
            self.form(f"/lessons/{LESSON}/progress/{PARTS[0]}/done", {"csrf_token": token.group(1)})
        status, me = self.call("GET", "/api/v1/me")
        if status != 200:
            return
        self.csrf = json.loads(me)["csrf_token"]
        status, body = self.call(
            "POST",
            "/api/v1/jobs",
            json.dumps({"lab": "env-check", "backend": "cpu"}).encode(),
            {"Content-Type": "application/json", "X-CSRF-Token": self.csrf},
        )
        if status == 201:
            self.job_id = json.loads(body)["id"]

    def cancel_if_queued(self) -> None:
        if self.job_id is not None:
            self.call("DELETE", f"/api/v1/jobs/{self.job_id}", headers={"X-CSRF-Token": self.csrf})


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def run_one(executor: str, pg: Postgres, learners: int, drain_s: float) -> bool:
    from sqlalchemy import create_engine, func, select
    from sqlalchemy.orm import Session

    from app.core import migrate
    from app.core.models import Job, Response, User

    url = pg.new_database(f"bench_{executor}_{os.getpid()}")
    migrate.upgrade(url)
    data = Path(tempfile.mkdtemp(prefix=f"bench-{executor}-"))
    env = dict(
        os.environ,
        COURSE_ENV="test",
        COURSE_DATA_DIR=str(data),
        DATABASE_URL=url,
        COURSE_SECRET_KEY="bench-secret",
        COURSE_WORKERS="1",
        COURSE_WEB_PROCESSES="2",
        COURSE_EXECUTOR=executor,
        RAY_USAGE_STATS_ENABLED="0",
    )
    cluster = None
    if executor == "ray":
        from tests.executors.raycluster import start_cluster

        cluster = start_cluster(isolated=False)  # the server it starts must reach Ray and be reached from here
        cluster.wait_nodes(gpus=4)
        env["RAY_ADDRESS"] = cluster.address
    port = free_port()
    log = open(data / "serve.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    ok = True
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(base + "/login", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "the server did not start:\n" + (data / "serve.log").read_text()[-3000:]
                    ) from None
                time.sleep(0.5)
        stats = Stats()
        people = [Learner(base, i, stats) for i in range(learners)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(learners) as pool:
            list(pool.map(lambda p: p.session(), people))
        wall = time.perf_counter() - t0
        engine = create_engine(url)

        def counts() -> dict[str, int]:
            with Session(engine) as db:
                return dict(db.execute(select(Job.status, func.count()).group_by(Job.status)).all())

        drain_end = time.monotonic() + drain_s
        while time.monotonic() < drain_end and counts().get("queued", 0):
            time.sleep(1)
        with ThreadPoolExecutor(32) as pool:  # what has not started by now is cancelled, as its learner would
            list(pool.map(lambda p: p.cancel_if_queued(), people))
        settle_end = time.monotonic() + 180
        while time.monotonic() < settle_end and (counts().get("queued", 0) or counts().get("running", 0)):
            time.sleep(1)
        with Session(engine) as db:
            jobs = db.scalars(select(Job)).all()
            users = db.scalar(select(func.count()).select_from(User)) or 0
            answers = db.scalar(select(func.count()).select_from(Response)) or 0
        engine.dispose()
        queue_latency = [(j.started_at - j.created_at).total_seconds() for j in jobs if j.started_at]
        by_status: dict[str, int] = {}
        for j in jobs:
            by_status[j.status] = by_status.get(j.status, 0) + 1
        acked_jobs = {p.job_id for p in people if p.job_id is not None}
        acked_answers = sum(p.answered for p in people)
        lat = stats.latencies
        print(f"\n== executor {executor}: {learners} learners at once, PostgreSQL, 2 web processes ==")
        print(
            f"requests {len(lat)} in {wall:.1f} s: {len(lat) / wall:.1f} req/s; latency p50 {pct(lat, 50) * 1000:.0f} ms,"
            f" p99 {pct(lat, 99) * 1000:.0f} ms; server errors {stats.server_errors}, connection errors"
            f" {stats.connection_errors}, other 4xx {stats.other or 0}"
        )
        print(
            f"jobs: {len(acked_jobs)} acknowledged, {dict(sorted(by_status.items()))}; queue latency (submit -> start)"
            f" over the {len(queue_latency)} that started: p50 {pct(queue_latency, 50):.1f} s,"
            f" p99 {pct(queue_latency, 99):.1f} s"
        )
        checks = {
            "every learner registered": users == learners,
            "every acknowledged answer stored": answers >= acked_answers and acked_answers > 0,
            "every acknowledged job stored": acked_jobs <= {j.id for j in jobs},
            "no job left queued or running": not by_status.get("queued") and not by_status.get("running"),
            "no job failed": not by_status.get("failed"),
        }
        for name, passed in checks.items():
            print(f"  {'ok  ' if passed else 'FAIL'} {name}")
        ok = all(checks.values())
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(data, ignore_errors=True)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=200)
    parser.add_argument(
        "--drain", type=float, default=90.0, help="seconds the queue may run before the rest is cancelled"
    )
    parser.add_argument("--executors", default="embedded,ray")
    args = parser.parse_args()
    pg = Postgres()
    try:
        results = [run_one(e, pg, args.learners, args.drain) for e in args.executors.split(",")]
    finally:
        pg.stop()
    print("\nall checks passed" if all(results) else "\nSOME CHECKS FAILED")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
