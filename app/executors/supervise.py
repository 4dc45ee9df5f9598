"""What `python -m app serve` runs beside the web processes: the executor's own processes, supervised, and a
lease reaper on a timer of its own.

- Supervised: child processes (embedded lab workers, or the Ray dispatcher) started once, restarted when one
  dies (at RESTART_DELAY_S, not in a tight loop), and dying with the server: each child asked Linux to send it
  SIGTERM when the server goes (PR_SET_PDEATHSIG), even on `kill -9` of the server, so a worker still hands
  its running job back and exits instead of living on as an orphan.
- Reaper: requeues or fails running jobs whose lease ran out, every `lease_s / 2` seconds, whether or not any
  worker is alive to do it (a worker killed with -9 leaves its job to this timer).
"""

from __future__ import annotations

import ctypes
import logging
import signal
import subprocess
import threading

from app.core.config import ROOT, Settings
from app.core.db import make_engine, make_sessionmaker
from app.services.jobs import lifecycle as job_service

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1
RESTART_DELAY_S = 5.0  # a child that keeps dying is restarted at this pace, not in a tight loop


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this process when its parent goes (also called by each uvicorn web process).

    SIGTERM, not SIGKILL: a worker whose server vanished still hands its running job back to the queue."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class Supervised:
    """Child processes started once by the serving parent and restarted if one exits on its own.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, so every child, the first ones and
    the restarted ones, is forked by the one long-lived supervising thread.
    """

    def __init__(self, name: str, commands: list[list[str]], restart_delay_s: float = RESTART_DELAY_S):
        self.name = name
        self.commands = commands
        self.restart_delay_s = restart_delay_s
        self.procs: list[subprocess.Popen | None] = [None] * len(commands)
        self._stopping = threading.Event()
        self._started = threading.Event()
        self._watch = threading.Thread(target=self._watch_loop, name=f"supervise-{name}", daemon=True)

    def _spawn(self, i: int) -> subprocess.Popen:
        proc = subprocess.Popen(self.commands[i], cwd=ROOT, preexec_fn=die_with_parent)
        log.info("%s started (pid %s)", self.name, proc.pid)
        return proc

    def start(self) -> None:
        if self.commands:
            self._watch.start()
            self._started.wait(30)

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p is not None]

    def _watch_loop(self) -> None:
        for i in range(len(self.commands)):
            self.procs[i] = self._spawn(i)
        self._started.set()
        while not self._stopping.wait(1.0):
            for i, proc in enumerate(self.procs):
                code = proc.poll() if proc is not None else 0
                if code is not None and not self._stopping.is_set():
                    log.error("%s pid %s exited with status %s; restarting it", self.name, proc and proc.pid, code)
                    if self._stopping.wait(self.restart_delay_s):
                        break
                    self.procs[i] = self._spawn(i)
        # stop() asked: the children are terminated from here, the thread that started them
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.terminate()  # a worker hands its running job back before it exits
        for proc in self.procs:
            if proc is None:
                continue
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.info("%ss stopped", self.name)

    def stop(self) -> None:
        self._stopping.set()
        if self._watch.is_alive():
            self._watch.join(timeout=40)


class Reaper:
    """Reaps expired leases on its own timer, independent of any worker."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.interval_s = max(1.0, settings.lease_s / 2)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lease-reaper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        engine = make_engine(self.settings.db_url)
        sessions = make_sessionmaker(engine)
        try:
            while not self._stopping.wait(self.interval_s):
                try:
                    with sessions() as db:
                        job_service.reap_expired(db)
                except Exception:  # the database may be restarting; the next tick tries again
                    log.exception("lease reaper: reaping failed; trying again in %.0f s", self.interval_s)
        finally:
            engine.dispose()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)
