"""A class in its browsers: N learners reading, answering and waiting for lab runs, at the rates their pages set.

    .venv/bin/python bench/class_browsers.py --learners 200 --window 20 --db sqlite
    .venv/bin/python bench/class_browsers.py --learners 2000 --window 90 --db postgres --web-processes 2 \\
        --baseline main                                     # the lead's measurement: before and after, one command

Starts `python -m app serve` (bench/class_load.py `course_server`) with no lab worker (lab hosts are elsewhere in a
real class, so queued runs stay queued: the worst case for job-status polls), COURSE_WEB_PROCESSES web processes,
on a SQLite file or a throwaway PostgreSQL cluster, loopback only. Then, outside the measured window:

    register     every learner, a few at a time (argon2 is slow on purpose; the passwords lane queues them)
    submit       a tenth of them (--queued) submit a small lab run, which stays queued
    ramp         the learners open their pages, spread evenly over --ramp seconds

and for --window seconds it measures the class as browsers load it. Each learner is one browser with one cookie
jar and at most six connections, with a lesson tab open and, if they queued a run, a second tab on that run's page.
What a tab sends is read from the HTML it was served, so the same learner drives this tree and an older one:

    reading time      the part's beacon: `hx-post=…/time hx-trigger="every 20s"` (htmx, header token), or the
                      `data-reading` element (static/reading.js: at most once a minute, and the rest when the
                      part is left; a form body with the page's token, as navigator.sendBeacon sends it)
    job status        what the pages poll: each job card `every 2s` and the notices `every 3s`, or the one
                      per-page poll of /jobs/live with If-None-Match, at the interval its last answer set
    the learner       an answer about once a minute (a practice question), a new part about every 3 minutes
                      (htmx, as the next link does), the home page about every 7 minutes; each interval drawn
                      from 0.5x to 1.5x its mean, each learner's first one at a random phase

Timers fire on their schedule whatever the answers (setInterval: a poll still waiting when its next tick comes
drops that tick, as htmx does), so "asked" is what the browsers wanted and "served" what got answered in the
window. Reported per run: asked and served requests per second, client p50/p99 (from the tick to the last byte),
server p50/p99 from the app's own /metrics histogram (delta over the window, all routes but /metrics), errors (5xx,
refused or reset connections, any other status a page would not expect), each kind of request, and the cores the web
processes, PostgreSQL and this script used. --baseline REV runs the same class against the tree at REV first
(`git archive`, nothing checked out) and prints both rows with their ratio. --profile DIR records each web process
with py-spy during the window and prints where its time went.

Target (docs/operating.md, "Sizing the web tier"): served >= 90 % of asked, 0 errors, p99 < 250 ms client- and server-side.
Exit 1 when the last run (the candidate) misses it. Nothing here is timed inside a test.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime
import gc
import json
import os
import random
import re
import secrets
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from class_load import PARTS, ROOT, course_server, postgres_cluster  # noqa: E402

LESSON = "transformer-scaling"
ANSWER_S, PART_S, HOME_S = 60.0, 180.0, 420.0  # the learner's own pace (means)
MAX_CONNECTIONS = 6  # a browser's connections to one host over HTTP/1.1
SLOW_S = 0.25  # the target's p99: slower requests are placed on the window's timeline
METRICS_TOKEN = secrets.token_urlsafe(16)

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
HEADER_TOKEN = re.compile(r'"X-CSRF-Token": "([^"]+)"')
QUESTION_FORM = re.compile(r'<form method="post" action="(/lessons/[^"]+/questions/[^"/]+)"(.*?)</form>', re.S)
HIDDEN = re.compile(r'<input type="hidden" name="(version|seed)" value="([^"]*)"')
RADIO = re.compile(r'type="radio" id="[^"]+" name="answer" value="([^"]+)"')
JOB_ID = re.compile(r'id="job-(\d+)"')
OLD_BEACON = re.compile(r'hx-post="(/lessons/[^"]+/time)" hx-trigger="every (\d+)s" hx-vals=\'\{"seconds": (\d+)\}\'')
NEW_BEACON = re.compile(r'data-reading="(/lessons/[^"]+/time)"[^>]*data-report-s="(\d+)"')
CARD_POLL = re.compile(r'hx-get="(/jobs/\d+)" hx-trigger="every (\d+)s')
NOTICE_POLL = re.compile(r'hx-get="/notices" hx-trigger="every (\d+)s"')
LIVE_POLL = re.compile(r'<[^>]*id="jobs-live"[^>]*>')
TRIGGER_EVERY = re.compile(r'hx-trigger="every (\d+)s"')
LIVE_HEADERS = re.compile(r"hx-headers='([^']*)'")
LIVE_JOB = re.compile(r'name="live_job" value="(\d+)"')


# ---------------------------------------------------------------- what the learners saw


@dataclass
class Tally:
    """Requests whose tick fell in the measured window, and what happened to them."""

    start: float = 0.0
    end: float = 0.0
    asked: Counter = field(default_factory=Counter)  # kind -> ticks (dropped ones too)
    dropped: Counter = field(default_factory=Counter)  # kind -> ticks skipped: that poll was still waiting
    retried: Counter = field(default_factory=Counter)  # kind -> sent again after the connection closed under it
    lag: dict[int, float] = field(default_factory=lambda: collections.defaultdict(float))  # second -> longest stall (s)
    slow: Counter = field(default_factory=Counter)  # second of the window -> requests sent then that took >= SLOW_S
    served: Counter = field(default_factory=Counter)  # kind -> answered inside the window
    took: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    statuses: Counter = field(default_factory=Counter)  # (kind, status)
    errors: Counter = field(default_factory=Counter)  # (kind, what)
    samples: list[str] = field(default_factory=list)

    def measuring(self, t: float) -> bool:
        return self.start <= t < self.end

    def error(self, kind: str, what: str, sample: str = "") -> None:
        self.errors[(kind, what)] += 1
        if sample and len(self.samples) < 8:
            self.samples.append(sample)


class Browser:
    """One learner's browser: one cookie jar, up to six connections, a lesson tab and maybe a job tab."""

    def __init__(self, i: int, base: str, tally: Tally, rng: random.Random, ssl_context: ssl.SSLContext):
        self.i, self.tally, self.rng = i, tally, rng
        self.email = f"learner{i:05d}-{secrets.token_hex(3)}@example.org"
        self.client = httpx2.AsyncClient(
            base_url=base,
            timeout=httpx2.Timeout(60.0),  # a slow answer is measured, not turned into an error
            limits=httpx2.Limits(max_connections=MAX_CONNECTIONS, keepalive_expiry=60.0),
            trust_env=False,
            verify=ssl_context,  # loopback HTTP: one context for every learner instead of one each
        )
        self.token = ""
        self.job_id: int | None = None
        self.questions: list[tuple[str, dict]] = []  # (action, form) of the practice page's choice questions
        self.part = rng.randrange(len(PARTS))
        self.beacon: tuple[str, int, str] | None = None  # (url, every s, "old" | "new") of the open part
        self.read_since = 0.0  # the new beacon: when the time not yet reported started
        self.polls: dict[str, Poll] = {}  # tab:name -> what that tab polls
        self.leaving: set[asyncio.Task] = set()  # the time of a part just left, on its way
        self.wake = asyncio.Event()  # set when a timer changed while the tab's loop slept
        self.due: dict[str, float] = {}  # the learner's own timers (answer, part, home, beacon)

    # ------------------------------------------------------------ one request

    async def send(self, kind: str, method: str, path: str, expect: tuple[int, ...], tick: float | None = None, **kw):
        """The request, counted if its tick is in the window; None when it got no answer or an unexpected one."""
        tally = self.tally
        tick = time.perf_counter() if tick is None else tick
        counted = tally.measuring(tick)
        if counted:
            tally.asked[kind] += 1
        try:
            try:
                r = await self.client.request(method, path, **kw)
            except (httpx2.ReadError, httpx2.RemoteProtocolError):
                # The server closed a kept-alive connection as this request went out on it. A browser sends
                # the request again on a new one (Chromium: HttpNetworkTransaction::ShouldResendRequest), so
                # does this learner, once; the retry is counted and its time is in the request's.
                if counted:
                    tally.retried[kind] += 1
                r = await self.client.request(method, path, **kw)
        except httpx2.HTTPError as exc:
            if counted:
                tally.error(kind, type(exc).__name__)
            return None
        done = time.perf_counter()
        if counted:
            tally.statuses[(kind, r.status_code)] += 1
            if r.status_code >= 500:
                tally.error(kind, f"HTTP {r.status_code}")
            elif r.status_code not in expect:
                tally.error(kind, f"HTTP {r.status_code}", f"{kind} {method} {path}: {r.status_code} {r.text[:200]!r}")
            if done < tally.end:
                tally.served[kind] += 1
                tally.took[kind].append(done - tick)
                if done - tick >= SLOW_S:
                    tally.slow[int(tick - tally.start)] += 1
        if r.status_code not in expect:
            return None
        return r

    # ------------------------------------------------------------ outside the window

    async def register(self) -> bool:
        r = await self.send("register", "GET", "/register", (200,))
        if r is None:
            return False
        form = {"email": self.email, "password": "a class password", "display_name": f"Learner {self.i}"}
        form["csrf_token"] = CSRF.search(r.text).group(1)  # type: ignore[union-attr]
        return await self.send("register", "POST", "/register", (303,), data=form) is not None

    async def submit(self) -> bool:
        """A small run that stays queued (no lab worker here)."""
        r = await self.send("submit", "GET", "/labs/env-check", (200,))
        if r is None:
            return False
        self.token = CSRF.search(r.text).group(1)  # type: ignore[union-attr]
        headers = {"HX-Request": "true", "X-CSRF-Token": self.token}
        r = await self.send("submit", "POST", "/labs/env-check/jobs", (201,), data={"backend": "cpu"}, headers=headers)
        found = JOB_ID.search(r.text) if r is not None else None
        self.job_id = int(found.group(1)) if found else None
        return self.job_id is not None

    async def open_pages(self) -> None:
        """The ramp: the practice page (for its questions), the part being read, the run's page."""
        r = await self.send("part", "GET", f"/lessons/{LESSON}/practice", (200,))
        if r is not None:
            for action, body in QUESTION_FORM.findall(r.text):
                if m := RADIO.search(body):
                    self.questions.append((action, {"answer": m.group(1), **dict(HIDDEN.findall(body))}))
        r = await self.send("part", "GET", f"/lessons/{LESSON}/{PARTS[self.part]}", (200,))
        if r is not None:
            self.read_page(r.text, whole=True)
        if self.job_id is not None:
            r = await self.send("part", "GET", f"/jobs/{self.job_id}", (200,))
            if r is not None:
                self.find_polls("job", r.text)

    # ------------------------------------------------------------ what a page asks for

    def read_page(self, html: str, *, whole: bool) -> None:
        if m := HEADER_TOKEN.search(html) or CSRF.search(html):
            self.token = m.group(1)
        if m := NEW_BEACON.search(html):
            self.beacon = (m.group(1), int(m.group(2)), "new")
        elif m := OLD_BEACON.search(html):
            self.beacon = (m.group(1), int(m.group(2)), "old")
        else:
            self.beacon = None
        self.read_since = time.perf_counter()
        if whole:  # a part swapped in by htmx leaves the page's other polls as they were
            self.find_polls("lesson", html)

    def find_polls(self, tab: str, html: str) -> None:
        for key in [k for k in self.polls if k.startswith(tab + ":")]:
            del self.polls[key]
        for path, every in CARD_POLL.findall(html):
            self.polls[f"{tab}:{path}"] = Poll("status", path, float(every))
        if m := NOTICE_POLL.search(html):
            self.polls[f"{tab}:notices"] = Poll("notices", "/notices", float(m.group(1)))
        if poll := live_poll(html):
            self.polls[f"{tab}:live"] = poll

    # ------------------------------------------------------------ the learner at work

    async def run(self, stop: float) -> None:
        """The tab's timers. Each fires on its own schedule; the loop wakes early when a poll's answer or a new
        part changed the schedule, so a tick is never sent later than a browser would send it."""
        now = time.perf_counter()
        rng = self.rng
        due = {
            "answer": now + rng.uniform(0, ANSWER_S),
            "part": now + rng.uniform(0, PART_S),
            "home": now + rng.uniform(0, HOME_S),
        }
        if self.beacon:
            due["beacon"] = now + rng.uniform(0, self.beacon[1])
        for poll in self.polls.values():
            poll.due = now + rng.uniform(0, poll.every)
        pending: set[asyncio.Task] = set()
        self.due = due
        while True:
            events = [(t, name) for name, t in due.items()]
            events += [(p.due, key) for key, p in self.polls.items() if not p.in_flight]
            t, name = min(events)
            if t >= stop:
                break
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), max(0.0, t - time.perf_counter()))
                continue  # a poll answered or a part arrived: its timers changed, look again
            except TimeoutError:
                pass
            if name in self.polls:
                poll = self.polls[name]
                poll.due = t + poll.every
                task = asyncio.create_task(self.poll(name, poll, t))
            elif name == "beacon":
                assert self.beacon is not None
                due["beacon"] = t + self.beacon[1]
                task = asyncio.create_task(self.report(self.beacon, t, self.beacon[1]))
            elif name == "answer":
                due[name] = t + ANSWER_S * rng.uniform(0.5, 1.5)
                task = asyncio.create_task(self.answer(t))
            elif name == "home":
                due[name] = t + HOME_S * rng.uniform(0.5, 1.5)
                task = asyncio.create_task(self.send("home", "GET", "/", (200,), t))
            else:  # a new part: the rest of this one's time first (the new beacon), then the next part
                due[name] = t + PART_S * rng.uniform(0.5, 1.5)
                due.pop("beacon", None)  # the old part's timer goes with it; the new part's starts when it arrives
                task = asyncio.create_task(self.next_part(t))
            pending.add(task)
            task.add_done_callback(pending.discard)
        if pending:
            await asyncio.wait(pending, timeout=60)

    async def report(self, beacon: tuple[str, int, str], tick: float, seconds: float) -> None:
        url, _, kind = beacon
        if beacon is self.beacon:
            self.read_since = tick
        if kind == "old":  # htmx's every-20 s post, the token in a header
            headers = {"HX-Request": "true", "X-CSRF-Token": self.token}
            await self.send("beacon", "POST", url, (204,), tick, data={"seconds": str(int(seconds))}, headers=headers)
        else:  # navigator.sendBeacon: a form body, the token in it, no htmx headers
            data = {"seconds": str(int(seconds)), "csrf_token": self.token}
            await self.send("beacon", "POST", url, (204,), tick, data=data)

    async def answer(self, tick: float) -> None:
        if not self.questions:
            return
        action, form = self.rng.choice(self.questions)
        headers = {"HX-Request": "true", "X-CSRF-Token": self.token}
        await self.send("answer", "POST", action, (200,), tick, data=form, headers=headers)

    async def next_part(self, tick: float) -> None:
        if self.beacon and self.beacon[2] == "new":  # reading.js hands in the part's time as it leaves
            left = int(tick - self.read_since)
            if left >= 1:
                self.leaving.add(task := asyncio.create_task(self.report(self.beacon, tick, left)))
                task.add_done_callback(self.leaving.discard)
        self.part = (self.part + 1) % len(PARTS)
        headers = {"HX-Request": "true", "HX-Target": "div#lesson-body"}
        r = await self.send("part", "GET", f"/lessons/{LESSON}/{PARTS[self.part]}", (200,), tick, headers=headers)
        if r is not None:
            self.read_page(r.text, whole=False)
        if self.beacon:
            self.due["beacon"] = time.perf_counter() + self.beacon[1]
        self.wake.set()

    async def poll(self, key: str, poll: Poll, tick: float) -> None:
        poll.in_flight = True
        try:
            headers = {"HX-Request": "true"}
            if poll.etag:
                headers["If-None-Match"] = poll.etag
            expect = (200, 204, 304)
            r = await self.send(poll.kind, "GET", poll.path, expect, tick, headers=headers, params=poll.params)
        finally:
            poll.in_flight = False
            now = time.perf_counter()
            while poll.due <= now:  # ticks that came while it waited: htmx drops them
                if self.tally.measuring(poll.due):
                    self.tally.asked[poll.kind] += 1
                    self.tally.dropped[poll.kind] += 1
                poll.due += poll.every
            self.wake.set()
        if r is None or r.status_code != 200:
            return
        tab = key.split(":")[0]
        if poll.kind == "live":
            fresh = live_poll(r.text)
            if fresh is None:
                self.polls.pop(key, None)
            else:
                fresh.due = time.perf_counter() + fresh.every  # the swapped-in element's timer starts now
                self.polls[key] = fresh
        elif poll.kind == "status":
            m = CARD_POLL.search(r.text)
            if m is None:
                self.polls.pop(key, None)  # the card finished: no more polling
            else:
                poll.every = float(m.group(2))
        elif poll.kind == "notices":
            m = NOTICE_POLL.search(r.text)
            if m is None:
                self.polls.pop(f"{tab}:notices", None)

    async def close(self) -> None:
        await self.client.aclose()


