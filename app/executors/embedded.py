"""The embedded executor: lab workers on the web host, claiming jobs from the database in fair order.

    python -m app worker          # what `python -m app serve` starts (and restarts) alongside itself

One worker runs one job at a time. While a lab runs, its JSON progress lines are read from stdout and the
worker renews the job's lease every `heartbeat_s`; a heartbeat also tells it when the job was cancelled.
The lab runs in its own process group at lower CPU priority (nice 10) than the web server, within the
per-job memory budget (app/executors/labproc.py), and is killed with its group at the time limit. If this
worker dies, the lab dies with it (PR_SET_PDEATHSIG) and the job's lease runs out: the reaper (a timer in
the serving process, app/executors/supervise.py, and every worker's loop) requeues or fails it.

Placement on this host: a cpu job sees no GPU, and every job's CPU threads are set from its CPU slots
(labproc.lab_env, lab_threads): its catalog slots, or its worker's share of the cores (cores / COURSE_WORKERS) where
that is more. On a GPU host each GPU job holds the GPUs the catalog declares for it, its own (app/executors/gpus.py):
a worker takes a GPU job only when that many are free, and a GPU job that waits holds back later GPU jobs (no
backfilling past it, as the Ray dispatcher does), while CPU jobs still go.
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
from app.core.models import Job
from app.executors.gpus import Claim, GpuAllocator
from app.executors.labproc import LAB_NICE, JobCgroup, LabRun, Outcome, lab_command, lab_env, lab_threads, timed_out
from app.executors.ray_resources import need_for
from app.services.jobs import labhost
from app.services.jobs import lifecycle as job_service
from app.services.jobs import queue as queue_service
from labs import catalog

log = logging.getLogger(__name__)


class Worker:
    def __init__(
        self,
        settings: Settings,
        worker_id: str | None = None,
        queues: tuple[str, ...] = ("cpu", "gpu"),
        gpus: GpuAllocator | None = None,
    ):
        self.settings = settings
        self.gpus = gpus  # None: no GPUs to share out (a CPU host), and a GPU job's lab sees what the host shows
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
            claimed = self.claim(db)
        if claimed is None:
            return False
        job, held = claimed
        log.info(
            "job %s claimed by %s: lab %s, backend %s, attempt %s of %s",
            job.id,
            self.worker_id,
            job.lab,
            job.backend,
            job.attempts,
            job.max_attempts,
        )
        try:
            self.execute(job, held)
        finally:
            if held is not None:
                held.release()
        return True

    def claim(self, db) -> tuple[Job, Claim | None] | None:
        """The next job in fair order this worker can start now, claimed, with the GPUs it holds (None on cpu)."""
        if self.gpus is None:
            job = job_service.claim_next(
                db, worker_id=self.worker_id, lease_s=self.settings.lease_s, queues=self.queues
            )
            return (job, None) if job is not None else None
        free = self.gpus.free()
        gpu_blocked = False
        for job_id in queue_service.fair_order(db, limit=50, queues=self.queues):
            queued = db.get(Job, job_id)
            if queued is None or queued.status != "queued":
                continue
            need = self._gpus_needed(queued)
            fits = need <= self.gpus.count  # a job no host GPU count fits is left to the lab to refuse, in words
            if need and fits and (gpu_blocked or need > free):
                gpu_blocked = True
                continue
            job = job_service.claim(db, job_id=job_id, worker_id=self.worker_id, lease_s=self.settings.lease_s)
            if job is None:
                continue  # another worker got it
            if not need or not fits:
                return job, None
            held = self.gpus.claim(need)
            if held is None:  # another worker took GPUs since free() looked: the job waits, uncharged
                job_service.release(
                    db, job_id=job.id, worker_id=self.worker_id, reason=f"queued: waiting for {need} free GPU(s)"
                )
                gpu_blocked = True
                continue
            return job, held
        return None

    @staticmethod
    def _gpus_needed(job: Job) -> int:
        if job.backend not in catalog.GPU_BACKENDS:
            return 0
        try:
            return need_for(job.lab, job.params, job.backend).gpus
        except Exception:  # parameters the catalog no longer accepts: the lab refuses them, in words
            return job.gpus or 0

    def _threads(self, job: Job) -> int:
        """Each lab process's CPU threads: the job's CPU slots, at least its worker's share of this host's cores."""
        share = (os.cpu_count() or 1) // max(1, self.settings.embedded_workers)
        try:
            spec = catalog.get(job.lab)
            res = spec.resources(spec.params.model_validate(job.params), job.backend)
        except Exception:
            return lab_threads(backend=job.backend, ranks=1, cpu_slots=share)
        return lab_threads(backend=job.backend, ranks=res.ranks, cpu_slots=max(res.cpus, share))

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

    def execute(self, job, held: Claim | None = None) -> None:
        s = self.settings
        rel = Path("jobs") / str(job.id) / f"attempt-{job.attempts}"
        out = s.data_dir / rel
        out.mkdir(parents=True, exist_ok=True)
        cmd = lab_command(s.python, lab=job.lab, params=job.params, out=out, backend=job.backend)
        cgroup = JobCgroup(f"course-job-{job.id}-{job.attempts}", s.job_memory_bytes, cpu_weight=20)
        threads = self._threads(job)
        env = lab_env(os.environ, backend=job.backend, threads=threads, gpus=held.devices if held else None)
        try:
            run = self.current = LabRun(
                cmd, cwd=ROOT, memory_bytes=s.job_memory_bytes, nice=LAB_NICE, cgroup=cgroup, env=env
            )
        except OSError as exc:
            log.exception("job %s: the lab process could not start", job.id)
            cgroup.remove()
            with self.sessions() as db:
                job_service.lost(
                    db, job_id=job.id, worker_id=self.worker_id, reason=f"the worker could not start the lab: {exc}"
                )
            return
        placement = {
            "pid": run.proc.pid,
            "nice": LAB_NICE,
            "cgroup": str(cgroup.path) if cgroup.path else None,
            "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),  # as the Ray task records its grant
            "threads": threads,
        }
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
    logs.configure(settings.log_level, fmt=settings.log_format)
    if check_labs:
        try:
            labhost.check_labs(settings.python)
        except labhost.LabHostError as exc:
            log.error("the worker cannot start, because the labs cannot run here:\n%s", exc)
            return 1
    Worker(settings, gpus=host_gpus(settings)).run_forever()
    return 0


def host_gpus(settings: Settings) -> GpuAllocator | None:
    """The allocator over this host's GPUs when COURSE_WORKERS > 1, or None on a host without any. The count is the labs' own probe's: the
    serving parent's (labhost.CAPACITY_ENV) where it handed one down, else this worker asks `python -m labs probe`,
    which imports torch in a subprocess (this process never does)."""
    if settings.embedded_workers <= 1:
        return None  # one job at a time: nothing to share out, and no probe to pay for at each start
    host = labhost.from_environment()
    if host is None:
        try:
            host = labhost.probe(settings.python)
        except labhost.LabHostError as exc:
            log.warning("worker: no GPU count for this host (%s); GPU jobs see every GPU the host shows", exc)
            return None
    if host.capacity.gpus <= 0:
        return None
    return GpuAllocator(host.capacity.gpus, visible=os.environ.get("CUDA_VISIBLE_DEVICES"))
