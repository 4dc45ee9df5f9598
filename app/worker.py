"""The embedded worker: claims jobs from the database and runs `python -m labs run` for each.

    python -m app worker          # what the server starts alongside itself

One worker runs one job at a time. While a lab runs, its JSON progress lines are read from
stdout and the worker renews the job's lease every `heartbeat_s`. A lab that exceeds the
time limit is killed with its whole process group. If this worker dies, the lab dies with it
(PR_SET_PDEATHSIG) and the job's lease runs out, so another worker requeues or fails it.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from pathlib import Path

from app import logs
from app.config import ROOT, Settings
from app.db import make_engine, make_sessionmaker
from app.services import jobs as job_service
from app.services import labhost

_PR_SET_PDEATHSIG = 1
log = logging.getLogger(__name__)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


class LabRun:
    """One lab subprocess with its stdout progress and a bounded stderr tail."""

    def __init__(self, cmd: list[str], cwd: Path):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, so a timeout kills rank children too
            preexec_fn=_die_with_parent,
        )
        self.progress: job_service.Progress | None = None
        self.stderr_tail: deque[str] = deque(maxlen=40)
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None  # opened with stdout=PIPE
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict) and "fraction" in event:
                self.progress = job_service.Progress(float(event["fraction"]), str(event.get("message", "")))
            elif isinstance(event, dict) and event.get("event") == "start":
                self.progress = job_service.Progress(0.0, f"running on {event.get('backend')}")

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None  # opened with stderr=PIPE
        for line in self.proc.stderr:
            self.stderr_tail.append(line.rstrip())

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def join_readers(self) -> None:
        for t in self._threads:
            t.join(timeout=5)

    def reason(self) -> str:
        lines = [ln for ln in self.stderr_tail if ln.strip()]
        return lines[-1] if lines else f"the lab exited with status {self.proc.returncode}"


class Worker:
    def __init__(self, settings: Settings, worker_id: str | None = None, queues: tuple[str, ...] = ("cpu", "gpu")):
        self.settings = settings
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.queues = queues
        self.engine = make_engine(settings.db_url)
        self.sessions = make_sessionmaker(self.engine)
        self.stopping = False
        self.current: LabRun | None = None

    def stop(self, *_args) -> None:
        self.stopping = True

    def run_forever(self, poll_s: float = 0.5) -> None:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        log.info("worker %s started (queues: %s)", self.worker_id, ", ".join(self.queues))
        while not self.stopping:
            try:
                ran = self.run_once()
            except Exception:  # a database hiccup must not end the worker; the lease protects the job
                log.exception("worker %s: claiming or running a job failed; retrying", self.worker_id)
                ran = False
            if not ran:
                time.sleep(poll_s)
        log.info("worker %s stopped", self.worker_id)

    def run_once(self) -> bool:
        """Reap stale leases, then claim and run one job. Returns whether a job ran."""
        with self.sessions() as db:
            job_service.reap_expired(db)
            job = job_service.claim_next(
                db, worker_id=self.worker_id, lease_s=self.settings.lease_s, queues=self.queues
            )
        if job is None:
            return False
        log.info(
            "job %s claimed by %s: lab %s, backend %s, attempt %s of %s",
            job.id,
            self.worker_id,
            job.lab,
            job.backend,
            job.attempts,
            job.max_attempts,
        )
        self.execute(job)
        return True

    def execute(self, job) -> None:
        s = self.settings
        rel = Path("jobs") / str(job.id) / f"attempt-{job.attempts}"
        out = s.data_dir / rel
        out.mkdir(parents=True, exist_ok=True)
        cmd = [
            s.python,
            "-m",
            "labs",
            "run",
            job.lab,
            "--params",
            json.dumps(job.params),
            "--out",
            str(out),
            "--backend",
            job.backend,
        ]
        try:
            run = self.current = LabRun(cmd, cwd=ROOT)
        except OSError as exc:
            log.exception("job %s: the lab process could not start", job.id)
            with self.sessions() as db:
                job_service.finish(
                    db,
                    job_id=job.id,
                    worker_id=self.worker_id,
                    ok=False,
                    error=f"The worker could not start the lab: {exc}",
                    message="failed",
                )
            return
        deadline = time.monotonic() + s.job_time_limit_s
        outcome: tuple[bool, str | None, str] | None = None
        while run.proc.poll() is None:
            time.sleep(min(s.heartbeat_s, 0.5))
            if self.stopping:
                run.kill()
                with self.sessions() as db:
                    job_service.release(
                        db, job_id=job.id, worker_id=self.worker_id, reason="requeued: worker shut down"
                    )
                log.info("job %s handed back to the queue: worker %s is shutting down", job.id, self.worker_id)
                return
            if time.monotonic() > deadline:
                run.kill()
                outcome = (
                    False,
                    f"The lab ran past its time limit of {s.job_time_limit_s} s and was stopped.",
                    "timed out",
                )
                break
            with self.sessions() as db:
                if not job_service.heartbeat(
                    db, job_id=job.id, worker_id=self.worker_id, lease_s=s.lease_s, progress=run.progress
                ):
                    run.kill()  # someone else owns the job now; our result would be discarded
                    log.warning("job %s: lease lost by %s; its run was stopped", job.id, self.worker_id)
                    return
        run.join_readers()
        if outcome is None:
            outcome = self._outcome(run, out)
        ok, error, message = outcome
        result = None
        if ok:
            result = json.loads((out / "result.json").read_text())
            log.info("job %s finished: %s", job.id, message)
        else:
            log.warning("job %s failed (%s): %s", job.id, message, error)
        with self.sessions() as db:
            job_service.finish(
                db,
                job_id=job.id,
                worker_id=self.worker_id,
                ok=ok,
                result=result,
                error=error,
                bundle_dir=str(rel),
                message=message,
            )
        self.current = None

    @staticmethod
    def _outcome(run: LabRun, out: Path) -> tuple[bool, str | None, str]:
        code = run.proc.returncode
        if code == 0 and (out / "result.json").is_file():
            return True, None, "finished"
        if code == 2:
            return False, f"Bad parameters: {run.reason()}", "refused"
        if code is not None and code < 0:
            return False, f"The lab process was killed by signal {-code}.", "failed"
        return False, f"The lab failed: {run.reason()}", "failed"


def main(settings: Settings | None = None, *, check_labs: bool = True) -> int:
    """`python -m app worker`: refuse to start (exit 1, naming the lab and why) if a lab runner does not import."""
    settings = settings or Settings.from_env()
    logs.configure(settings.log_level)
    if check_labs:
        try:
            labhost.check_labs(settings.python)
        except labhost.LabHostError as exc:
            log.error("the worker cannot start, because the labs cannot run here:\n%s", exc)
            return 1
    Worker(settings).run_forever()
    return 0
