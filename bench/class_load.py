"""A class arriving at once: N learners register, read the six parts, answer, mark a part done and submit a job.

    .venv/bin/python bench/class_load.py                       SQLite and PostgreSQL, 200 learners each
    .venv/bin/python bench/class_load.py --db sqlite --learners 60 --job none

Starts the course the way `make run` does (`python -m app serve`: one embedded lab worker, COURSE_WEB_PROCESSES
as configured in the environment, else the app's default) on loopback on a free port, against a SQLite file in a
temporary data dir and/or a throwaway PostgreSQL cluster started here (as the postgres user when run as root, like
tests/conftest.py). Then every learner, all at once, each with its own connection and cookies (httpx2, the async
HTTP client the test extra already installs):

    GET /register, POST /register                                   a new account
    GET /lessons/transformer-scaling/<part> for the six parts       the pages whose latency is reported
    POST a practice question's answer, POST a part's done tick
    POST /labs/env-check/jobs (htmx, as the lab page sends it)      a small job for the embedded worker

and prints the throughput, p50/p99 page latency, the count of 5xx answers and of connection errors, and the load
average; then it reads the database and checks that every write the server acknowledged is there (the user, the
attempt, the done tick, the job). It stops by itself: the server is stopped once the learners are done (the queued
jobs stay queued), and everything is abandoned after --deadline seconds.

Targets on a 2-core machine: 0 server errors, 0 connection errors, p99 page latency < 2 s. The script
exits 1 when a target is missed or an acknowledged write is missing. Nothing here is timed inside a test.

How the server is started for an executor lives in `course_server` (one place, so the same run can be repeated
under another executor).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent
LESSON = "transformer-scaling"
PARTS = ("orient", "history", "mental-model", "code-trace", "deep-dives", "practice")
JOBS = {  # what each learner submits: small, so the embedded worker is busy without the run being about labs
    "env-check": ("/labs/env-check/jobs", {"backend": "cpu"}),
    "fp8-step": ("/labs/fp8-step/jobs", {"backend": "cpu", "steps": "1", "d_model": "64", "ffn": "128"}),
}
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
QUESTION_FORM = re.compile(
    r'<form method="post" action="(/lessons/[^"]+/questions/([^"]+))"(.*?)</form>', re.S
)  # the practice page's question forms
HIDDEN = re.compile(r'<input type="hidden" name="(version|seed)" value="([^"]*)"')
RADIO = re.compile(r'type="radio" id="[^"]+" name="answer" value="([^"]+)"')
JOB_ID = re.compile(r'id="job-(\d+)"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- the servers


@contextmanager
def postgres_cluster(tmp: Path) -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a free loopback port; yields a URL of an empty database."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise SystemExit(
            "PostgreSQL binaries are missing: run `scripts/setup.sh --test` (installs Debian's postgresql)"
        )
    bindir = Path(found[-1]).parent
    base = tmp / "pg"
    data, sock = base / "data", base / "sock"
    sock.mkdir(parents=True)
    run_as: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        for p in (tmp, base, sock):
            shutil.chown(p, "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    subprocess.run(
        [*run_as, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    # Durability as shipped (fsync on): the writes this run counts are real commits. Enough connections for
    # every web process's pool plus the worker and this script. Statements over 250 ms and checkpoints are
    # logged (base/log), for a bench to say whether slow requests waited on the database.
    opts = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c max_connections=200"
    opts += " -c log_min_duration_statement=250 -c log_checkpoints=on"
    subprocess.run(
        [*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-w", "-l", str(base / "log"), "-o", opts, "start"],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [*run_as, str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "course"],
            check=True,
            capture_output=True,
        )
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/course"
    finally:
        subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"], capture_output=True)


@contextmanager
def course_server(
    tmp: Path,
    database_url: str,
    executor: str = "embedded",
    *,
    root: Path = ROOT,
    env: dict[str, str] | None = None,
    started: list[subprocess.Popen] | None = None,
) -> Iterator[str]:
    """`python -m app serve` on a free loopback port, as `make run` starts it; yields its base URL.

    The one executor-specific place: `embedded` runs the lab worker(s) the server starts itself
    (COURSE_WORKERS, default 1). `root`: the source tree to serve (another commit's, for a baseline); `env`:
    settings on top of these; `started` gets the server's process (to find its web processes).
    """
    if executor != "embedded":
        raise SystemExit(f"--executor: got {executor!r}; this script knows: embedded")
    port = free_port()
    extra = env or {}
    env = dict(
        os.environ,
        COURSE_DATA_DIR=str(tmp / "data"),
        COURSE_SECRET_KEY=secrets.token_urlsafe(32),
        COURSE_LOG_LEVEL="WARNING",
        COURSE_REGISTRATIONS_PER_ADDRESS="0",  # every learner here registers from 127.0.0.1
    )
    env.pop("COURSE_ENV", None)  # development, as `make run`
    env.pop("DATABASE_URL", None)
    env.update(extra)
    if database_url:
        env["DATABASE_URL"] = database_url
    log_path = tmp / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    if started is not None:
        started.append(proc)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                urllib.request.urlopen(base + "/login", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the server did not come up:\n{log_path.read_text()[-4000:]}") from None
                time.sleep(0.3)
        yield base
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        lines = log_path.read_text().splitlines()
        tracebacks = sum("Traceback" in ln for ln in lines)
        kinds = Counter(ln[:160] for ln in lines if re.match(r"^[\w.]+(Error|Exception|Timeout)\b.*?: ", ln))
        if tracebacks or kinds:
            print(f"  server log: {tracebacks} traceback(s); exceptions: {dict(kinds.most_common(3))}")


# ---------------------------------------------------------------- the learners


@dataclass
class Tally:
    """What the learners saw, and what the server acknowledged (to look for in the database afterwards)."""

    page_s: list[float] = field(default_factory=list)  # GETs of the six parts
    all_s: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)  # (step, status)
    connection_errors: Counter = field(default_factory=Counter)  # (step, exception name)
    users: list[str] = field(default_factory=list)  # emails whose registration was acknowledged
    answers: list[tuple[str, str]] = field(default_factory=list)  # (email, question id)
    done: list[tuple[str, str]] = field(default_factory=list)  # (email, part id)
    jobs: list[tuple[str, int]] = field(default_factory=list)  # (email, job id)
    unexpected: list[str] = field(default_factory=list)  # answers that were neither right nor a 5xx

    @property
    def server_errors(self) -> int:
        return sum(n for (_, status), n in self.statuses.items() if status >= 500)


class Stop(Exception):
    """This learner cannot go on (an error already counted)."""


async def call(
    tally: Tally, client: httpx2.AsyncClient, step: str, method: str, path: str, expect: tuple[int, ...], **kw
) -> httpx2.Response:
    started = time.perf_counter()
    try:
        r = await client.request(method, path, **kw)
    except httpx2.HTTPError as exc:  # refused, reset, timed out: the learner saw no answer
        tally.connection_errors[(step, type(exc).__name__)] += 1
        raise Stop from exc
    took = time.perf_counter() - started
    tally.all_s.append(took)
    if step == "part":
        tally.page_s.append(took)
    tally.statuses[(step, r.status_code)] += 1
    if r.status_code not in expect:
        if r.status_code < 500:
            tally.unexpected.append(f"{step} {method} {path}: HTTP {r.status_code} {r.text[:160]!r}")
        raise Stop
    return r


async def learner(i: int, base: str, tally: Tally, job: str, start: asyncio.Event) -> None:
    email = f"learner{i:04d}-{secrets.token_hex(3)}@example.org"
    async with httpx2.AsyncClient(
        base_url=base,
        timeout=httpx2.Timeout(120.0),  # long on purpose: a slow answer is measured, not turned into an error
        limits=httpx2.Limits(max_connections=1),  # one connection per learner, like one browser tab
        trust_env=False,  # loopback only: never a proxy from the environment
    ) as client:
        await start.wait()
        try:
            html = (await call(tally, client, "register-form", "GET", "/register", (200,))).text
            form = {"email": email, "password": "a class password", "display_name": f"Learner {i}"}
            form["csrf_token"] = CSRF.search(html).group(1)  # type: ignore[union-attr]
            await call(tally, client, "register", "POST", "/register", (303,), data=form)
            tally.users.append(email)
            pages = {}
            for part in PARTS:
                pages[part] = (await call(tally, client, "part", "GET", f"/lessons/{LESSON}/{part}", (200,))).text
            token = CSRF.search(pages["practice"]).group(1)  # type: ignore[union-attr]
            htmx = {"HX-Request": "true", "X-CSRF-Token": token}
            action, qid, body = next(
                (m.group(1), m.group(2), m.group(3))
                for m in QUESTION_FORM.finditer(pages["practice"])
                if RADIO.search(m.group(3))
            )
            answer = {"answer": RADIO.search(body).group(1), **dict(HIDDEN.findall(body))}  # type: ignore[union-attr]
            await call(tally, client, "answer", "POST", action, (200,), data=answer, headers=htmx)
            tally.answers.append((email, qid))
            done_path = f"/lessons/{LESSON}/progress/{PARTS[0]}/done"
            await call(tally, client, "done", "POST", done_path, (200,), data={"done": "1"}, headers=htmx)
            tally.done.append((email, PARTS[0]))
            if job != "none":
                path, params = JOBS[job]
                r = await call(tally, client, "job", "POST", path, (201,), data=params, headers=htmx)
                found = JOB_ID.search(r.text)
                if found is None:
                    tally.unexpected.append(f"job: no job id in the answer {r.text[:160]!r}")
                    raise Stop
                tally.jobs.append((email, int(found.group(1))))
        except Stop:
            return


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return (
        statistics.quantiles(values, n=1000, method="inclusive")[round(q * 1000) - 1] if len(values) > 1 else values[0]
    )


async def run_class(base: str, learners: int, job: str) -> tuple[Tally, float]:
    tally = Tally()
    start = asyncio.Event()
    tasks = [asyncio.create_task(learner(i, base, tally, job, start)) for i in range(learners)]
    await asyncio.sleep(0.5)  # every client built; then all of them go at once
    t0 = time.perf_counter()
    start.set()
    await asyncio.gather(*tasks)
    return tally, time.perf_counter() - t0


# ---------------------------------------------------------------- the database afterwards


def check_writes(database_url: str, tally: Tally) -> list[str]:
    """What the server acknowledged but the database does not hold (empty: all there)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    missing: list[str] = []
    try:
        with engine.connect() as conn:
            ids = {e: i for e, i in conn.execute(text("SELECT email, id FROM users"))}
            missing += [f"user {e}" for e in tally.users if e not in ids]
            attempts = {(u, q) for u, q in conn.execute(text("SELECT user_id, question_id FROM attempts"))}
            missing += [f"attempt {e} {q}" for e, q in tally.answers if (ids.get(e), q) not in attempts]
            done = set(conn.execute(text("SELECT user_id, part_id FROM part_progress WHERE done_at IS NOT NULL")))
            missing += [f"done {e} {p}" for e, p in tally.done if (ids.get(e), p) not in done]
            jobs = set(conn.execute(text("SELECT owner_id, id FROM jobs")))
            missing += [f"job {e} {j}" for e, j in tally.jobs if (ids.get(e), j) not in jobs]
    finally:
        engine.dispose()
    return missing


# ---------------------------------------------------------------- one run and the report


def one_run(kind: str, args: argparse.Namespace) -> bool:
    tmp = Path(tempfile.mkdtemp(prefix=f"class-load-{kind}-"))
    try:
        with contextmanager_for(kind, tmp) as database_url:
            with course_server(tmp, database_url, args.executor) as base:
                load_before = os.getloadavg()
                tally, took = asyncio.run(asyncio.wait_for(run_class(base, args.learners, args.job), args.deadline))
                load_after = os.getloadavg()
            db_url = database_url or f"sqlite:///{tmp / 'data' / 'course.db'}"
            missing = check_writes(db_url, tally)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    requests = len(tally.all_s) + sum(tally.connection_errors.values())
    p50, p99 = _pct(tally.page_s, 0.50), _pct(tally.page_s, 0.99)
    conn_errors = sum(tally.connection_errors.values())
    web = os.environ.get("COURSE_WEB_PROCESSES", "default")
    print(
        f"\n{kind}: {args.learners} learners at once, executor {args.executor}, job {args.job}, "
        f"COURSE_WEB_PROCESSES={web}, {os.cpu_count()} cores"
    )
    print(f"  load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)")
    print(f"  {requests} requests in {took:.1f} s: {len(tally.all_s) / took:.1f} answered per second")
    print(
        f"  page latency (GET of the six parts, {len(tally.page_s)} pages): p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms"
    )
    print(f"  slowest answer of any kind: {max(tally.all_s, default=0) * 1000:.0f} ms")
    print(f"  server errors (5xx): {tally.server_errors}  connection errors: {conn_errors}")
    for (step, status), n in sorted(tally.statuses.items()):
        if status >= 500:
            print(f"    {n} x HTTP {status} on {step}")
    for (step, name), n in sorted(tally.connection_errors.items()):
        print(f"    {n} x {name} on {step}")
    for line in tally.unexpected[:5]:
        print(f"  unexpected: {line}")
    acked = len(tally.users) + len(tally.answers) + len(tally.done) + len(tally.jobs)
    print(
        f"  acknowledged writes: {len(tally.users)} users, {len(tally.answers)} answers, {len(tally.done)} done ticks, "
        f"{len(tally.jobs)} jobs"
    )
    if missing:
        print(f"  MISSING from the database: {len(missing)} of {acked}, e.g. {missing[:5]}")
    else:
        print(f"  every one of the {acked} acknowledged writes is in the database")
    ok = tally.server_errors == 0 and conn_errors == 0 and p99 < 2.0 and not missing and not tally.unexpected
    print(
        f"  targets (0 server errors, 0 connection errors, p99 page < 2 s, all writes kept): {'met' if ok else 'NOT met'}"
    )
    return ok


def contextmanager_for(kind: str, tmp: Path):
    if kind == "postgres":
        return postgres_cluster(tmp)

    @contextmanager
    def sqlite() -> Iterator[str]:
        yield ""  # the app's default: a SQLite file in the data dir

    return sqlite()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--learners", type=int, default=200)
    ap.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    ap.add_argument("--job", choices=(*JOBS, "none"), default="env-check", help="what each learner submits")
    ap.add_argument("--executor", default="embedded", help="how lab jobs run (see course_server)")
    ap.add_argument("--deadline", type=float, default=600, help="seconds before a run is abandoned")
    args = ap.parse_args()
    kinds = ("sqlite", "postgres") if args.db == "both" else (args.db,)
    results = [one_run(kind, args) for kind in kinds]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
