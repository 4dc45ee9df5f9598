"""`python -m app serve`: check the labs, probe this host, prepare the database, start the lab workers
once, and serve HTTP from one or several web processes.

    COURSE_WEB_PROCESSES=4 COURSE_WORKERS=2 python -m app serve --host 0.0.0.0 --port 8000

The process tree:

    python -m app serve            this module: the supervisor
    ├── python -m app worker       COURSE_WORKERS embedded lab workers, started here once (restarted if one dies),
    │                              or, with COURSE_EXECUTOR=ray, one `python -m app dispatcher` (app/executors/)
    ├── (thread) lease reaper      requeues jobs whose worker stopped renewing, whether or not any worker lives
    └── web process(es)            uvicorn; with COURSE_WEB_PROCESSES > 1, uvicorn's own process manager
                                   spawns them and each calls app.web.factory:web_process

Nothing here imports torch: the lab check and the host probe run `python -m labs check|probe` in
subprocesses, and the probe's answer reaches the web processes through the environment.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from app import executors
from app.cli import connections
from app.core import logs
from app.core.config import Settings, SettingsError
from app.executors.supervise import Reaper, Supervised
from app.services import startup
from app.services.jobs import labhost
from app.web.metrics import multiprocess_dir

log = logging.getLogger(__name__)


def check_and_probe(settings: Settings) -> labhost.HostCapacity:
    """Both subprocesses at once (each imports torch: a few seconds); LabHostError if either fails.

    In Ray mode only the check: labs run on the cluster's lab nodes, each probed by its own `ray-node-flags` and
    enforcing its own memory budget, so this host's probe would describe a lab host that runs no lab (the submit
    check reads the nodes' budgets, app/services/cluster/nodes.py)."""
    if settings.executor == "ray":
        labhost.check_labs(settings.python)
        log.info(
            "web host: runs no lab (executor ray); jobs run on the Ray cluster's lab nodes, each within its own "
            "per-job memory budget, checked at submit against the largest one online (/instructor/cluster lists them)"
        )
        return labhost.HostCapacity.local_default()
    with ThreadPoolExecutor(2) as pool:
        checked = pool.submit(labhost.check_labs, settings.python)
        probed = pool.submit(labhost.probe, settings.python)
        checked.result()
        return probed.result()


def check_public_url(settings: Settings) -> None:
    """A production server builds every link that leaves the site (reset links, mails, the LTI URLs) from
    COURSE_PUBLIC_URL, never from a request's Host header, which the client chooses: it refuses to start without it.
    (A dispatcher or a Ray node builds no link and does not need it.)"""
    if settings.environment == "production" and not settings.public_url:
        raise SettingsError(
            "COURSE_PUBLIC_URL: must be set in production (the address learners use, e.g. "
            "https://course.example.org): reset links, mails and the LTI URLs are built from it"
        )


def check_port(host: str, port: int) -> None:
    """Bind host:port the way uvicorn will (SO_REUSEADDR, so a socket in TIME_WAIT from a restart does not count)
    and let go. Without it, a port in use was found only after migrating, starting the lab workers and logging
    "ready"; SettingsError names --port (or --host, for an address this machine does not have)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # uvicorn's own choice (uvicorn.config.bind_socket)
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise SettingsError(
                f"--port: {host}:{port} is already in use (another server, or this one still running?); "
                "stop that process or choose another --port"
            ) from None
        raise SettingsError(f"--host/--port: cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def warn_sqlite_processes(settings: Settings) -> None:
    """docs/deploying.md, PostgreSQL: for more than one web process. Several processes on one SQLite file do work (the tests
    run two), but every write of every process queues behind one file lock: a warning, not a refusal."""
    if settings.environment == "production" and settings.web_processes > 1 and settings.db_url.startswith("sqlite"):
        log.warning(
            "COURSE_WEB_PROCESSES=%d on SQLite (%s): several web processes share one write lock; "
            "set DATABASE_URL=postgresql+psycopg://... for a deployment with more than one web process",
            settings.web_processes,
            settings.db_url.removeprefix("sqlite:///"),
        )


def started_url(host: str, port: int) -> str:
    """The address a server bound to host:port is reached at, for links that leave the site when COURSE_PUBLIC_URL
    is unset: the host itself, or this machine's name for a wildcard bind (0.0.0.0, ::)."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.getfqdn()
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(settings: Settings, *, host: str, port: int) -> int:
    import uvicorn

    logs.configure(settings.log_level, access_log=settings.access_log, fmt=settings.log_format)
    if os.environ.get("FORWARDED_ALLOW_IPS") and not settings.forwarded_allow_ips:
        log.warning(
            "FORWARDED_ALLOW_IPS is set but not read: forwarded headers are believed only from the proxies in "
            "COURSE_FORWARDED_ALLOW_IPS, which is unset, so from none"
        )
    if not settings.public_url:  # production refuses to start without it (check_public_url)
        settings = replace(settings, public_url=started_url(host, port))
        os.environ["COURSE_PUBLIC_URL"] = settings.public_url  # for the web processes uvicorn spawns
        log.info(
            "COURSE_PUBLIC_URL is unset: links that leave the site use %s, where this server listens",
            settings.public_url,
        )
    warn_sqlite_processes(settings)
    started = time.monotonic()
    try:
        capacity = check_and_probe(settings)
    except labhost.LabHostError as exc:
        log.error("the course cannot start, because the labs cannot run here:\n%s", exc)
        return 1
    startup.prepare(settings)
    # the lab workers and every web process read the probe from here instead of probing again
    os.environ[labhost.CAPACITY_ENV] = capacity.to_json()
    name, commands = executors.processes(settings)
    workers = Supervised(name, commands)
    workers.start()
    reaper = Reaper(settings)
    reaper.start()
    log.info(
        "course at http://%s:%s (data: %s; database: %s; %d web process(es), %d %s(s), executor %s; ready in %.1f s)",
        host,
        port,
        settings.data_dir,
        settings.db_url.split("@")[-1],  # never log a password
        settings.web_processes,
        len(commands),
        name,
        settings.executor,
        time.monotonic() - started,
    )
    try:
        if settings.web_processes == 1:
            from app.web.factory import create_app

            app: Any = create_app(settings, host=capacity, prepare=False, settle=True)
        else:
            # each web process counts its own requests; a scrape adds them up from the files there
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(multiprocess_dir(settings.data_dir))
            app = "app.web.factory:web_process"  # uvicorn's process manager imports it in each web process
        uvicorn.run(
            app,
            host=host,
            port=port,
            factory=settings.web_processes > 1,
            workers=settings.web_processes if settings.web_processes > 1 else None,
            log_config=None,  # app/core/logs.py configured logging; uvicorn's loggers propagate to it
            access_log=settings.access_log,
            server_header=False,
            # A cap on open connections (idle keep-alive ones count), not the overload policy: that is the
            # admission gate's (app/web/middleware/admission.py), which queues and answers 503 with Retry-After.
            limit_concurrency=settings.web_max_connections,
            # uvicorn's h11 protocol with a header deadline and a per-address cap (app/cli/connections.py)
            http=connections.protocol(settings),
            # X-Forwarded-For and -Proto only from the proxies the operator names (none by default): uvicorn
            # otherwise believes 127.0.0.1 (or $FORWARDED_ALLOW_IPS), so behind a pass-through proxy on this host any
            # client would choose the address the registration and login throttles count.
            proxy_headers=bool(settings.forwarded_allow_ips),
            forwarded_allow_ips=settings.forwarded_allow_ips or None,
        )
    finally:
        reaper.stop()
        workers.stop()
    return 0
