"""Fencing: one attempt of a job runs at a time, whatever became of the dispatcher that started it.

A dispatcher that is frozen (SIGSTOP, a paused VM, a stall) stops renewing its lease without dying, so Ray does not
end its tasks the way it ends a dead driver's; a standby takes over and requeues its jobs. Without a fence the
standby would start attempt 2 while attempt 1's lab still runs on its node: two runs on GPUs placed for one. The
fence has two layers, both kept in Ray's own key-value store in the GCS (namespace "course"), which every node's
workers reach without a database:

- The lease, as the active dispatcher last renewed it: `dispatcher-lease` holds the holder, since when it holds
  it (its tenure: a dispatcher that loses the lease and wins it back has a new one) and a beat that changes every
  cycle. A lab task is started under one tenure (in its spec) and watches the key (`Watch`): it stops its lab and
  gives the attempt back once another tenure holds the lease, or once the beat has not changed for twice the
  lease. It checks once more just before it starts the lab, after writing its marker, so a task a frozen
  dispatcher submitted late never starts a lab under a stale lease.
- A marker per attempt, `attempt:JOB:N`: written "running" by the task (node, worker pid and the lab's pid, each
  with its process start time, and Ray's task id) before it checks the lease, "ended" when it ends. Before it
  starts a job again, the dispatcher (`Fence.blocking`) looks for a marker of that job still "running": on a node
  that is gone it is over; otherwise the job waits, and after PROBE_AFTER_S (at once for a task whose stream the
  dispatcher saw end) a small task on that node (`probe`, no CPU asked, so a full node runs it too) kills that
  attempt's lab, checked by pid and start time, gives its task TASK_GRACE_S to mark the attempt ended and kills
  its worker if it does not; then the dispatcher closes the marker and the job may start.

The order makes the fence hold: a dispatcher publishes its tenure before it reads any marker, and a task writes its
marker before it reads the tenure; so either the dispatcher sees the marker and waits, or the task sees the new
tenure and does not start its lab. The GCS serves each key from one place, so the two orders cannot cross.

Checked against Ray 2.60.0: `InnerGcsClient.internal_kv_get/put/keys/multi_get(..., namespace, timeout)`
(ray/_raylet.so docstrings; the Python wrapper is ray/experimental/internal_kv.py), reached through
`ray._private.worker.global_worker.gcs_client`, which `ray.init` and every worker's `connect` set up
(ray/_private/worker.py). Process start times: proc(5), /proc/PID/stat field 22.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

log = logging.getLogger("app.executors.ray")

NAMESPACE = b"course"
LEASE_KEY = b"dispatcher-lease"
KV_TIMEOUT_S = 2.0  # a GCS that does not answer in this long is no news (the watch counts it as an unchanged beat)
POLL_S = 1.0  # how often a running task reads the lease
PROBE_AFTER_S = 5.0  # an earlier attempt still "running" this long after a dispatcher saw it is probed, then killed
STALE_LEASES = 2.0  # a task whose lease beat has not changed for this many leases stops its lab
TASK_GRACE_S = 3.0  # a task whose lab was killed marks its attempt ended within this long, or its worker is killed
ENDED_KEPT = 10_000  # streams seen to end that a dispatcher remembers (a job that finished never asks again)


def _gcs() -> Any:
    import ray._private.worker

    return ray._private.worker.global_worker.gcs_client  # type: ignore[attr-defined]  # set by connect()


def tenure(holder: str, since: datetime | None) -> dict[str, str]:
    """What a task is started under and compares with the published lease: who holds it, since when."""
    return {"holder": holder, "since": since.isoformat() if since else ""}


def publish_lease(holder: str, since: datetime | None, beat: int) -> None:
    """The active dispatcher, each cycle after its lease renewal in the database."""
    value = json.dumps({**tenure(holder, since), "beat": beat, "at": time.time()})
    _gcs().internal_kv_put(LEASE_KEY, value.encode(), True, NAMESPACE, timeout=KV_TIMEOUT_S)


def read_lease() -> dict | None:
    raw = _gcs().internal_kv_get(LEASE_KEY, NAMESPACE, timeout=KV_TIMEOUT_S)
    return json.loads(raw) if raw else None


def attempt_key(job_id: int, attempt: int) -> bytes:
    return f"attempt:{job_id}:{attempt}".encode()


def write_marker(job_id: int, attempt: int, marker: dict) -> None:
    value = json.dumps({**marker, "job_id": job_id, "attempt": attempt, "at": time.time()})
    _gcs().internal_kv_put(attempt_key(job_id, attempt), value.encode(), True, NAMESPACE, timeout=KV_TIMEOUT_S)


def markers(job_id: int) -> list[dict]:
    """Every attempt marker of this job (the attempts the GCS has heard of since it started)."""
    gcs = _gcs()
    keys = gcs.internal_kv_keys(f"attempt:{job_id}:".encode(), NAMESPACE, timeout=KV_TIMEOUT_S)
    if not keys:
        return []
    values = gcs.internal_kv_multi_get(list(keys), NAMESPACE, timeout=KV_TIMEOUT_S)
    return [json.loads(v) for v in values.values() if v]


def process_start(pid: int | None) -> int | None:
    """When process `pid` started (clock ticks since boot), None if it is gone or a zombie: a pid and its start time
    name one process, never a later one that reused the pid."""
    if not pid:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after "(comm)": state is field 3, starttime field 22
    return None if fields[0] in ("Z", "X") else int(fields[19])


class Watch:
    """On the node, in the task: whether the lease this attempt was started under still holds."""

    def __init__(self, started_under: dict, stale_after_s: float, clock: Callable[[], float] = time.monotonic):
        self.mine = (started_under.get("holder"), started_under.get("since"))
        self.stale_after_s = stale_after_s
        self.clock = clock
        self.seen: dict | None = None
        self.changed_at = clock()
        self.read_at: float | None = None

    def stale(self, *, now: bool = False) -> str | None:
        """Why this attempt must stop (the reason, in words that follow "lost because of"), or None. Reads the GCS
        at most every POLL_S unless `now`."""
        t = self.clock()
        if not now and self.read_at is not None and t - self.read_at < POLL_S:
            return None
        self.read_at = t
        try:
            current = read_lease()
        except Exception:  # the GCS is away: no news, which turns stale after stale_after_s like a frozen beat
            log.debug("could not read the dispatcher lease", exc_info=True)
            current = self.seen
        holder = self.mine[0]
        if current is not None and (current.get("holder"), current.get("since")) != self.mine:
            return f"dispatcher {current.get('holder')} took over the lease from this attempt's dispatcher {holder}"
        if current != self.seen:
            self.seen, self.changed_at = current, t
        elif t - self.changed_at > self.stale_after_s:
            return f"its dispatcher {holder} has not renewed its lease for {t - self.changed_at:.0f} s"
        return None


def _gone_within(pid: int, start: int, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while process_start(pid) == start:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _ended(marker: dict) -> bool:
    try:
        raw = _gcs().internal_kv_get(attempt_key(marker["job_id"], marker["attempt"]), NAMESPACE, timeout=KV_TIMEOUT_S)
    except Exception:
        return False
    return bool(raw) and json.loads(raw).get("state") == "ended"


def _running(marker: dict, what: str) -> tuple[int, int] | None:
    """(pid, start time) of the marker's lab or worker while that very process still runs here, else None."""
    pid, start = marker.get(f"{what}_pid"), marker.get(f"{what}_start")
    if isinstance(pid, int) and isinstance(start, int) and process_start(pid) == start:
        return pid, start
    return None


