"""Lesson-page throughput under wrk, as a ratio to a bare FastAPI endpoint measured in the same run.

    make bench                                 (scripts/setup.sh --bench installs Debian's wrk)
    .venv/bin/python bench/lesson_throughput.py [--duration 8] [--connections 16] [--threads 2]

Starts the course server the way a user does (`python -m app serve`: SQLite in a temporary data dir,
no lab workers, one web process) and a one-route FastAPI app under the same uvicorn settings, both on
loopback. Registers a learner, saves answers to every question of the practice part and every
pause-and-reason prompt of the deep-dives part, then points wrk, with the learner's session cookie, at:

    bare       GET /ping of the one-route app (the baseline)
    part       GET /lessons/transformer-scaling/deep-dives
    practice   GET /lessons/transformer-scaling/practice   (the learner's saved answers shown)
    home       GET /                                         (the learner's dashboard)
    login      GET /login      (anonymous, a short form; a plain `def` page with two thread hops; context)

and the bare endpoint once more at the end, and prints req/s, p50 and p99 latency and each page's ratio to
the baseline (the mean of its two runs). Goal: every learner page >= 0.5 x the baseline's req/s
with p99 < 50 ms at 16 connections. On the 2-core machine, shared with wrk, every figure follows whatever
else runs there (runs minutes apart gave the bare endpoint 2,389 to 3,738 req/s), so the bench also says
whether the run was quiet: the load average under QUIET_LOAD when it started, and the bare endpoint's two
rates within QUIET_DRIFT of each other. Nothing here asserts a time; it exits non-zero only if a page
answered with anything but 200.

Cores: by default each server runs on the last core and wrk on the others (taskset), as a class's browsers
are not on the server's machine: the tail then measures the server, not the scheduler handing one core
between the load generator and the server. `--shared-cores` lets them share every core.

Where a page's time went (py-spy --gil on the server, and sequential in-process calls), and what was done:
- two thread hops per request (the login lookup, then the handler, each a worker-thread wake-up and a GIL
  hand-over), which under load cost more than the page's own work: lesson parts and the dashboard now do
  their reads on the event loop (app/web/deps.py Viewer), about 2x the requests per second;
- a full garbage collection walking every lesson, template and library object every few thousand
  requests, an 80 ms pause that was the p99: a serving process freezes its start-up objects (startup.settle);
- each learner's pause and question slots and pacing list re-rendered on every view: kept per learner
  state (app/web/views/lesson_pages.py);
- the routers matched in an order that put 26 routes before a part page's: the most-read pages come first.
What is left, step by step in one process (bench/page_breakdown.py prints it): our middleware and the routing
~0.1 ms, dependency injection ~0.12 ms, the ORM login lookup (session, user, roles) ~0.4-0.5 ms, then the page's
own work: the dashboard ~0.45-0.6 ms, practice ~0.8-1.0 ms, a part ~1.0-1.2 ms (its state query, the learner's
slots, the page around the kept body, the commit). Under wrk the HTTP server and the client's share of the 2
cores come on top (~0.5-0.7 ms a request). At 0.5x of the bare endpoint (2,200-2,700 req/s on the 2-core
machine) a page would have 0.75-0.9 ms a request in all, at most ~0.4 ms of its own: about what the login
lookup alone costs.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSON = "transformer-scaling"
LEARNER_PAGES = ("part", "practice", "home")  # the goal's pages; "login" is context (the floor of any page)
QUIET_LOAD = 0.5  # 1-minute load average before the servers start: nothing else was running
QUIET_DRIFT = 0.10  # the bare endpoint's rate at the start and at the end of a quiet run differ by less
UVICORN = dict(access_log=False, server_header=False, log_level="warning")  # what `python -m app serve` uses
BARE_APP = f"""
import uvicorn
from fastapi import FastAPI

app = FastAPI()


@app.get("/ping")
def ping():
    return {{"ok": True}}


if __name__ == "__main__":
    import sys
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), **{UVICORN!r})
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server for {url} exited:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"{url} did not come up:\n{log.read_text()[-3000:]}")


