"""A GPU job's CPU slots on a Ray node: its GPUs' share of the node's cores, not the catalog's single slot."""

from __future__ import annotations

from app.executors.labproc import lab_threads
from app.executors.ray_resources import need_for

NODE_8X96 = {"CPU": 96.0, "GPU": 8.0}


def test_a_one_gpu_job_gets_its_gpus_share_of_the_cores_and_runs_that_many_threads():
    need = need_for("fp8-step", {}, "torch-cuda")
    assert (need.gpus, need.cpus) == (1, 1.0)  # the catalog's minimum
    placed = need.with_cpu_share(NODE_8X96, free=NODE_8X96)
    assert placed.cpus == 12.0
    assert lab_threads(backend="torch-cuda", ranks=placed.ranks, cpu_slots=placed.cpus) == 12


def test_a_multi_gpu_job_gets_the_share_of_each_gpu_it_holds():
    need = need_for("tp-sweep", {"degrees": [1, 2, 4]}, "torch-cuda")
    assert need.gpus == 4
    assert need.with_cpu_share(NODE_8X96, free=NODE_8X96).cpus == 48.0


def test_busy_cores_shrink_the_share_but_never_below_the_catalogs_slot():
    need = need_for("fp8-step", {}, "torch-cuda")
    assert need.with_cpu_share(NODE_8X96, free={"CPU": 5.0, "GPU": 8.0}).cpus == 5.0
    assert need.with_cpu_share(NODE_8X96, free={"CPU": 0.0, "GPU": 8.0}).cpus == 1.0


def test_cpu_jobs_keep_one_slot_per_rank():
    need = need_for("overlap-trace", {}, "cpu")
    assert need.with_cpu_share(NODE_8X96, free=NODE_8X96) == need
