"""Whether any lab node online can run a job, and if none can, which resource of which node says no.

    fit(nodes, lab="fp8-step", params={...}, requested="auto", backend="cpu", fallback_memory=...)
    # Fit(backend=None, why="it needs about 4.4 GiB of memory and the largest per-job budget of a lab node online is
    #     3.0 GiB (cpu-1, COURSE_JOB_MEMORY_MB=3072)", resource="memory")

One answer for the dispatcher (app/executors/ray.py: which backend to start a job on, and the reason it fails a job
no node could run for COURSE_UNPLACEABLE_SECONDS) and for the web tier (app/services/jobs/queue.py: a queued job that
no node online can run has no start estimate, and says why). A node counts with its totals, not what is free now:
a job that fits a busy node waits its turn and has an ETA; one that fits no node waits for a different node.
What a job asks of a node is what the dispatcher asks Ray for (app/executors/ray_resources.need_for): one CPU slot
per rank on cpu, the lab's CPU slots and one GPU per rank on a GPU backend, `course_te_gpu`s on te, and the
catalog's memory estimate within the node's own per-job budget (a run over the budget is refused by the node).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.services.cluster.nodes import JOB_MEMORY_LABEL, Node, lab_nodes, node_memory_budget
from labs import catalog
from labs.api import byte_size, count

CHOICES = ("te", "torch-cuda", "cpu")  # what `auto` tries, best first


@dataclass(frozen=True)
class Fit:
    backend: str | None  # what the job runs on the nodes given; None: no node can run it
    why: str = ""  # when None: the resource and the node, in words that follow "no lab node online can run it: "
    resource: str = ""  # memory | cpu | gpu | te | backend | nodes | lab


def _budget_words(node: Node, fallback: int) -> str:
    raw = node.labels.get(JOB_MEMORY_LABEL)
    setting = f"COURSE_JOB_MEMORY_MB={raw}" if raw else "no memory label, so the web host's budget"
    return f"{byte_size(node_memory_budget(node.labels, fallback))} ({node.hostname}, {setting})"


def _on_backend(nodes: list[Node], lab: str, params: dict, backend: str, fallback: int) -> Fit:
    """Whether one of `nodes` can run this job on `backend`; if none can, the nearest miss."""
    spec = catalog.get(lab)
    try:
        model = spec.params.model_validate(params)
    except ValueError as exc:  # a job queued under an older version of the lab: the lab would refuse it too
        return Fit(None, f"its parameters are not valid for {lab} any more ({str(exc).splitlines()[0]})", "lab")
    refused = spec.limits(model, backend)
    if refused:
        return Fit(None, refused[0].message, "lab")
    res = spec.resources(model, backend)
    gpu = backend in catalog.GPU_BACKENDS
    cpus, gpus = (res.cpus, res.gpus) if gpu else (res.ranks, 0)
    te = res.gpus if backend == "te" else 0
    offering = [n for n in nodes if backend in n.backends]
    if not offering:
        return Fit(None, f"no lab node online runs {backend}", "backend")
    kinds = set()  # what each node lacks
    for n in offering:
        budget = node_memory_budget(n.labels, fallback)
        if res.memory_bytes > budget:
            kinds.add("memory")
        elif gpus > n.gpus or te > n.te_gpus:
            kinds.add("gpu")
        elif cpus > n.cpus:
            kinds.add("cpu")
        elif n.memory_bytes and min(res.memory_bytes, budget) > n.memory_bytes:
            kinds.add("node memory")  # Ray's logical memory of the node (when listed), below what the task asks for
        else:
            return Fit(backend)
    if "memory" in kinds and len(kinds) == 1:
        best = max(offering, key=lambda n: node_memory_budget(n.labels, fallback))
        return Fit(
            None,
            f"it needs about {byte_size(res.memory_bytes)} of memory and the largest per-job budget of a lab node "
            f"online is {_budget_words(best, fallback)}",
            "memory",
        )
    if "gpu" in kinds:
        best = max(offering, key=lambda n: n.te_gpus if te else n.gpus)
        have = best.te_gpus if te else best.gpus
        what = "GPUs where Transformer Engine FP8 runs" if te else "GPUs"
        return Fit(
            None,
            f"it needs {gpus} {what} on one node and the largest such node online has {have} ({best.hostname})",
            "te" if te else "gpu",
        )
    if "cpu" in kinds:
        best = max(offering, key=lambda n: n.cpus)
        return Fit(
            None, f"it needs {count(cpus, 'CPU rank slot')} and the largest lab node online offers {best.cpus} "
            f"({best.hostname})",
            "cpu",
        )  # fmt: skip
    best = max(offering, key=lambda n: n.memory_bytes)
    return Fit(
        None,
        f"it needs about {byte_size(res.memory_bytes)} of memory and the lab node with the most, {best.hostname}, "
        f"gives Ray {byte_size(best.memory_bytes)}",
        "memory",
    )


def fit(nodes: list[Node], *, lab: str, params: dict, requested: str, backend: str, fallback_memory: int) -> Fit:
    """The backend this job runs on `nodes` (only lab nodes count), or why none of them can run it. `requested`: what
    the learner asked for (`auto`: the best backend a node can run it on); `backend`: what it was resolved to at
    submit, whose reason is given when no backend fits."""
    labs_online = lab_nodes(nodes)
    if not labs_online:
        return Fit(None, "no lab node of the Ray cluster is online", "nodes")
    spec = catalog.get(lab)
    choices = [spec.backend_for(b) for b in CHOICES] if requested == "auto" else [backend]
    for b in dict.fromkeys(choices):
        if _on_backend(labs_online, lab, params, b, fallback_memory).backend is not None:
            return Fit(b)
    return _on_backend(labs_online, lab, params, backend, fallback_memory)


def advice(resource: str) -> str:
    """What a learner can do about a job no node can run, by the resource that stopped it."""
    if resource == "memory":
        return "Make the run smaller (the lab form says by how much for the nodes online now)."
    if resource == "cpu":
        return "Run it with fewer ranks."
    if resource in ("gpu", "te", "backend"):
        return (
            "Run it with backend cpu (CPU emulation, labeled as such), or run `python -m labs run` on your own GPU "
            "and upload the bundle."
        )
    return "Run it again once a lab node is online."