def probe(marker: dict) -> dict:
    """The body of the probe task, on the attempt's node: kill its lab (checked by pid and start time); then give its
    task TASK_GRACE_S to notice and mark the attempt ended, and kill its worker if it does not (a worker that ended
    the task in time may be running another by now, so it is left alone). Says what still runs."""
    lab_alive = False
    if (lab := _running(marker, "lab")) is not None:
        try:
            os.killpg(lab[0], signal.SIGKILL)  # the lab leads its own process group (labproc.LabRun)
        except ProcessLookupError:
            pass
        lab_alive = not _gone_within(*lab, 3.0)
    worker_alive, ended = False, False
    if (worker := _running(marker, "worker")) is not None:
        deadline = time.monotonic() + TASK_GRACE_S
        while not (ended := _ended(marker)) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not ended:
            try:
                os.kill(worker[0], signal.SIGKILL)
            except ProcessLookupError:
                pass
            worker_alive = not _gone_within(*worker, 3.0)
    return {"lab": lab_alive, "worker": worker_alive, "ended_by_task": ended}


_probe_remote: Any = None


def _probe_task() -> Any:
    global _probe_remote
    if _probe_remote is None:
        import ray

        _probe_remote = ray.remote(num_cpus=0, max_retries=0)(probe)
    return _probe_remote


