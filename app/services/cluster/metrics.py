"""The database's view of the course for Prometheus, read at scrape time: jobs by state and lab, how long jobs
waited and ran, attempts lost to infrastructure, each Ray node's CPU and GPU slots and how many are in use, and
signs of life of the dispatcher and the lab workers. Every web process answers a scrape with the same figures,
since they come from the one database, not from any process's memory.

Histograms are built from the job rows themselves: their buckets count every job the database holds, so they
only grow (a learner's deletion, which removes their jobs, is the one exception Prometheus sees as a reset).

Every series a dashboard reads is there from the first scrape, at 0 until something happens: each lab of the
catalog in each state and histogram, each outcome of a lost attempt, each node's slots in use. A node that is gone
keeps only `course_node_alive` (0, for a day), so its slots no longer add to the cluster's. In Ray mode the
dispatcher's ages are +Inf until a dispatcher has written its first snapshot or lease: never is longer than any
alert's threshold. In embedded mode, which has no dispatcher or nodes, those families are empty.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator
from datetime import datetime

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.models import ClusterNode, DispatcherLease, Job, JobLoss, utcnow
from labs import catalog

# Seconds: a queue wait or a lab's run, from an env-check's few seconds to a long sweep or a class-wide backlog.
JOB_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
LOSS_OUTCOMES = ("queued", "failed", "cancelled")  # what a lost attempt's job became (lifecycle.lost, reap_expired)
SLOT_KINDS = ("cpu", "gpu")
NEVER = float("inf")


def _histogram(name: str, doc: str, values_by_lab: dict[str, list[float]]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=["lab"])
    for lab in sorted(set(catalog.names()) | set(values_by_lab)):
        values = values_by_lab.get(lab, [])
        buckets = [(str(b), sum(1 for v in values if v <= b)) for b in JOB_BUCKETS]
        buckets.append(("+Inf", len(values)))
        family.add_metric([lab], buckets, sum_value=sum(values))
    return family


def _seconds(a: datetime | None, b: datetime | None) -> float | None:
    return max(0.0, (b - a).total_seconds()) if a is not None and b is not None else None


class DatabaseCollector:
    """A prometheus_client collector (`collect()` yields metric families) over one short database session."""

    def __init__(self, sessions: Callable[[], Session], executor: str = "embedded"):
        self.sessions = sessions
        self.ray = executor == "ray"  # the dispatcher's and the nodes' figures mean something

    def collect(self) -> Iterator[Metric]:
        with self.sessions() as db:
            yield from self._jobs(db)
            yield from self._losses(db)
            yield from self._nodes(db)
            yield from self._liveness(db)

    def _jobs(self, db: Session) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("course_jobs", "Jobs by state and lab.", labels=["status", "lab"])
        counts = {
            (s, lab): n
            for s, lab, n in db.execute(select(Job.status, Job.lab, func.count()).group_by(Job.status, Job.lab))
        }
        labs = sorted(set(catalog.names()) | {lab for _, lab in counts})
        for status in STATUSES:
            for lab in labs:
                jobs.add_metric([status, lab], counts.get((status, lab), 0))
        yield jobs
        waits: dict[str, list[float]] = {}
        runs: dict[str, list[float]] = {}
        rows = db.execute(select(Job.lab, Job.status, Job.created_at, Job.started_at, Job.finished_at))
        for lab, status, created, started, finished in rows:
            if (w := _seconds(created, started)) is not None:
                waits.setdefault(lab, []).append(w)
            if status in ("succeeded", "failed") and (r := _seconds(started, finished)) is not None:
                runs.setdefault(lab, []).append(r)
        yield _histogram(
            "course_job_queue_wait_seconds", "From submission to the start of a job's latest attempt.", waits
        )
        yield _histogram(
            "course_job_run_seconds", "Run time of jobs that finished by themselves (succeeded or failed).", runs
        )

    def _losses(self, db: Session) -> Iterator[Metric]:
        lost = CounterMetricFamily(
            "course_infrastructure_losses",
            "Attempts lost to infrastructure (a worker, node or dispatcher died), by what the job became; never "
            "charged to the learner.",
            labels=["outcome"],
        )
        counts = dict.fromkeys(LOSS_OUTCOMES, 0)
        for outcome, n in db.execute(select(JobLoss.outcome, func.count()).group_by(JobLoss.outcome)):
            counts[outcome] = n
        for outcome, n in counts.items():
            lost.add_metric([outcome], n)
        yield lost

    def _nodes(self, db: Session) -> Iterator[Metric]:
        # A host can carry several Ray nodes (a restarted node joins with a new id; two nodes on one machine), so a
        # node's series are told apart by its id (first 8 hex digits, as /instructor/cluster shows it): Prometheus
        # keeps only one of two samples with the same labels.
        slots = GaugeMetricFamily(
            "course_node_slots",
            "CPU and GPU slots of each Ray node alive (a node that is gone has only course_node_alive 0).",
            labels=["node", "node_id", "kind"],
        )
        used = GaugeMetricFamily(
            "course_node_slots_used",
            "CPU and GPU slots running jobs hold, by host and kind (nodes of one host added up; 0 on a host alive "
            "with none running).",
            labels=["node", "kind"],
        )
        alive = GaugeMetricFamily(
            "course_node_alive",
            "1 while Ray reports the node alive, 0 for a node seen in the last day and gone.",
            labels=["node", "node_id"],
        )
        held = Tally[tuple[str, str]]()
        for row in db.scalars(select(ClusterNode)):
            res = row.resources or {}
            name, short = row.hostname or row.node_id, row.node_id[:8]
            alive.add_metric([name, short], 1.0 if row.alive else 0.0)
            if row.alive:
                slots.add_metric([name, short, "cpu"], float(res.get("CPU", 0)))
                slots.add_metric([name, short, "gpu"], float(res.get("GPU", 0)))
                for kind in SLOT_KINDS:
                    held[(name, kind)] += 0
        for node, ranks, gpus in db.execute(select(Job.node, Job.ranks, Job.gpus).where(Job.status == "running")):
            where = node or "unplaced"
            if gpus:
                held[(where, "gpu")] += gpus
            else:
                held[(where, "cpu")] += ranks
        for (node, kind), n in sorted(held.items()):
            used.add_metric([node, kind], n)
        yield from (slots, used, alive)

    def _liveness(self, db: Session) -> Iterator[Metric]:
        now = utcnow()
        seen = db.scalar(select(func.max(ClusterNode.seen_at)))
        snapshot = GaugeMetricFamily(
            "course_dispatcher_snapshot_age_seconds",
            "Seconds since the Ray dispatcher last wrote the cluster's nodes (it does every few seconds); +Inf in "
            "Ray mode before any dispatcher did.",
        )
        if seen is not None:
            snapshot.add_metric([], max(0.0, (now - seen).total_seconds()))
        elif self.ray:
            snapshot.add_metric([], NEVER)
        yield snapshot
        running = list(db.execute(select(Job.heartbeat_at, Job.lease_expires_at).where(Job.status == "running")))
        expired = GaugeMetricFamily(
            "course_running_jobs_past_lease",
            "Running jobs whose worker stopped renewing the lease: a worker or node that died; the reaper will "
            "requeue them.",
        )
        expired.add_metric([], sum(1 for _, lease in running if lease is not None and lease < now))
        lease = db.get(DispatcherLease, "ray")
        renewed = GaugeMetricFamily(
            "course_dispatcher_lease_age_seconds",
            "Seconds since a Ray dispatcher last renewed its lease (the active one does every cycle; one that "
            "stopped released it); +Inf in Ray mode before any dispatcher held it. Past "
            "COURSE_DISPATCHER_LEASE_SECONDS a standby takes over.",
        )
        if lease is not None and lease.renewed_at is not None:
            renewed.add_metric([], max(0.0, (now - lease.renewed_at).total_seconds()))
        elif self.ray:
            renewed.add_metric([], NEVER)
        yield renewed
        beat = GaugeMetricFamily(
            "course_worker_heartbeat_age_seconds",
            "The oldest heartbeat among running jobs (0 with none running): workers renew every few seconds.",
        )
        beat.add_metric([], max((max(0.0, (now - hb).total_seconds()) for hb, _ in running if hb), default=0.0))
        yield from (expired, beat)
