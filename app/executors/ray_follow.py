"""Following one Ray task of the dispatcher (app/executors/ray.py): the stream of events its task yields
(ray_node.run_lab_on_node: where it landed, the lab's progress, the outcome with the output zipped), written to
the jobs table as they come, and how the attempt ends: stored, stopped by the dispatcher, or lost to the
infrastructure (requeued, not charged). A mixin of `Dispatcher`, whose sessions, lock, in-flight table and
account of dead nodes it uses.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.executors.labproc import Outcome, timed_out
from app.executors.ray_fence import Fence
from app.executors.ray_resources import DEAD_NODE_S, Need
from app.services.jobs import bundles
from app.services.jobs import lifecycle as job_service

log = logging.getLogger("app.executors.ray")

NODE_DEATH_ERRORS = ("NodeDiedError", "LocalRayletDiedError")  # the node is gone, not just the task's worker
DEADLINE_SLACK_S = 30.0  # the node enforces the time limit; the dispatcher steps in only if the node cannot
INFRA_ERRORS = (
    "WorkerCrashedError",
    "NodeDiedError",
    "ObjectLostError",
    "OwnerDiedError",
    "RaySystemError",
    "LocalRayletDiedError",
    "ObjectFetchTimedOutError",
    "RayActorError",
)


@dataclass
class InFlight:
    job_id: int
    attempt: int
    need: Need
    gen: Any
    node_id: str | None = None
    deadline: float = 0.0
    cancel_reason: str | None = None  # "cancelled" | "timed out", once the dispatcher asked Ray to stop it
    cancel_sent_at: float | None = None
    forced: bool = False
    abandoned: bool = False  # its node left the cluster: the job was given back; the stream's late news is ignored
    thread: threading.Thread | None = field(default=None, repr=False)


class TaskFollower:
    """What `Dispatcher` provides to the methods below."""

    settings: Settings
    id: str
    lock: threading.Lock
    inflight: dict[int, InFlight]
    dead: dict[str, float]
    sessions: Callable[[], Session]
    fence: Fence

    def _follow(self, flight: InFlight) -> None:
        import ray

        job_id = flight.job_id
        placement: dict = {}
        try:
            for ref in flight.gen:
                item = ray.get(ref)
                if flight.abandoned:
                    return
                kind = item.get("event")
                if kind == "placed":
                    flight.node_id = item["node_id"]
                    placement = {k: v for k, v in item.items() if k != "event"}
                    with self.sessions() as db:
                        job_service.record_placement(
                            db, job_id=job_id, worker_id=self.id, node=item["hostname"], placement=placement
                        )
                elif kind == "lab":
                    placement["lab_pid"] = item["pid"]
                    placement["lab_started"] = item["at"]
                    placement["threads"] = item.get("threads")
                    # the lab's own view: "" for a cpu job, which must not see the node's GPUs
                    placement["lab_cuda_visible_devices"] = item.get("lab_cuda_visible_devices")
                    with self.sessions() as db:
                        job_service.record_placement(
                            db, job_id=job_id, worker_id=self.id, node=placement["hostname"], placement=placement
                        )
                elif kind == "progress":
                    with self.sessions() as db:
                        lease = job_service.heartbeat(
                            db,
                            job_id=job_id,
                            worker_id=self.id,
                            lease_s=self.settings.lease_s,
                            progress=job_service.Progress(item["fraction"], item["message"]),
                        )
                    if not lease:
                        log.warning("job %s: lease lost by %s; cancelling its task", job_id, self.id)
                        ray.cancel(flight.gen, force=True)
                        return
                elif kind == "end":
                    placement["ended"] = item["at"]
                    ended = Outcome(item["ok"], item["error"], item["message"])  # as the node's labproc made it
                    if ended.lost and flight.cancel_reason is None:
                        self._lost(flight, item["error"])
                    else:
                        self._store(flight, item, placement)
                    return
            self._lost(flight, "the Ray task ended without a result")
        except Exception as exc:  # a RayError from ray.get, or the stream itself failing
            name = type(exc).__name__
            if flight.abandoned:
                return
            if flight.cancel_reason is not None:
                self._stopped(flight, placement)
            elif name in INFRA_ERRORS or isinstance(exc, ray.exceptions.RayError):
                if name in NODE_DEATH_ERRORS and flight.node_id:
                    self._mark_dead(flight.node_id, name)  # before the job goes back: it must not go there again
                self._lost(flight, f"the node or its Ray worker was lost ({name})")
            else:
                log.exception("job %s: following its task failed", job_id)
                self._lost(flight, f"the dispatcher could not follow the task ({name})")
        finally:
            self.fence.stream_over(job_id, flight.attempt)  # its marker, if still "running", is probed at once
            with self.lock:
                if self.inflight.get(job_id) is flight:  # a later attempt of the same job may be in flight now
                    self.inflight.pop(job_id)

    def _store(self, flight: InFlight, item: dict, placement: dict) -> None:
        s = self.settings
        rel = Path("jobs") / str(flight.job_id) / f"attempt-{flight.attempt}"
        ok, error, message, result = item["ok"], item["error"], item["message"], None
        if flight.cancel_reason == "cancelled" and not ok:
            message, error = "cancelled", None
        if ok:
            dest = s.data_dir / rel
            shutil.rmtree(dest, ignore_errors=True)
            try:
                result = bundles.unpack(item["zip"], dest)
            except bundles.BundleError as exc:
                ok, error, message = False, f"The lab's output could not be stored: {exc}", "failed"
                shutil.rmtree(dest, ignore_errors=True)
        with self.sessions() as db:
            job_service.record_placement(
                db, job_id=flight.job_id, worker_id=self.id, node=placement.get("hostname", ""), placement=placement
            )
            job_service.finish(
                db,
                job_id=flight.job_id,
                worker_id=self.id,
                ok=ok,
                result=result,
                error=error,
                bundle_dir=str(rel) if ok else None,
                message=message,
                status="cancelled" if message == "cancelled" else None,
            )
        log.info("job %s attempt %s ended on %s: %s", flight.job_id, flight.attempt, placement.get("hostname"), message)

    def _stopped(self, flight: InFlight, placement: dict) -> None:
        """The task ended because the dispatcher cancelled it: the learner's cancel, or the time limit."""
        with self.sessions() as db:
            if flight.cancel_reason == "timed out":
                o = timed_out(self.settings.job_time_limit_s)
                job_service.finish(
                    db, job_id=flight.job_id, worker_id=self.id, ok=False, error=o.error, message=o.message
                )
            else:
                job_service.finish(
                    db, job_id=flight.job_id, worker_id=self.id, ok=False, message="cancelled", status="cancelled"
                )

    def _mark_dead(self, node_id: str, why: str) -> None:
        with self.lock:
            known = node_id in self.dead
            self.dead[node_id] = time.monotonic()
        if not known:
            log.warning(
                "node %s: a task on it failed with %s; no work goes there while Ray still lists it (at most %.0f s)",
                node_id,
                why,
                DEAD_NODE_S,
            )

    def _lost(self, flight: InFlight, reason: str) -> None:
        with self.sessions() as db:
            job_service.lost(db, job_id=flight.job_id, worker_id=self.id, reason=reason)