@dataclass
class Poll:
    kind: str  # status (a card's own poll) | notices | live (the page's one poll)
    path: str
    every: float
    etag: str = ""
    params: list[tuple[str, str]] = field(default_factory=list)
    due: float = 0.0
    in_flight: bool = False


def live_poll(html: str) -> Poll | None:
    """The page's one job-status poll (templates/jobs/_live.html), when it polls."""
    m = LIVE_POLL.search(html)
    if m is None:
        return None
    tag = m.group(0)
    every = TRIGGER_EVERY.search(tag)
    if every is None:
        return None
    headers = LIVE_HEADERS.search(tag)
    etag = json.loads(headers.group(1).replace("&#34;", '"')).get("If-None-Match", "") if headers else ""
    params = [("live_job", j) for j in LIVE_JOB.findall(html)]
    return Poll("live", "/jobs/live", float(every.group(1)), etag, params)


# ---------------------------------------------------------------- the server's view


def scrape(base: str) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """{(route, status class): [(le, cumulative count)]} of the request-duration histogram, /metrics left out."""
    req = urllib.request.Request(base + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    t0 = time.perf_counter()
    text = urllib.request.urlopen(req, timeout=30).read().decode()
    print(f"  /metrics answered in {(time.perf_counter() - t0) * 1000:.0f} ms ({len(text)} bytes)")
    out: dict[tuple[str, str], list[tuple[float, float]]] = collections.defaultdict(list)
    pattern = re.compile(r"^course_http_request_duration_seconds_bucket\{(.*?)\} ([0-9.e+]+)$", re.M)
    for labels, value in pattern.findall(text):
        lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if lab.get("route") == "/metrics":
            continue
        le = float("inf") if lab["le"] == "+Inf" else float(lab["le"])
        out[(lab["route"], lab["status_class"])].append((le, float(value)))
    return out


def histogram_delta(before: dict, after: dict, routes: set[str] | None = None) -> list[tuple[float, float]]:
    """Cumulative (le, count) of the requests between two scrapes, summed over routes (or only `routes`)."""
    totals: dict[float, float] = collections.defaultdict(float)
    for key, buckets in after.items():
        if routes is not None and key[0] not in routes:
            continue
        old = dict(before.get(key, []))
        for le, n in buckets:
            totals[le] += n - old.get(le, 0.0)
    return sorted(totals.items())


def quantile(buckets: list[tuple[float, float]], q: float) -> tuple[float, float]:
    """(interpolated value, bucket bound it is under) of quantile q; nan when no request was counted."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return float("nan"), float("nan")
    want, lo, below = q * total, 0.0, 0.0
    for le, n in buckets:
        if n >= want:
            if le == float("inf"):
                return lo, le
            return lo + (le - lo) * ((want - below) / max(n - below, 1e-9)), le
        lo, below = le, n
    return lo, float("inf")


def cpu_seconds(pids: list[int]) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


def children_of(pid: int) -> list[int]:
    """Every descendant of pid (the web processes of `serve`, the backends of PostgreSQL)."""
    parents: dict[int, list[int]] = collections.defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(fields[1])].append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(parents.get(p, []))
    return out


def postgres_pids(tmp: Path) -> list[int]:
    """The postmaster of class_load.postgres_cluster(tmp) and its backends."""
    pidfile = tmp / "pg" / "data" / "postmaster.pid"
    return children_of(int(pidfile.read_text().split()[0])) if pidfile.exists() else []


def web_processes(serve: int) -> list[int]:
    """The processes that answer HTTP: uvicorn's spawned workers, or `serve` itself when it has none."""
    spawned = []
    for pid in children_of(serve):
        try:
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                spawned.append(pid)
        except OSError:
            pass
    return spawned or [serve]


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 1000) - 1]