@dataclass
class _Pending:
    seen_at: float
    ref: Any = None  # the probe in flight
    probes: int = 0
    said: bool = False


@dataclass
class Fence:
    """The dispatcher's side: whether a job may start again."""

    pending: dict[tuple[int, int], _Pending] = field(default_factory=dict)
    # attempts whose stream this dispatcher saw end, newest last (a dict as an ordered set, bounded)
    ended: dict[tuple[int, int], None] = field(default_factory=dict)

    def stream_over(self, job_id: int, attempt: int) -> None:
        self.ended[(job_id, attempt)] = None
        if len(self.ended) > ENDED_KEPT:
            self.ended.pop(next(iter(self.ended)))

    def blocking(self, job_id: int, alive_nodes: Collection[str], now: float | None = None) -> str | None:
        """What this job waits for before it may start (an earlier attempt of it may still run), or None."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if not ray.is_initialized():  # not connected: this process starts no task, so it has nothing to fence
            return None
        now = time.monotonic() if now is None else now
        waiting, running = None, set()
        for m in markers(job_id):
            if m.get("state") != "running":
                continue
            key = (job_id, int(m["attempt"]))
            running.add(key)
            p = self.pending.setdefault(key, _Pending(now))
            if m.get("node_id") not in alive_nodes:
                self._close(key, m, "its node left the cluster")
                continue
            if p.ref is not None:
                done, _ = ray.wait([p.ref], timeout=0)
                if done:
                    try:
                        left = ray.get(p.ref)
                    except Exception as exc:  # the node went, or the probe's worker did: probe again later
                        left = {"error": type(exc).__name__}
                    p.ref = None
                    if left.get("lab") is False and left.get("worker") is False:
                        self._close(key, m, "a probe on its node stopped what was left of it")
                        continue
            elif (key in self.ended and not p.probes) or now - p.seen_at >= PROBE_AFTER_S * (p.probes + 1):
                strategy = NodeAffinitySchedulingStrategy(node_id=m["node_id"], soft=False)
                p.ref = _probe_task().options(scheduling_strategy=strategy).remote(m)
                p.probes += 1
            if not p.said:
                p.said = True
                log.warning(
                    "job %s: attempt %s (Ray task %s, dispatcher %s) may still run on node %s; the job waits until "
                    "it has stopped",
                    job_id,
                    m["attempt"],
                    m.get("task_id"),
                    m.get("holder"),
                    m.get("node_id"),
                )
            waiting = f"waiting for its attempt {m['attempt']} to stop on {m.get('hostname') or m.get('node_id')}"
        for key in [k for k in self.pending if k[0] == job_id and k not in running]:
            self.pending.pop(key)  # ended by its own task
            self.ended.pop(key, None)
        return waiting

    def _close(self, key: tuple[int, int], marker: dict, why: str) -> None:
        write_marker(key[0], key[1], {**marker, "state": "ended", "why": f"closed by a dispatcher: {why}"})
        self.pending.pop(key, None)
        self.ended.pop(key, None)
        log.info("job %s: attempt %s is over (%s)", key[0], key[1], why)
