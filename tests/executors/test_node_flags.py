"""`python -m app ray-node-flags`: what a node's own probe says becomes its `ray start` resources and labels."""

from __future__ import annotations

from app.executors.ray_node import node_flags

# `python -m labs probe` on an 8-GPU H200 host with Transformer Engine (labs/env.py's report shape)
H200_TE = {
    "device": {"type": "cuda", "count": 8, "compute_capability": "9.0", "cpu_count": 96},
    "versions": {"torch": "2.10.0a0+b4e4ee81d3"},
    "transformer_engine": {"available": True, "reason": None},
    "fp8_recipes": {
        "delayed": {"supported": True},
        "current": {"supported": True},
        "block": {"supported": True},
        "mxfp8": {"supported": False, "reason": "needs compute capability 10.0+"},
    },
}
NO_TE_GPU = {
    "device": {"type": "cuda", "count": 2, "compute_capability": "8.0", "cpu_count": 16},
    "versions": {"torch": "2.13.0"},
    "transformer_engine": {"available": False, "reason": "not installed"},
    "fp8_recipes": {"delayed": {"supported": False}},
}
BUDGET = 4096 * 2**20  # the node's COURSE_JOB_MEMORY_MB; the cluster tests check it reaches the node's label
CPU_ONLY = {"device": {"type": "cpu", "cpu_count": 2}, "transformer_engine": {"available": False}, "fp8_recipes": {}}


def test_a_te_host_offers_te_gpus_and_labels_its_capabilities():
    flags = node_flags(H200_TE, job_memory_bytes=32768 * 2**20)
    assert "--num-gpus=8" in flags and "--num-cpus=96" in flags
    assert '--resources={"course_te_gpu":8}' in flags
    labels = dict(
        kv.split("=") for kv in next(f for f in flags if f.startswith("--labels=")).split("=", 1)[1].split(",")
    )
    assert labels == {
        "course/te": "yes",
        "course/cc": "9.0",
        "course/fp8": "delayed.current.block",
        "course/gpus": "8",
        "course/torch": "2.10.0a0_b4e4ee81d3",
        "course/job_memory_mb": "32768",
    }
    # `$(python -m app ray-node-flags)` is split on whitespace only (no quote removal): no flag may hold a space
    assert " ".join(flags).split() == flags


def test_a_gpu_host_without_te_gets_no_te_resource_and_a_cpu_host_no_gpus():
    flags = node_flags(NO_TE_GPU, job_memory_bytes=BUDGET)
    assert "--num-gpus=2" in flags and not any(f.startswith("--resources") for f in flags)
    assert "course/te=no" in flags[-1] and "course/fp8=none" in flags[-1] and "course/job_memory_mb=4096" in flags[-1]
    cpu = node_flags(CPU_ONLY, job_memory_bytes=BUDGET)
    assert "--num-gpus=0" in cpu and "--num-cpus=4" in cpu  # the catalog's four CPU rank slots on a 2-core host