# ---------------------------------------------------------------- one run


@dataclass
class Result:
    label: str
    learners: int
    window: float
    asked: float
    served: float
    client_p50: float
    client_p99: float
    server_p50: float
    server_p99: float
    server_p99_le: float
    errors: int
    web_cores: float
    db_cores: float
    bench_cores: float
    kinds: list[str]

    @property
    def ok(self) -> bool:
        return (
            self.served >= 0.9 * self.asked and self.errors == 0 and self.client_p99 < 0.25 and self.server_p99 < 0.25
        )


async def drive(base: str, args: argparse.Namespace, tally: Tally, pids: dict[str, list[int]]) -> dict:
    rng = random.Random(args.seed)
    ctx = ssl.create_default_context()
    browsers = [Browser(i, base, tally, random.Random(rng.random()), ctx) for i in range(args.learners)]
    t0 = time.perf_counter()
    gate = asyncio.Semaphore(args.register_concurrency)

    async def prepare(b: Browser, queued: bool) -> bool:
        async with gate:
            return await b.register() and (not queued or await b.submit())

    queued = set(rng.sample(range(args.learners), round(args.queued * args.learners)))
    ready = await asyncio.gather(*(prepare(b, b.i in queued) for b in browsers))
    if not all(ready):
        raise SystemExit(f"{ready.count(False)} learners could not register or submit: {tally.samples[:3]}")
    print(
        f"  registered {args.learners} learners ({len(queued)} with a queued run) in {time.perf_counter() - t0:.0f} s"
    )

    gc.collect()
    gc.freeze()  # 2,000 browsers' clients and cookie jars: out of the full collections that stalled this loop
    start = time.perf_counter() + 1.0
    ramp_end = start + args.ramp
    tally.start = ramp_end + args.settle
    tally.end = tally.start + args.window
    stop = tally.end

    async def browse(b: Browser, at: float) -> None:
        await asyncio.sleep(max(0.0, at - time.perf_counter()))
        await b.open_pages()
        await b.run(stop)

    tasks = [asyncio.create_task(browse(b, start + args.ramp * k / args.learners)) for k, b in enumerate(browsers)]
    watch = asyncio.create_task(own_lag(tally))
    await asyncio.sleep(max(0.0, tally.start - time.perf_counter()))
    # In a thread: a scrape takes a while, and this loop's stalls would count as the learners' waiting.
    measured: dict = {
        "before": await asyncio.to_thread(scrape, base),
        "cpu0": {k: cpu_seconds(v) for k, v in pids.items()},
    }
    measured["bench0"] = time.process_time()
    profilers = start_profilers(args.profile_dir, args.window, pids["web"]) if args.profile else []
    await asyncio.sleep(max(0.0, tally.end - time.perf_counter()))
    measured["after"] = await asyncio.to_thread(scrape, base)
    measured["cpu1"] = {k: cpu_seconds(v) for k, v in pids.items()}
    measured["bench1"] = time.process_time()
    await asyncio.wait(tasks, timeout=90)
    watch.cancel()
    for p in profilers:
        p.wait(timeout=60)
    await asyncio.gather(*(b.close() for b in browsers))
    return measured


