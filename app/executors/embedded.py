"""The embedded executor: lab workers on the web host, claiming jobs from the database in fair order.

    python -m app worker          # what `python -m app serve` starts (and restarts) alongside itself

One worker runs one job at a time. While a lab runs, its JSON progress lines are read from stdout and the
worker renews the job's lease every `heartbeat_s`; a heartbeat also tells it when the job was cancelled.
The lab runs in its own process group at lower CPU priority (nice 10) than the web server, within the
per-job memory budget (app/executors/labproc.py), and is killed with its group at the time limit. If this
worker dies, the lab dies with it (PR_SET_PDEATHSIG) and the job's lease runs out: the reaper (a timer in
the serving process, app/executors/supervise.py, and every worker's loop) requeues or fails it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import time
from pathlib import Path

from app.core import logs
from app.core.config import ROOT, Settings
from app.core.db import make_engine, make_sessionmaker
from app.executors.labproc import LAB_NICE, JobCgroup, LabRun, Outcome, lab_command, timed_out
from app.services import jobs as job_service
from app.services import labhost

log = logging.getLogger(__name__)


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
        """Reap stale leases, then claim (in fair order) and run one job. Returns whether a job ran."""
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

    def _finish(self, job, outcome: Outcome, rel: Path, out: Path, status: str | None = None) -> None:
        result = json.loads((out / "result.json").read_text()) if outcome.ok else None
        if outcome.ok:
            log.info("job %s finished: %s", job.id, outcome.message)
        else:
            log.warning("job %s ended (%s): %s", job.id, outcome.message, outcome.error)
        with self.sessions() as db:
            job_service.finish(
                db,
                job_id=job.id,
                worker_id=self.worker_id,
                ok=outcome.ok,
                result=result,
                error=outcome.error,
                bundle_dir=str(rel) if outcome.ok else None,
                message=outcome.message,
                status=status,
            )

    def execute(self, job) -> None:
        s = self.settings
        rel = Path("jobs") / str(job.id) / f"attempt-{job.attempts}"
        out = s.data_dir / rel
        out.mkdir(parents=True, exist_ok=True)
        cmd = lab_command(s.python, lab=job.lab, params=job.params, out=out, backend=job.backend)
        cgroup = JobCgroup(f"course-job-{job.id}-{job.attempts}", s.job_memory_bytes, cpu_weight=20)
        try:
            run = self.current = LabRun(cmd, cwd=ROOT, memory_bytes=s.job_memory_bytes, nice=LAB_NICE, cgroup=cgroup)
        except OSError as exc:
            log.exception("job %s: the lab process could not start", job.id)
            cgroup.remove()
            with self.sessions() as db:
                job_service.lost(
                    db, job_id=job.id, worker_id=self.worker_id, reason=f"the worker could not start the lab: {exc}"
                )
            return
        placement = {"pid": run.proc.pid, "nice": LAB_NICE, "cgroup": str(cgroup.path) if cgroup.path else None}
        with self.sessions() as db:
            job_service.record_placement(
                db, job_id=job.id, worker_id=self.worker_id, node=socket.gethostname(), placement=placement
            )
        deadline = time.monotonic() + s.job_time_limit_s
        outcome: Outcome | None = None
        status = None
        while run.proc.poll() is None:
            time.sleep(min(s.heartbeat_s, 0.5))
            if self.stopping:
                run.kill()
                run.join_readers()
                with self.sessions() as db:
                    job_service.release(
                        db, job_id=job.id, worker_id=self.worker_id, reason="requeued: worker shut down"
                    )
                log.info("job %s handed back to the queue: worker %s is shutting down", job.id, self.worker_id)
                return
            if time.monotonic() > deadline:
                run.kill()
                outcome = timed_out(s.job_time_limit_s)
                break
            with self.sessions() as db:
                lease = job_service.heartbeat(
                    db, job_id=job.id, worker_id=self.worker_id, lease_s=s.lease_s, progress=run.progress
                )
            if not lease:
                run.kill()  # someone else owns the job now; our result would be discarded
                run.join_readers()
                log.warning("job %s: lease lost by %s; its run was stopped", job.id, self.worker_id)
                return
            if lease.cancel:
                run.kill()
                outcome, status = Outcome(False, None, "cancelled"), "cancelled"
                break
        run.join_readers()
        outcome = outcome or run.outcome(out)
        if outcome.lost:
            with self.sessions() as db:
                job_service.lost(db, job_id=job.id, worker_id=self.worker_id, reason=outcome.error or "")
        else:
            self._finish(job, outcome, rel, out, status)
        self.current = None


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
