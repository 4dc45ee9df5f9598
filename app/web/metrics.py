"""What one web process measures for Prometheus: request latency by route, and the admission gate's queue and
refusals. The database's view (jobs by state, queue wait and run time, nodes, liveness) is collected at scrape
time by app/services/cluster/metrics.py; `exposition()` puts both together for GET /metrics (app/web/routes/metrics.py).

Several web processes (COURSE_WEB_PROCESSES > 1, uvicorn's process manager) each count their own requests.
prometheus_client's multiprocess mode (prometheus_client 0.26, multiprocess.py) adds them up: `serve` points
PROMETHEUS_MULTIPROC_DIR at an empty folder before uvicorn starts the processes, each process writes its values
to files there, and a scrape, answered by any one process, reads them all. The gauge of waiting requests is the
sum over the live processes (`livesum`). With one process the values stay in memory.
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import multiprocess as prom_multiprocess
from prometheus_client.registry import REGISTRY
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.services.cluster.metrics import DatabaseCollector

# Page loads are tens of milliseconds when all is well; the top buckets catch a queue building behind slow work.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0)

REQUEST_SECONDS = Histogram(
    "course_http_request_duration_seconds",
    "Time from a request's arrival to its last response byte, by route template and method.",
    ["route", "method", "status_class"],
    buckets=LATENCY_BUCKETS,
)
ADMISSION_REFUSED = Counter(
    "course_admission_refused",
    "Requests the admission gate answered 503 (busy), by lane and reason.",
    ["lane", "reason"],
)
ADMISSION_WAITING = Gauge(
    "course_admission_waiting",
    "Requests waiting for a slot in the admission gate, by lane.",
    ["lane"],
    multiprocess_mode="livesum",
)
ADMISSION_ACTIVE = Gauge(
    "course_admission_active",
    "Requests holding a slot in the admission gate, by lane.",
    ["lane"],
    multiprocess_mode="livesum",
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _route_of(scope: Scope) -> str:
    """The matched route's template ("/jobs/{job_id}"), never the raw path: one series per route, not per id.
    Requests no route matched (404s, static files) are one label each."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    return "/static" if scope.get("path", "").startswith("/static/") else "unmatched"


class RequestTimer:
    """ASGI middleware, outermost of the app's own: a request's time includes its wait at the admission gate."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 0

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            REQUEST_SECONDS.labels(
                route=_route_of(scope), method=scope.get("method", ""), status_class=f"{status // 100}xx"
            ).observe(time.perf_counter() - start)


def _forget_dead_processes(path: str) -> None:
    """Drop the live gauges of web processes that have died (uvicorn restarts a crashed one under a new pid), so
    their last values are not summed in forever: prometheus_client leaves this to a server hook uvicorn lacks."""
    for f in glob.glob(os.path.join(path, "gauge_live*_*.db")):
        pid = f.rsplit("_", 1)[-1].removesuffix(".db")
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}") and int(pid) != os.getpid():
            prom_multiprocess.mark_process_dead(int(pid), path)


def multiprocess_dir(data_dir: Path) -> Path:
    """An empty folder for the web processes' metric files (created, or emptied of a previous run's)."""
    path = data_dir / "run" / "metrics"
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def exposition(sessions, executor: str = "embedded") -> bytes:
    """The text a scrape gets: this process's (or, in multiprocess mode, every web process's) request metrics and
    the database's view, collected now (`executor`: whether the dispatcher's and the nodes' figures apply)."""
    if path := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        _forget_dead_processes(path)
        registry = CollectorRegistry()
        prom_multiprocess.MultiProcessCollector(registry)
        text = generate_latest(registry)
    else:
        text = generate_latest(REGISTRY)
    db = CollectorRegistry()
    db.register(DatabaseCollector(sessions, executor))
    return text + generate_latest(db)