def slow_statements(log: Path, window: tuple[float, float]) -> str:
    """PostgreSQL's statements over 250 ms and its checkpoints inside the window (bench/class_load.py logs them),
    by second of the window: a database wait shows here, a web process's own stall does not."""
    start, end = window
    seconds: Counter = Counter()
    checkpoints = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) UTC", line)
        if m is None:
            continue
        at = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.UTC).timestamp()
        if not start <= at < end:
            continue
        if "duration:" in line:
            seconds[int(at - start)] += 1
        elif "checkpoint starting" in line:
            checkpoints.append(int(at - start))
    slow = " ".join(f"{t}s:{n}" for t, n in sorted(seconds.items())) or "none"
    return f"statements over 250 ms in PostgreSQL: {slow}; checkpoints started: {checkpoints or 'none'}"


async def own_lag(tally: Tally) -> None:
    """This script's own stalls: how late a 10 ms sleep wakes, by second of the window. A late wake-up delays
    every tick and answer this process handles, so its time is in the client-side figures, not the server's."""
    while True:
        before = time.perf_counter()
        await asyncio.sleep(0.01)
        late = time.perf_counter() - before - 0.01
        if tally.measuring(before) and late >= 0.05:
            second = int(before - tally.start)
            tally.lag[second] = max(tally.lag[second], late)


