"""Which lab node online can run a job, and when none can, which resource of which node says no
(app/services/cluster/fit.py): the one answer of the dispatcher and the job card. Nodes as the dispatcher's snapshot
describes them; the labs' own catalog sizes the runs."""

from __future__ import annotations

from app.services.cluster.fit import fit
from app.services.cluster.nodes import Node
from labs.api import MIB

FALLBACK = 8192 * MIB  # the web host's own COURSE_JOB_MEMORY_MB, for a node without the label


def node(name: str, *, cpus=4, gpus=0, te=0, mb: int | None = 3072) -> Node:
    labels = {"course/job_memory_mb": str(mb)} if mb else {}
    return Node(name, name, cpus, gpus, te, 64 * 2**30, labels)


def test_a_run_fits_a_node_or_names_the_resource_and_the_node():
    head = Node("head", "web-1", 0, 0, 0, 6 * 2**30, {})  # no CPUs: never a lab node, lends no budget
    small, big = node("cpu-1", mb=8192), node("cpu-2", cpus=8, mb=8192)  # room for 8 ranks' processes
    sweep = {"degrees": [8], "hidden": 64, "ffn": 128, "tokens": 16}
    assert fit([head, small, big], lab="tp-sweep", params=sweep, requested="cpu", backend="cpu",
               fallback_memory=FALLBACK).backend == "cpu"  # fmt: skip
    got = fit([head, small], lab="tp-sweep", params=sweep, requested="cpu", backend="cpu", fallback_memory=FALLBACK)
    assert got.backend is None and got.resource == "cpu"
    assert got.why == "it needs 8 CPU rank slots and the largest lab node online offers 4 (cpu-1)"
    assert fit([head], lab="env-check", params={}, requested="auto", backend="cpu", fallback_memory=FALLBACK).why == (
        "no lab node of the Ray cluster is online"
    )


def test_gpu_runs_name_the_gpus_and_auto_falls_back_to_what_a_node_runs():
    gpu = node("gpu-1", cpus=16, gpus=2, te=0)
    sweep = {"degrees": [4]}
    got = fit(
        [gpu], lab="tp-sweep", params=sweep, requested="torch-cuda", backend="torch-cuda", fallback_memory=FALLBACK
    )
    assert got.backend is None and got.resource == "gpu"
    assert got.why == "it needs 4 GPUs on one node and the largest such node online has 2 (gpu-1)"
    te = fit([gpu], lab="fp8-step", params={}, requested="te", backend="te", fallback_memory=FALLBACK)
    assert te.backend is None and te.why == "no lab node online runs te"
    assert fit([gpu], lab="fp8-step", params={}, requested="auto", backend="te", fallback_memory=FALLBACK).backend == (
        "torch-cuda"
    )


def test_memory_is_judged_by_each_nodes_own_budget():
    big_run = {"batch": 384, "seq": 256, "steps": 2}  # about 4.6 GiB on cpu
    got = fit([node("cpu-1"), node("cpu-2", mb=2048)], lab="fp8-step", params=big_run, requested="cpu", backend="cpu",
              fallback_memory=FALLBACK)  # fmt: skip
    assert got.resource == "memory" and got.why == (
        "it needs about 4.6 GiB of memory and the largest per-job budget of a lab node online is 3.0 GiB (cpu-1, "
        "COURSE_JOB_MEMORY_MB=3072)"
    )
    unlabelled = fit([node("cpu-3", mb=None)], lab="fp8-step", params=big_run, requested="cpu", backend="cpu",
                     fallback_memory=FALLBACK)  # fmt: skip
    assert unlabelled.backend == "cpu"  # no label: the web host's budget stands in, as the dispatcher assumes
