"""The Ray executor's dispatcher: it turns queued jobs into Ray tasks. Beside it: the task itself, and what a node
says about itself (app/executors/ray_node.py); what a job needs and which nodes may take work
(app/executors/ray_resources.py); reaching the head and the health check's files (app/executors/ray_health.py);
following each task's stream to the end of its attempt (app/executors/ray_follow.py).

    python -m app dispatcher          # serve starts one with COURSE_EXECUTOR=ray; more on other hosts stand by
    python -m app dispatcher-health   # 0 if this host's dispatchers completed a cycle lately (compose health check)

One dispatcher is active at a time, elected through the database (app/services/cluster/dispatch_lease.py, docs/dispatcher.md):
each cycle it renews a lease row with a compare-and-set UPDATE; another dispatcher stands by, says so in its log
(naming the active one), and takes over within COURSE_DISPATCHER_LEASE_SECONDS of the active one's last renewal,
giving back the jobs the old one had running as lost attempts (requeued, not charged). A job starts again only
once its earlier attempt cannot still be running, even when the old dispatcher is frozen rather than dead
(app/executors/ray_fence.py).

Checked against Ray 2.60.0 (the version `pip install "ray[default]"` gives here, pinned in pyproject's `ray`
extra), reading its source and docs:
- resources: `num_cpus`/`num_gpus`/`memory`/custom `resources=` per task; Ray sets CUDA_VISIBLE_DEVICES in the
  worker to the GPUs it granted (docs: ray-core/scheduling/resources, ray-core/tasks/using-ray-with-gpus;
  `ray.get_gpu_ids()`), and a task lands only on a node whose *free* resources cover it.
- node labels: `ray start --labels "k=v,..."` (python/ray/scripts/scripts.py, validated by
  python/ray/_private/label_utils.py: Kubernetes label syntax); they are shown here, while scheduling uses the
  numeric custom resource `course_te_gpu` (docs ray-core/scheduling/index: custom resources for numeric needs).
- streaming generators: `num_returns="streaming"`, consumed with `next()` on the ObjectRefGenerator
  (python/ray/_private/object_ref_generator.py); a system failure arrives as an exception from `ray.get` on the
  last ref.
- cancel: `ray.cancel(gen, force=False)` raises KeyboardInterrupt in the task (its `finally` kills the lab's
  process group); `force=True` kills the worker process (python/ray/_private/worker.py `cancel`).
- fault tolerance (docs ray-core/fault_tolerance/tasks): Ray's own `max_retries` is 0 here on purpose: every
  attempt must be visible in the jobs table, counted against the job's max_attempts, and go back through the
  fair queue; the dispatcher requeues an attempt lost to the node or worker (WorkerCrashedError,
  NodeDiedError, ...) itself. A driver that dies takes the tasks it owns with it, so a dead dispatcher's jobs are
  requeued by their lease (the reaper in the web server, or the next dispatcher). A stream's NodeDiedError can
  come before the GCS marks the node dead in `ray.nodes()` (its health checks: `health_check_period_ms` ×
  `health_check_failure_threshold` in src/ray/common/ray_config_def.h), so the dispatcher takes the stream's word.

How a job goes (the jobs table stays the source of truth):
1. The dispatcher lists the nodes (`ray.nodes()`), writes their resources and labels to `cluster_nodes` for the
   web tier, and keeps its own account of what its running tasks hold on each node.
2. It walks the queue in fair order (app/services/jobs/queue.py). `auto` is resolved to the best backend a node
   online offers; the catalog gives ranks, GPUs, CPUs and memory. A job is claimed (conditional UPDATE, with a
   lease) only if it fits a node's free resources now, so the backlog and positions stay in the database and
   Ray only ever holds jobs that can start. A GPU job that waits for room holds back later GPU jobs (no
   backfilling past it, so large jobs are not starved by small ones); CPU jobs still go.
3. The task (ray_node.run_lab_on_node) runs on the node: it yields where it landed (node, CUDA_VISIBLE_DEVICES, GPU ids), then the lab's
   progress lines, then the outcome with the output folder zipped (at most the bundle-upload size); it runs
   `python -m labs run` through app/executors/labproc.py (process group, memory budget, time limit) and never
   opens a database connection.
4. A thread per task follows the stream: placement and progress go to the jobs table (renewing the lease), the
   zip is unpacked with the bundle service's safe unzip into the data dir, and the job finishes exactly as an
   embedded run does. A timer renews every lease this dispatcher holds, cancels what was cancelled or ran past
   its time limit, and fails jobs no online node could ever run after COURSE_UNPLACEABLE_SECONDS.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update

from app.core import logs
from app.core.config import Settings
from app.core.db import make_engine, make_sessionmaker
from app.core.models import ClusterNode, Job, utcnow
from app.executors import ray_fence as fence
from app.executors.ray_follow import DEADLINE_SLACK_S, InFlight, TaskFollower
from app.executors.ray_health import Health, connect, dispatcher_health_main, wait_for_head
from app.executors.ray_node import remote_task
from app.executors.ray_resources import Need, alive_nodes, need_for
from app.services.cluster import dispatch_lease
from app.services.cluster import fit as cluster_fit
from app.services.cluster import nodes as cluster_service
from app.services.cluster.nodes import TE_RESOURCE, Node, node_memory_budget
from app.services.jobs import lifecycle as job_service
from app.services.jobs import queue as queue_service
from labs.api import count

__all__ = ["Dispatcher", "dispatcher_health_main", "main"]  # app/cli/commands.py: `dispatcher`, `dispatcher-health`

log = logging.getLogger(__name__)

TICK_S = 0.5  # the dispatcher's loop: claim, renew, cancel
SNAPSHOT_S = 2.0  # how often the node list is written for the web tier
FORCE_CANCEL_AFTER_S = 10.0  # a task that ignores a polite cancel is killed with its worker


class Dispatcher(TaskFollower):
    def __init__(self, settings: Settings, dispatcher_id: str | None = None):
        self.settings = settings
        self.id = dispatcher_id or dispatch_lease.new_id()
        self.engine = make_engine(settings.db_url)
        self.sessions = make_sessionmaker(self.engine)
        self.inflight: dict[int, InFlight] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.nodes: dict[str, dict] = {}  # node id -> totals, from ray.nodes()
        self.dead: dict[str, float] = {}  # node id -> when a task's stream said it died (see DEAD_NODE_S)
        self._snapshot_at = 0.0
        self.health = Health()
        self.active = False  # holds the dispatcher lease (dispatch_lease.try_acquire, each tick)
        self.renewed_at = 0.0  # monotonic time of its last renewal: past the lease, it is active no more
        self.since: datetime | None = None  # when its tenure as the active one began (the lease's acquired_at)
        self.beat = 0  # its lease renewals, published for its tasks (ray_fence)
        self.fence = fence.Fence()
        self.standing_by_for: str | None = None  # the holder last named in the standby's log
        self._recorded: tuple[str, float] = ("", 0.0)  # role and when, in dispatchers_seen

    # -- cluster

    @property
    def ray_address(self) -> str:
        return self.settings.ray_address or os.environ.get("RAY_ADDRESS") or "auto"

    def refresh_nodes(self) -> list[Node]:
        import ray

        listed = ray.nodes()
        with self.lock:
            nodes, self.dead = alive_nodes(listed, self.dead, time.monotonic())
        self.nodes = nodes
        if time.monotonic() - self._snapshot_at >= SNAPSHOT_S:
            self._write_snapshot()
        return [
            cluster_service.node_from_row(
                ClusterNode(node_id=k, hostname=v["hostname"], resources=v["resources"], labels=v["labels"])
            )
            for k, v in nodes.items()
        ]

    def _write_snapshot(self) -> None:
        now = utcnow()
        with self.sessions() as db:
            known = {r.node_id: r for r in db.query(ClusterNode)}
            for node_id, info in self.nodes.items():
                row = known.pop(node_id, None) or ClusterNode(node_id=node_id)
                row.hostname, row.resources, row.labels = info["hostname"], info["resources"], info["labels"]
                row.alive, row.seen_at = True, now
                db.add(row)
            for row in known.values():
                if row.alive:
                    row.alive = False
                if row.seen_at < now - timedelta(days=1):
                    db.delete(row)  # a node gone for a day is not worth listing
            db.commit()
        self._snapshot_at = time.monotonic()

    def free_resources(self) -> dict[str, dict[str, float]]:
        """Per node: its totals less what this dispatcher's tasks hold (tasks not yet placed: first fit)."""
        with self.lock:
            flights = list(self.inflight.values())
            # a node reported dead since this tick listed the nodes offers nothing either
            free = {k: dict(v["resources"]) for k, v in self.nodes.items() if k not in self.dead}
        unplaced = []
        for f in flights:
            if f.node_id in free:
                f.need.take(free[f.node_id])
            elif f.node_id is None:
                unplaced.append(f)
        for f in unplaced:
            for res in free.values():
                if f.need.fits(res):
                    f.need.take(res)
                    break
        return free

    # -- choosing and starting

    def _fit(self, job: Job, nodes: list[Node]) -> cluster_fit.Fit:
        """The backend this job runs on the nodes online now, or why no node could ever run it."""
        return cluster_fit.fit(
            nodes,
            lab=job.lab,
            params=job.params,
            requested=job.requested_backend,
            backend=job.backend,
            fallback_memory=self.settings.job_memory_bytes,
        )

    def dispatch(self, nodes: list[Node]) -> int:
        started = 0
        free = self.free_resources()
        gpu_blocked = False
        with self.sessions() as db:
            for job_id in queue_service.fair_order(db, limit=50):
                job = db.get(Job, job_id)
                if job is None or job.status != "queued":
                    continue
                fits = self._fit(job, nodes)
                if fits.backend is None:
                    self._maybe_unplaceable(db, job, fits)
                    continue
                backend = fits.backend
                asked = need_for(job.lab, job.params, backend)
                if asked.gpus and gpu_blocked:
                    continue
                need, target, target_id = asked, None, None
                for node_id, res in free.items():
                    budget = self._budget(self.nodes[node_id]["labels"])
                    need = asked.within(budget)
                    if asked.memory_bytes <= budget and need.fits(res):
                        need = need.with_cpu_share(self.nodes[node_id]["resources"], res)
                        target, target_id = res, node_id
                        break
                if target is None:
                    gpu_blocked = gpu_blocked or bool(need.gpus)
                    job_service.say_waiting(db, job=job, message="waiting for room on a lab node that can run it")
                    continue
                stopping = self.fence.blocking(job.id, self.nodes)
                if stopping is not None:  # never two attempts at once: this one waits for the last to stop
                    job_service.say_waiting(db, job=job, message=stopping)
                    continue
                claimed = job_service.claim(db, job_id=job.id, worker_id=self.id, lease_s=self.settings.lease_s)
                if claimed is None:
                    continue  # another dispatcher got it
                if backend != claimed.backend:
                    job_service.set_backend(db, job=claimed, backend=backend)
                need.take(target)
                self._submit(claimed, backend, need, target_id)
                started += 1
        return started

    def _budget(self, labels: Mapping[str, Any]) -> int:
        return node_memory_budget(labels, self.settings.job_memory_bytes)

    def _maybe_unplaceable(self, db, job: Job, fits: cluster_fit.Fit) -> None:
        """A job no node online can run waits, saying so, and fails after COURSE_UNPLACEABLE_SECONDS naming the
        resource and the node that stopped it."""
        waited = (utcnow() - (job.heartbeat_at or job.created_at)).total_seconds()
        if waited < self.settings.unplaceable_s:
            if fits.resource != "nodes":  # with no node at all, its card keeps what the submit said
                job_service.say_waiting(db, job=job, message="waiting for a lab node that can run it")
            return
        res = db.execute(
            update(Job)
            .where(Job.id == job.id, Job.status == "queued")
            .values(
                status="failed",
                finished_at=utcnow(),
                message="failed: no node can run it",
                error=f"No lab node of the course's cluster could run it for {waited / 60:.0f} min: {fits.why}. "
                f"{cluster_fit.advice(fits.resource)} Nothing is counted against you.",
            )
        )
        db.commit()
        if job_service._rowcount(res):
            log.error("job %s failed: no node online can run it: %s", job.id, fits.why)

    def _submit(self, job: Job, backend: str, need: Need, node_id: str | None) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        s = self.settings
        opts: dict[str, Any] = {
            "num_cpus": need.cpus,
            "num_gpus": need.gpus,
            "name": f"course-job-{job.id}-attempt-{job.attempts}",
        }
        if node_id is not None:
            # Only the node chosen above holds this run within its own budget (and its CPU share was computed
            # there): without affinity Ray may start it on any node with the resources free. Hard affinity, so a
            # node gone by then fails the task (a RayError: the job goes back to the queue, not charged) rather
            # than running it somewhere too small. NodeAffinitySchedulingStrategy(node_id, soft) as in
            # ray/util/scheduling_strategies.py of Ray 2.60.0.
            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        if need.te_gpus:
            opts["resources"] = {TE_RESOURCE: need.te_gpus}
        if need.memory_bytes:
            opts["memory"] = need.memory_bytes
        spec = {
            "job_id": job.id,
            "attempt": job.attempts,
            "lab": job.lab,
            "params": job.params,
            "backend": backend,
            "time_limit_s": s.job_time_limit_s,
            "ranks": need.ranks,  # with the task's CPUs, each lab process's threads (ray_node.run_lab_on_node)
            "lease": fence.tenure(self.id, self.since),  # the task stops its lab once another tenure holds the lease
            "fence_after_s": fence.STALE_LEASES * s.dispatcher_lease_s,  # or once this one stops renewing it
            # no memory budget: the node enforces its own (ray_node.run_lab_on_node), not this host's
        }
        gen = remote_task().options(**opts).remote(spec)
        flight = InFlight(
            job_id=job.id,
            attempt=job.attempts,
            need=need,
            gen=gen,
            deadline=time.monotonic() + s.job_time_limit_s + DEADLINE_SLACK_S,
            node_id=node_id,  # pinned there: its resources are held on that node from now on
        )
        flight.thread = threading.Thread(target=self._follow, args=(flight,), name=f"job-{job.id}", daemon=True)
        with self.lock:
            self.inflight[job.id] = flight
        log.info(
            "job %s attempt %s submitted to Ray: lab %s, backend %s, %s CPU, %s GPU",
            job.id,
            job.attempts,
            job.lab,
            backend,
            need.cpus,
            need.gpus,
        )
        flight.thread.start()

    # -- the timer

    def cancel(self, job_id: int, reason: str) -> None:
        import ray

        with self.lock:
            flight = self.inflight.get(job_id)
        if flight is None:
            return
        now = time.monotonic()
        if flight.cancel_sent_at is None:
            flight.cancel_reason, flight.cancel_sent_at = reason, now
            log.info("job %s: cancelling its Ray task (%s)", job_id, reason)
            ray.cancel(flight.gen, force=False)
        elif not flight.forced and now - flight.cancel_sent_at > FORCE_CANCEL_AFTER_S:
            flight.forced = True
            log.warning("job %s: its task ignored the cancel; killing its worker", job_id)
            ray.cancel(flight.gen, force=True)

    def abandon_lost_nodes(self) -> None:
        """A task whose node Ray no longer lists as alive (or another task's stream reported dead) is lost now,
        though its own stream may not have raised yet: Ray tells a task's owner about a dead node's tasks only when
        it next asks for their objects, which a busy host can stretch to minutes. The job goes back to the queue at
        once (not charged), the task is cancelled, and whatever its stream says later is ignored."""
        import ray

        with self.lock:
            gone = [f for f in self.inflight.values() if f.node_id and f.node_id not in self.nodes and not f.abandoned]
        for f in gone:
            f.abandoned = True
            log.warning("job %s: its node %s left the cluster; giving the job back", f.job_id, f.node_id)
            self._lost(f, "its node left the cluster")
            try:
                ray.cancel(f.gen, force=True)
            except Exception:  # the node is gone: there may be nothing left to cancel
                log.debug("job %s: cancel after node loss failed", f.job_id, exc_info=True)
            with self.lock:
                if self.inflight.get(f.job_id) is f:
                    self.inflight.pop(f.job_id)

    def tick(self) -> str:
        """One cycle; returns this dispatcher's role in words, for its health file."""
        with self.sessions() as db:
            lease = dispatch_lease.try_acquire(db, me=self.id, lease_s=self.settings.dispatcher_lease_s)
        if not lease.active:
            self._stand_by(lease)
            self._record("standby")
            return f"standing by; active: {lease.holder}"
        if self.active and lease.acquired_at != self.since:
            # Its lease ran out while it could not renew (frozen, stalled) and it won it again: the dispatcher that
            # held it meanwhile gave its jobs back, and its tasks stopped when they saw that one's tenure.
            log.error(
                "dispatcher %s lost its lease while it was not running and took it again; starting afresh", self.id
            )
            self._give_up_tasks("its dispatcher lost its lease while it was not running")
        self.renewed_at = time.monotonic()
        self.beat += 1
        fence.publish_lease(self.id, lease.acquired_at, self.beat)  # before any job starts under this tenure
        if not self.active:
            self._take_over(lease)
        self._work()
        self._record("active")
        return f"active since {lease.acquired_at:%Y-%m-%d %H:%M:%S} UTC" if lease.acquired_at else "active"

    def _record(self, role: str, error: str | None = None) -> None:
        """dispatchers_seen for the cluster page: on a change of role or error, else every SNAPSHOT_S."""
        if error is None and self._recorded[0] == role and time.monotonic() - self._recorded[1] < SNAPSHOT_S:
            return
        with self.sessions() as db:
            dispatch_lease.record(db, me=self.id, role=role, error=error)
        self._recorded = (role if error is None else "", time.monotonic())

    def _take_over(self, lease: dispatch_lease.Lease) -> None:
        """This dispatcher became the active one: what another dispatcher had running is lost (its driver took its
        Ray tasks with it), so each job goes back to the queue now, uncharged, instead of at its lease's end."""
        self.active, self.standing_by_for, self.since = True, None, lease.acquired_at
        before = f" (took over from {lease.took_over_from})" if lease.took_over_from else ""
        log.warning("dispatcher %s is the active dispatcher%s", self.id, before)
        with self.sessions() as db:
            orphans = dispatch_lease.orphaned_jobs(db, me=self.id)
            for job in orphans:
                job_service.lost(
                    db,
                    job_id=job.id,
                    worker_id=job.worker_id or "",
                    reason=f"its dispatcher {job.worker_id} stopped and {self.id} took over",
                )
        if orphans:
            log.warning(
                "dispatcher %s gave back %s another dispatcher had running", self.id, count(len(orphans), "job")
            )

    def _stand_by(self, lease: dispatch_lease.Lease) -> None:
        if self.active:
            log.error("dispatcher %s lost its lease to %s; stopping its tasks and standing by", self.id, lease.holder)
            self._give_up_tasks(f"its dispatcher lost its lease to {lease.holder}")
        if lease.holder != self.standing_by_for:
            self.standing_by_for = lease.holder
            renewed = f"{lease.renewed_at:%H:%M:%S} UTC" if lease.renewed_at else "never"
            since = f"{lease.acquired_at:%Y-%m-%d %H:%M:%S} UTC" if lease.acquired_at else "unknown"
            log.warning(
                "dispatcher %s is standing by: dispatcher %s is active (since %s, last heartbeat %s); this one takes "
                "over if that one stops renewing its lease for %.0f s",
                self.id,
                lease.holder,
                since,
                renewed,
                self.settings.dispatcher_lease_s,
            )

    def _give_up_tasks(self, reason: str, *, db_ok: bool = True) -> None:
        """No longer active: every task stops, and (where the database answers) its job is given back."""
        import ray

        self.active = False
        with self.lock:
            flights = list(self.inflight.values())
            self.inflight.clear()
        for f in flights:
            f.abandoned = True
            if db_ok:
                try:
                    self._lost(f, reason)
                except Exception:  # the new active dispatcher or the web tier's reaper gives it back
                    log.debug("job %s: could not give it back", f.job_id, exc_info=True)
            try:
                ray.cancel(f.gen, force=True)
            except Exception:
                log.debug("job %s: cancel failed", f.job_id, exc_info=True)

    def _work(self) -> None:
        nodes = self.refresh_nodes()
        self.abandon_lost_nodes()
        with self.sessions() as db:
            job_service.reap_expired(db)
            cancel_ids = job_service.renew_all(db, worker_id=self.id, lease_s=self.settings.lease_s)
        now = time.monotonic()
        with self.lock:
            flights = list(self.inflight.values())
        for f in flights:
            if f.job_id in cancel_ids:
                self.cancel(f.job_id, "cancelled")
            elif now > f.deadline:
                self.cancel(f.job_id, "timed out")
        self.dispatch(nodes)

    def run_forever(self) -> int:
        """Until SIGTERM or SIGINT; the exit status: 1 if Ray refused the connection (`serve` then starts the
        dispatcher again after supervise.RESTART_DELAY_S), else 0."""

        def stop(*_args) -> None:
            self.stopping.set()

        def handle_signals() -> None:
            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)

        self.health.starting()
        handle_signals()  # while waiting for the head, a stop ends the wait at once
        if not wait_for_head(self.ray_address, self.stopping, self.health):
            log.info("dispatcher %s stopped before it connected to Ray", self.id)
            self.engine.dispose()
            return 0
        if not connect(self.ray_address, self.id, self.health):
            self.engine.dispose()
            return 1
        handle_signals()  # again: ray.init installs a SIGTERM handler of its own (sys.exit), which ours replace
        log.info("dispatcher %s started", self.id)
        while not self.stopping.is_set():
            try:
                role = self.tick()
            except Exception as exc:  # the database or the cluster may be restarting; leases protect the jobs
                log.exception("dispatcher %s: a tick failed; trying again", self.id)
                first = next(iter(str(exc).strip().splitlines()), "")[:300]  # SQLAlchemy's errors run to many lines
                self.health.failed(f"a cycle failed: {type(exc).__name__}: {first}")
                if self.active and time.monotonic() - self.renewed_at > self.settings.dispatcher_lease_s:
                    # unrenewed, the lease may be a standby's by now: two active dispatchers must never run tasks
                    log.error(
                        "dispatcher %s could not renew its lease for %.0f s; stopping its tasks",
                        self.id,
                        time.monotonic() - self.renewed_at,
                    )
                    self._give_up_tasks("its dispatcher could not renew its lease", db_ok=False)
                try:
                    self._record("active" if self.active else "standby", error=f"{type(exc).__name__}: {first}")
                except Exception:
                    log.debug("could not record the failed cycle", exc_info=True)
            else:
                self.health.completed(role, self.id, self.settings.dispatcher_lease_s)
            self.stopping.wait(TICK_S)
        self.shutdown()
        return 0

    def shutdown(self) -> None:
        """Hand running jobs back to the queue (no attempt spent) and stop their tasks."""
        import ray

        with self.lock:
            flights = list(self.inflight.values())
        for f in flights:
            f.cancel_reason = "shutdown"
            with self.sessions() as db:
                job_service.release(db, job_id=f.job_id, worker_id=self.id, reason="requeued: dispatcher shut down")
            try:
                ray.cancel(f.gen, force=True)
            except Exception:
                pass
        try:
            with self.sessions() as db:
                if dispatch_lease.release(db, me=self.id):
                    log.info("dispatcher %s released its lease: a standby takes over at its next cycle", self.id)
                dispatch_lease.record(db, me=self.id, role="stopped")
        except Exception:  # the database is away: the lease then expires by itself
            log.warning(
                "dispatcher %s could not release its lease; it expires in %.0f s",
                self.id,
                self.settings.dispatcher_lease_s,
                exc_info=True,
            )
        self.health.stopped()
        log.info("dispatcher %s stopped (%d job(s) handed back)", self.id, len(flights))
        ray.shutdown()
        self.engine.dispose()


def main(settings: Settings | None = None) -> int:
    settings = settings or Settings.from_env()
    logs.configure(settings.log_level, fmt=settings.log_format)
    return Dispatcher(settings).run_forever()