def start_profilers(out: Path, window: float, pids: list[int]) -> list[subprocess.Popen]:
    """py-spy on each web process for the window, sampling only the thread holding the GIL: Python's CPU time."""
    out.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    procs = []
    for pid in pids:
        cmd = [spy, "record", "--pid", str(pid), "--duration", str(int(window)), "--rate", "50", "--gil"]
        cmd += ["--format", "raw", "--output", str(out / f"web-{pid}.txt"), "--nonblocking"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def where_time_went(folder: Path, top: int = 25) -> None:
    """From py-spy's collapsed stacks: the share of samples each app function was on the stack for."""
    inclusive: Counter = Counter()
    total = 0
    for f in folder.glob("web-*.txt"):
        for line in f.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if not n.isdigit():
                continue
            count = int(n)
            total += count
            if "select" in stack.rsplit(";", 1)[-1] and "base_events.py" in stack:
                continue
            seen = set()
            for frame in stack.split(";"):
                func, _, where = frame.rpartition(" (")
                path = where.split(":")[0]
                if path.startswith(("app/", "templates/")) or "/app/" in path:
                    name = f"{func} ({path.split('app/', 1)[-1]})"
                    if name not in seen:
                        seen.add(name)
                        inclusive[name] += count
    if not total:
        print("  profile: no samples")
        return
    print(f"  profile ({total} samples over the web processes; app functions by share of samples on the stack):")
    for name, n in inclusive.most_common(top):
        print(f"    {100 * n / total:5.1f} %  {name}")


def one_run(label: str, root: Path, kind: str, args: argparse.Namespace) -> Result:
    tmp = Path(tempfile.mkdtemp(prefix=f"class-load-{kind}-"))
    tally = Tally()
    env = {
        "COURSE_WORKERS": "0",  # lab hosts are elsewhere: queued runs stay queued
        "COURSE_WEB_PROCESSES": str(args.web_processes),
        "COURSE_METRICS_TOKEN": METRICS_TOKEN,
        "COURSE_WEB_CONNECTIONS_PER_ADDRESS": "100000",  # the whole class comes from 127.0.0.1
    }
    started: list[subprocess.Popen] = []
    try:
        with ExitStack() as stack:
            url = stack.enter_context(postgres_cluster(tmp)) if kind == "postgres" else ""
            base = stack.enter_context(course_server(tmp, url, root=root, env=env, started=started))
            pids = {"server": children_of(started[0].pid), "web": web_processes(started[0].pid)}
            pids["db"] = postgres_pids(tmp) if url else []
            print(f"\n{label}: {args.learners} learners, {args.web_processes} web process(es)")
            args.profile_dir = Path(args.profile or ".") / re.sub(r"\W+", "-", label)
            measured = asyncio.run(drive(base, args, tally, pids))
    finally:
        wall = time.time() - time.perf_counter()  # the window on PostgreSQL's clock
        db_waits = (
            slow_statements(tmp / "pg" / "log", (tally.start + wall, tally.end + wall)) if kind == "postgres" else ""
        )
        shutil.rmtree(tmp, ignore_errors=True)
    window = tally.end - tally.start
    took = [t for ts in tally.took.values() for t in ts]
    hist = histogram_delta(measured["before"], measured["after"])
    s50, _ = quantile(hist, 0.50)
    s99, s99_le = quantile(hist, 0.99)
    cpu = {k: (measured["cpu1"][k] - measured["cpu0"][k]) / window for k in measured["cpu0"]}
    kinds = []
    for kind_name in sorted(tally.asked):
        ts = tally.took.get(kind_name, [])
        st = ", ".join(f"{s}: {n}" for (k, s), n in sorted(tally.statuses.items()) if k == kind_name)
        kinds.append(
            f"{kind_name:8s} asked {tally.asked[kind_name] / window:6.1f}/s served {tally.served[kind_name] / window:6.1f}/s"
            f"  p50 {_pct(ts, 0.5) * 1000:6.0f} ms  p99 {_pct(ts, 0.99) * 1000:6.0f} ms  ({st})"
            + (f" dropped {tally.dropped[kind_name]}" if tally.dropped[kind_name] else "")
            + (f" resent {tally.retried[kind_name]}" if tally.retried[kind_name] else "")
        )
    result = Result(
        label=label,
        learners=args.learners,
        window=window,
        asked=sum(tally.asked.values()) / window,
        served=sum(tally.served.values()) / window,
        client_p50=_pct(took, 0.5),
        client_p99=_pct(took, 0.99),
        server_p50=s50,
        server_p99=s99,
        server_p99_le=s99_le,
        errors=sum(tally.errors.values()),
        web_cores=cpu["server"],
        db_cores=cpu.get("db", 0.0),
        bench_cores=(measured["bench1"] - measured["bench0"]) / window,
        kinds=kinds,
    )
    for line in kinds:
        print(f"  {line}")
    for (k, what), n in sorted(tally.errors.items()):
        print(f"  ERROR {n} x {what} on {k}")
    for line in tally.samples[:5]:
        print(f"    e.g. {line}")
    if tally.slow:
        seconds = " ".join(f"{t}s:{n}" for t, n in sorted(tally.slow.items()))
        print(f"  requests over {SLOW_S * 1000:.0f} ms by the second of the window they were sent in: {seconds}")
    if db_waits:
        print(f"  {db_waits}")
    if tally.lag:
        stalls = " ".join(f"{t}s:{ms * 1000:.0f}ms" for t, ms in sorted(tally.lag.items()))
        print(f"  this script's own event-loop stalls over 50 ms: {stalls}")
    if args.profile:
        where_time_went(args.profile_dir)
    return result


def baseline_tree(rev: str, into: Path) -> Path:
    """The tree at `rev` as files (git archive): nothing in this checkout changes."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def table(results: list[Result]) -> None:
    print(
        "\n| run | db | learners | asked req/s | served req/s | served/asked | client p50 / p99 | server p50 / p99 "
        "(/metrics) | errors | cores: web / db / bench | web CPU per request |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        label, db = r.label.split(" on ")
        print(
            f"| {label} | {db} | {r.learners:,} | {r.asked:.0f} | {r.served:.0f} | {100 * r.served / max(r.asked, 1e-9):.0f} % "
            f"| {r.client_p50 * 1000:.0f} ms / {r.client_p99 * 1000:.0f} ms "
            f"| {r.server_p50 * 1000:.0f} ms / {r.server_p99 * 1000:.0f} ms (≤ {r.server_p99_le * 1000:.0f}) "
            f"| {r.errors} | {r.web_cores:.2f} / {r.db_cores:.2f} / {r.bench_cores:.2f} "
            f"| {1000 * r.web_cores / max(r.served, 1e-9):.1f} ms |"
        )
    by_db: dict[str, list[Result]] = collections.defaultdict(list)
    for r in results:
        by_db[r.label.split(" on ")[1]].append(r)
    for db, rs in by_db.items():
        if len(rs) == 2:
            before, after = rs
            print(
                f"  {db}: candidate / baseline: asked x{after.asked / max(before.asked, 1e-9):.2f}, "
                f"client p99 x{after.client_p99 / max(before.client_p99, 1e-9):.2f}, "
                f"server p99 x{after.server_p99 / max(before.server_p99, 1e-9):.2f}, "
                f"web cores x{after.web_cores / max(before.web_cores, 1e-9):.2f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--learners", type=int, default=200)
    ap.add_argument("--window", type=float, default=30.0, help="seconds measured, after the ramp")
    ap.add_argument(
        "--ramp", type=float, default=None, help="seconds the learners take to arrive (default N/40, >= 10)"
    )
    ap.add_argument("--settle", type=float, default=5.0, help="seconds between the ramp and the window")
    ap.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    ap.add_argument("--web-processes", type=int, default=2)
    ap.add_argument("--queued", type=float, default=0.1, help="share of the class with a queued lab run")
    ap.add_argument("--baseline", metavar="REV", help="also run the tree at this git revision, first")
    ap.add_argument("--register-concurrency", type=int, default=8)
    ap.add_argument("--profile", metavar="DIR", help="py-spy the web processes during the window")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.ramp is None:
        args.ramp = max(10.0, args.learners / 40)
    kinds = ("sqlite", "postgres") if args.db == "both" else (args.db,)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="class-browsers-tree-") as trees:
        runs: list[tuple[str, Path]] = []
        if args.baseline:
            runs.append((f"baseline {args.baseline}", baseline_tree(args.baseline, Path(trees) / "baseline")))
        runs.append(("candidate", ROOT))
        for kind in kinds:
            for label, root in runs:
                results.append(one_run(f"{label} on {kind}", root, kind, args))
    table(results)
    last = results[-1]
    print(
        f"\ntarget (served >= 90 % of asked, 0 errors, p99 < 250 ms client and server): "
        f"{'met' if last.ok else 'NOT met'} by {last.label}"
    )
    sys.exit(0 if last.ok else 1)


if __name__ == "__main__":
    main()
