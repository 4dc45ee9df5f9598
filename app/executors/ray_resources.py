"""What a lab job asks of a Ray node, and which nodes may be offered work: the dispatcher's arithmetic
(app/executors/ray.py), with no Ray, database or clock of its own, so it is tested on plain values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from app.services.cluster.nodes import LABEL_PREFIX, TE_RESOURCE
from labs import catalog

# A task's stream can report its node dead before `ray.nodes()` does (the GCS marks a node dead only after its
# health checks fail: ~15 s by default). For this long the dispatcher believes the task: the node offers nothing,
# so the job it gave back waits in the fair queue instead of being sent to a host that is gone.
DEAD_NODE_S = 120.0


def alive_nodes(listed: list[dict], dead: Mapping[str, float], now: float) -> tuple[dict[str, dict], dict[str, float]]:
    """The nodes work may go to, from `ray.nodes()`: alive, and not reported dead by a task's stream in the last
    DEAD_NODE_S seconds. Also the reports still worth keeping: a node Ray no longer lists alive needs none (its id
    never comes back: a restarted host joins as a new node), and after DEAD_NODE_S Ray's own word wins again."""
    nodes: dict[str, dict] = {}
    still_dead: dict[str, float] = {}
    for n in listed:
        if not n.get("Alive"):
            continue
        node_id = n["NodeID"]
        if node_id in dead and now - dead[node_id] < DEAD_NODE_S:
            still_dead[node_id] = dead[node_id]
            continue
        nodes[node_id] = {
            "hostname": n.get("NodeManagerHostname", ""),
            "resources": {k: v for k, v in (n.get("Resources") or {}).items() if not k.startswith("node:")},
            "labels": {k: v for k, v in (n.get("Labels") or {}).items() if k.startswith(LABEL_PREFIX)},
        }
    return nodes, still_dead


@dataclass
class Need:
    cpus: float
    gpus: int
    te_gpus: int
    memory_bytes: int
    ranks: int = 1  # the lab's processes: the node shares the task's CPUs among them (labproc.lab_threads)

    def fits(self, free: Mapping[str, float]) -> bool:
        return (
            free.get("CPU", 0) >= self.cpus
            and free.get("GPU", 0) >= self.gpus
            and free.get(TE_RESOURCE, 0) >= self.te_gpus
            and free.get("memory", 0) >= self.memory_bytes
        )

    def take(self, free: dict[str, float]) -> None:
        free["CPU"] = free.get("CPU", 0) - self.cpus
        free["GPU"] = free.get("GPU", 0) - self.gpus
        free[TE_RESOURCE] = free.get(TE_RESOURCE, 0) - self.te_gpus
        free["memory"] = free.get("memory", 0) - self.memory_bytes

    def with_cpu_share(self, totals: Mapping[str, float], free: Mapping[str, float]) -> Need:
        """A GPU job's CPU slots on one node: its GPUs' share of that node's CPUs (an 8-GPU, 96-core node gives
        each GPU 12), as many of them as are free now and never fewer than the catalog's one. The lab's own
        process runs the CPU-side work of a GPU run (the FP32 and emulated references it compares against) on
        these threads (labproc.lab_threads). CPU jobs keep what they asked for: one slot per rank."""
        node_gpus = totals.get("GPU", 0)
        if not self.gpus or node_gpus <= 0:
            return self
        share = int(totals.get("CPU", 0) // node_gpus) * self.gpus
        return replace(self, cpus=float(max(self.cpus, min(share, int(free.get("CPU", 0))))))

    def within(self, memory_budget: int) -> Need:
        """Ray's logical memory on a node: the catalog's estimate, but no more than that node lets a job use."""
        return replace(self, memory_bytes=min(self.memory_bytes, memory_budget))


def need_for(lab: str, params: dict, backend: str) -> Need:
    """What a job asks Ray for; its memory is the catalog's estimate until `within` a node's budget."""
    spec = catalog.get(lab)
    res = spec.resources(spec.params.model_validate(params), backend)
    gpu = backend in catalog.GPU_BACKENDS
    return Need(
        cpus=float(res.cpus if gpu else res.ranks),
        gpus=res.gpus if gpu else 0,
        te_gpus=res.gpus if backend == "te" else 0,
        memory_bytes=res.memory_bytes,
        ranks=res.ranks,
    )
