"""The Ray cluster as the web tier sees it: the dispatcher's snapshot in the `cluster_nodes` table.

Web processes never connect to Ray (a Ray driver per web process would cost memory and start-up, and tie page
loads to the cluster's health). The dispatcher (app/executors/ray.py) writes each node's resources and its
capability labels every few seconds; pages and the submit check read them here. A node the dispatcher has not
listed for FRESH_S is treated as gone, so a dead dispatcher shows as "no node online", not as stale capacity.

Only lab nodes count towards what a job can get (`lab_nodes`): every lab task asks Ray for at least one CPU, so a
node that offers none, such as a head started with `--num-cpus=0 --num-gpus=0`, never runs one, and its missing
memory label must not lend it the web host's budget.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.digits import whole_number
from app.core.models import ClusterNode, utcnow
from app.services.jobs.labhost import HostCapacity
from labs.api import MIB, MIN_CPU_SLOTS, Capacity, count

FRESH_S = 30  # a snapshot older than this says nothing about the cluster now
TE_RESOURCE = "course_te_gpu"  # custom resource a node declares per GPU where Transformer Engine FP8 works
LABEL_PREFIX = "course/"
JOB_MEMORY_LABEL = LABEL_PREFIX + "job_memory_mb"  # set by `python -m app ray-node-flags` (ray_node.node_flags)


def node_memory_budget(labels: Mapping[str, Any], fallback: int) -> int:
    """The per-job memory budget a node enforces, as its `ray start` label says. A node started without the
    label (flags written by hand) is taken to enforce `fallback`, this host's own COURSE_JOB_MEMORY_MB: the only
    use left for that setting in Ray mode, since each node enforces its own (ray_node.run_lab_on_node)."""
    raw = str(labels.get(JOB_MEMORY_LABEL, ""))
    mb = whole_number(raw, lo=1)
    return mb * MIB if mb is not None else fallback


@dataclass(frozen=True)
class ClusterCapacity(HostCapacity):
    """The cluster's best node per resource, and which node's budget bounds a job's memory, in words."""

    memory_why: str = ""  # e.g. "the largest per-job budget of a lab node online (gpu-1, COURSE_JOB_MEMORY_MB=3072)"
    lab_nodes: int = 0  # online now; with none, memory is the web host's own budget, which no node has confirmed


@dataclass(frozen=True)
class Node:
    node_id: str
    hostname: str
    cpus: int
    gpus: int
    te_gpus: int
    memory_bytes: int
    labels: dict

    @property
    def backends(self) -> list[str]:
        out = []
        if self.te_gpus:
            out.append("te")
        if self.gpus:
            out.append("torch-cuda")
        if self.cpus:
            out.append("cpu")
        return out

    def label(self, name: str, default: str = "") -> str:
        return str(self.labels.get(LABEL_PREFIX + name, default))

    @property
    def runs_labs(self) -> bool:
        """Whether any lab task can land here: each asks for at least one CPU (ray_resources.need_for)."""
        return self.cpus > 0


def node_from_row(row: ClusterNode) -> Node:
    res = row.resources or {}
    return Node(
        node_id=row.node_id,
        hostname=row.hostname,
        cpus=int(res.get("CPU", 0)),
        gpus=int(res.get("GPU", 0)),
        te_gpus=int(res.get(TE_RESOURCE, 0)),
        memory_bytes=int(res.get("memory", 0)),
        labels=row.labels or {},
    )


def _online() -> tuple:
    return ClusterNode.alive.is_(True), ClusterNode.seen_at > utcnow() - timedelta(seconds=FRESH_S)


def online_nodes(db: Session) -> list[Node]:
    rows = db.scalars(select(ClusterNode).where(*_online()).order_by(ClusterNode.hostname))
    return [node_from_row(r) for r in rows]


def online_fingerprint(db: Session) -> tuple:
    """What of the online nodes decides where a job can run: which are online, their resources and labels (not when
    the dispatcher last listed them, which changes every few seconds). Equal while `online_nodes` would say the same."""
    rows = db.execute(
        select(ClusterNode.node_id, ClusterNode.resources, ClusterNode.labels)
        .where(*_online())
        .order_by(ClusterNode.node_id)
    )
    return tuple(
        (node_id, json.dumps(resources or {}, sort_keys=True), json.dumps(labels or {}, sort_keys=True))
        for node_id, resources, labels in rows
    )


def all_nodes(db: Session) -> list[tuple[Node, bool, object]]:
    """Every node ever seen, with whether it is online now and when it was last seen (the instructor page)."""
    since = utcnow() - timedelta(seconds=FRESH_S)
    rows = db.scalars(select(ClusterNode).order_by(ClusterNode.alive.desc(), ClusterNode.hostname))
    return [(node_from_row(r), bool(r.alive and r.seen_at > since), r.seen_at) for r in rows]


def lab_nodes(nodes: list[Node]) -> list[Node]:
    return [n for n in nodes if n.runs_labs]


def _memory_why(nodes: list[Node], fallback: int) -> tuple[int, str]:
    """The largest per-job memory budget of the lab nodes, and a sentence naming the node that has it."""
    if not nodes:
        return fallback, "no lab node of the Ray cluster is online; this is the web host's COURSE_JOB_MEMORY_MB"
    best = max(nodes, key=lambda n: node_memory_budget(n.labels, fallback))
    budget = node_memory_budget(best.labels, fallback)
    raw = whole_number(str(best.labels.get(JOB_MEMORY_LABEL, "")), lo=1)
    setting = f"COURSE_JOB_MEMORY_MB={raw}" if raw is not None else "no memory label, so the web host's budget"
    return budget, f"the largest per-job budget of a lab node online: {best.hostname}, {setting}"


def capacity(nodes: list[Node], *, memory_bytes: int) -> ClusterCapacity:
    """What one job can get from the cluster: the best lab node for each kind of resource. Memory is the largest
    budget a lab node online enforces (each enforces its own COURSE_JOB_MEMORY_MB); `memory_bytes`, this host's,
    stands in for a node without the label and for a cluster with no lab node online."""
    nodes = lab_nodes(nodes)
    memory_bytes, memory_why = _memory_why(nodes, memory_bytes)
    gpus = max((n.gpus for n in nodes), default=0)
    cpus = max((n.cpus for n in nodes), default=0)
    backends = [b for b in ("te", "torch-cuda", "cpu") if any(b in n.backends for n in nodes)]
    if "cpu" not in backends:
        backends.append("cpu")  # CPU jobs queue until a node is online; the page says none is
    if nodes:
        gpu_why = (
            f"the largest GPU node online has {count(gpus, 'GPU')}, one rank per GPU"
            if gpus
            else "no GPU node is online"
        )
        cpu_why = f"the largest node online offers {cpus} CPU rank slots"
    else:
        gpu_why = "no lab node of the course's Ray cluster is online"
        cpu_why = "no lab node is online; CPU jobs wait in the queue"
    return ClusterCapacity(
        capacity=Capacity(
            cpu_slots=cpus or MIN_CPU_SLOTS,
            gpus=gpus,
            memory_bytes=memory_bytes,
            cpu_why=cpu_why,
            gpu_why=gpu_why,
        ),
        backends=tuple(backends),
        source="cluster",
        memory_why=memory_why,
        lab_nodes=len(nodes),
    )


def host_capacity(db: Session, *, memory_bytes: int) -> ClusterCapacity:
    return capacity(online_nodes(db), memory_bytes=memory_bytes)
