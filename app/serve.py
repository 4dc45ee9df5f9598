"""`python -m app serve`: check the labs, probe this host, prepare the database, start the lab workers
once, and serve HTTP from one or several web processes.

    COURSE_WEB_PROCESSES=4 COURSE_WORKERS=2 python -m app serve --host 0.0.0.0 --port 8000

The process tree:

    python -m app serve            this module: the supervisor
    ├── python -m app worker       COURSE_WORKERS embedded lab workers, started here once (restarted if one dies)
    └── web process(es)            uvicorn; with COURSE_WEB_PROCESSES > 1, uvicorn's own process manager
                                   spawns them and each calls app.main:web_process

Nothing here imports torch: the lab check and the host probe run `python -m labs check|probe` in
subprocesses, and the probe's answer reaches the web processes through the environment.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from app import logs, startup
from app.config import ROOT, Settings
from app.services import labhost

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1
RESTART_DELAY_S = 5.0  # a worker that keeps dying is restarted at this pace, not in a tight loop


def _term_with_parent() -> None:  # runs in the worker between fork and exec
    # SIGTERM, not SIGKILL: a worker whose server vanished still hands its running job back to the queue.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class LabWorkers:
    """The embedded lab workers: started once by the serving parent, restarted if one exits on its own."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.procs: list[subprocess.Popen] = []
        self._stopping = threading.Event()
        self._watch = threading.Thread(target=self._watch_loop, name="lab-workers", daemon=True)

    def _spawn(self) -> subprocess.Popen:
        # The parent has already run the lab check; each worker need not import every runner again.
        cmd = [sys.executable, "-m", "app", "worker", "--skip-lab-check"]
        proc = subprocess.Popen(cmd, cwd=ROOT, preexec_fn=_term_with_parent)
        log.info("lab worker started (pid %s)", proc.pid)
        return proc

    def start(self) -> None:
        self.procs = [self._spawn() for _ in range(self.settings.embedded_workers)]
        if self.procs:
            self._watch.start()

    def _watch_loop(self) -> None:
        while not self._stopping.wait(1.0):
            for i, proc in enumerate(self.procs):
                code = proc.poll()
                if code is not None and not self._stopping.is_set():
                    log.error("lab worker pid %s exited with status %s; restarting it", proc.pid, code)
                    if self._stopping.wait(RESTART_DELAY_S):
                        return
                    self.procs[i] = self._spawn()

    def stop(self) -> None:
        self._stopping.set()
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()  # the worker hands its running job back before it exits
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.info("lab workers stopped")


def check_and_probe(settings: Settings) -> labhost.HostCapacity:
    """Both subprocesses at once (each imports torch: a few seconds); LabHostError if either fails."""
    with ThreadPoolExecutor(2) as pool:
        checked = pool.submit(labhost.check_labs, settings.python)
        probed = pool.submit(labhost.probe, settings.python)
        checked.result()
        return probed.result()


def serve(settings: Settings, *, host: str, port: int) -> int:
    import uvicorn

    logs.configure(settings.log_level)
    started = time.monotonic()
    try:
        capacity = check_and_probe(settings)
    except labhost.LabHostError as exc:
        log.error("the course cannot start, because the labs cannot run here:\n%s", exc)
        return 1
    startup.prepare(settings)
    workers = LabWorkers(settings)
    workers.start()
    log.info(
        "course at http://%s:%s (data: %s; database: %s; %d web process(es), %d lab worker(s); ready in %.1f s)",
        host,
        port,
        settings.data_dir,
        settings.db_url.split("@")[-1],  # never log a password
        settings.web_processes,
        settings.embedded_workers,
        time.monotonic() - started,
    )
    try:
        if settings.web_processes == 1:
            from app.main import create_app

            app: Any = create_app(settings, host=capacity, prepare=False)
        else:
            os.environ[labhost.CAPACITY_ENV] = capacity.to_json()
            app = "app.main:web_process"  # uvicorn's process manager imports it in each web process
        uvicorn.run(
            app,
            host=host,
            port=port,
            factory=settings.web_processes > 1,
            workers=settings.web_processes if settings.web_processes > 1 else None,
            log_config=None,  # app/logs.py configured logging; uvicorn's loggers propagate to it
            access_log=settings.access_log,
            server_header=False,
            # A cap on open connections (idle keep-alive ones count), not the overload policy: that is the
            # admission gate's (app/admission.py), which queues and answers 503 with Retry-After.
            limit_concurrency=settings.web_max_connections,
        )
    finally:
        workers.stop()
    return 0