class Learner:
    """A logged-in browser, enough of one: a cookie jar and the CSRF token of the pages it reads."""

    def __init__(self, base: str):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=10) as r:
            return r.read().decode()

    def post(self, path: str, data: dict) -> int:
        body = urllib.parse.urlencode(data).encode()
        try:
            with self.opener.open(self.base + path, data=body, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def csrf(self, html: str) -> str:
        found = re.search(r'name="csrf_token" value="([^"]+)"', html)
        if not found:
            raise SystemExit("no CSRF token on the page")
        return found.group(1)

    def cookie(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)


def answer_everything(learner: Learner, part: str) -> int:
    """Answer every question and pause-and-reason prompt on a part as a learner would; returns how many."""
    html = learner.get(f"/lessons/{LESSON}/{part}")
    token = learner.csrf(html)
    saved = 0
    for form in re.finditer(
        r'<form method="post" action="(/lessons/[^"]+/(questions|pauses)/[^"]+)"(.*?)</form>', html, re.S
    ):
        action, kind, body = form.group(1), form.group(2), form.group(3)
        fields = dict(re.findall(r'<input type="hidden" name="(version|seed)" value="([^"]*)"', body))
        choice = re.search(r'type="radio" id="[^"]+" name="answer" value="([^"]+)"', body)
        if kind == "pauses" or "<textarea" in body:
            answer = "The scale comes from the amax history, so a spike is clipped until the history catches up."
        elif choice:
            answer = choice.group(1)
        else:
            answer = "42"
        status = learner.post(action, {"csrf_token": token, "answer": answer, **fields})
        if status not in (200, 400):  # 400: a numeric answer the grader reads as malformed is still shown
            raise SystemExit(f"answering {action} gave HTTP {status}")
        saved += 1
    return saved


def wrk(url: str, cookie: str | None, args: argparse.Namespace) -> dict:
    cmd = [
        *args.client_cpus,
        "wrk",
        f"-t{args.threads}",
        f"-c{args.connections}",
        f"-d{args.duration}s",
        "--timeout",
        "5s",
        "--latency",
    ]
    if cookie:
        cmd += ["-H", f"Cookie: {cookie}"]
    out = subprocess.run([*cmd, url], capture_output=True, text=True, timeout=args.duration + 60)
    text = out.stdout
    if out.returncode != 0:
        raise SystemExit(f"wrk failed on {url}:\n{out.stderr}{text}")
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if bad:
        raise SystemExit(f"{url}: {bad.group(1)} responses were not 2xx/3xx; a benchmark of errors means nothing")

    def ms(label: str) -> float:
        m = re.search(rf"^\s*{label}\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        if not m:
            raise SystemExit(f"wrk printed no {label} latency:\n{text}")
        return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]

    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if not rps:
        raise SystemExit(f"wrk printed no Requests/sec:\n{text}")
    return {"rps": float(rps.group(1)), "p50": ms("50%"), "p99": ms("99%")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=8, help="seconds per endpoint")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--shared-cores",
        action="store_true",
        help="let wrk and the servers share every core (by default each server has a core of its own)",
    )
    args = ap.parse_args()
    pinned = not args.shared_cores and (os.cpu_count() or 1) >= 2 and shutil.which("taskset") is not None
    last = (os.cpu_count() or 1) - 1
    server_cpus = ["taskset", "-c", str(last)] if pinned else []
    args.client_cpus = ["taskset", "-c", f"0-{last - 1}"] if pinned else []
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: run `scripts/setup.sh --bench` (installs Debian's wrk)")

    load = os.getloadavg()[0]  # before our own servers start
    tmp = Path(tempfile.mkdtemp(prefix="bench-"))
    (tmp / "bare_app.py").write_text(BARE_APP)
    p_course, p_bare = free_port(), free_port()
    env = dict(
        os.environ,
        COURSE_ENV="test",
        COURSE_DATA_DIR=str(tmp / "data"),
        COURSE_WORKERS="0",
        COURSE_WEB_PROCESSES="1",
        COURSE_SECRET_KEY="bench-secret",
        COURSE_LOG_LEVEL="WARNING",
    )
    env.pop("DATABASE_URL", None)
    course_log, bare_log = tmp / "course.log", tmp / "bare.log"
    course = subprocess.Popen(
        [*server_cpus, sys.executable, "-m", "app", "serve", "--port", str(p_course)],
        cwd=ROOT,
        env=env,
        stdout=open(course_log, "w"),
        stderr=subprocess.STDOUT,
    )
    bare = subprocess.Popen(
        [*server_cpus, sys.executable, str(tmp / "bare_app.py"), str(p_bare)],
        cwd=tmp,
        stdout=open(bare_log, "w"),
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{p_course}"
        wait_up(base + "/login", course, course_log)
        wait_up(f"http://127.0.0.1:{p_bare}/ping", bare, bare_log)
        learner = Learner(base)
        token = learner.csrf(learner.get("/register"))
        form = {
            "email": "bench@example.org",
            "password": "bench password",
            "display_name": "Bench",
            "csrf_token": token,
        }
        learner.post("/register", form)
        saved = answer_everything(learner, "practice") + answer_everything(learner, "deep-dives")
        cookie = learner.cookie()
        targets = [
            ("bare", f"http://127.0.0.1:{p_bare}/ping", None),
            ("part", f"{base}/lessons/{LESSON}/deep-dives", cookie),
            ("practice", f"{base}/lessons/{LESSON}/practice", cookie),
            ("home", f"{base}/", cookie),
            ("login", f"{base}/login", None),
            ("bare again", f"http://127.0.0.1:{p_bare}/ping", None),  # did the machine's load change meanwhile?
        ]
        for _, url, c in targets[:-1]:  # warm-up: templates compiled, caches filled, connections open
            wrk(url, c, argparse.Namespace(threads=1, connections=2, duration=1, client_cpus=args.client_cpus))
        results = {name: wrk(url, c, args) for name, url, c in targets}
    finally:
        for proc in (course, bare):
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)

    bares = (results["bare"], results["bare again"])
    bare_rps = (bares[0]["rps"] + bares[1]["rps"]) / 2
    drift = abs(bares[0]["rps"] - bares[1]["rps"]) / bare_rps
    print(
        f"wrk -t{args.threads} -c{args.connections} -d{args.duration}s, loopback, one uvicorn process each, "
        f"SQLite; {os.cpu_count()} cores; learner with {saved} saved answers"
    )
    print(
        f"cores: each server on core {last}, wrk on the rest (taskset)"
        if pinned
        else "cores: wrk and the servers share every core (--shared-cores, or no taskset)"
    )
    print(f"{'endpoint':<10} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'x bare':>7}  path")
    paths = {name: url.split(":", 2)[2].split("/", 1)[1] for name, url, _ in targets}
    for name, r in results.items():
        print(f"{name:<10} {r['rps']:9.1f} {r['p50']:8.2f} {r['p99']:8.2f} {r['rps'] / bare_rps:7.3f}  /{paths[name]}")
    print(f"x bare: against {bare_rps:.1f} req/s, the mean of the bare endpoint's two runs ({drift:.0%} apart)")
    pages = [r for n, r in results.items() if n in LEARNER_PAGES]
    rate = all(r["rps"] >= 0.5 * bare_rps for r in pages)
    latency = all(r["p99"] < 50 for r in pages)
    print(f"goal, rate (part, practice, home >= 0.5 x bare req/s): {'met' if rate else 'not met'}")
    print(f"goal, latency (part, practice, home p99 < 50 ms): {'met' if latency else 'not met'}")
    seen = f"load average {load:.2f} at the start, the bare endpoint's rate moved {drift:.0%} during the run"
    if load < QUIET_LOAD and drift < QUIET_DRIFT:
        print(f"machine: quiet ({seen})")
    else:
        print(
            f"machine: busy ({seen}; quiet is under {QUIET_LOAD:g} and {QUIET_DRIFT:.0%}): these figures say "
            "less than a quiet run's; run again when nothing else runs"
        )


if __name__ == "__main__":
    main()
