"""A GPU job's CPU slots on a Ray node: its GPUs' share of the node's cores, not the catalog's single slot."""

from __future__ import annotations

import pytest

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


@pytest.fixture
def recording_dispatcher(db_url, tmp_path):
    """A Ray-mode Dispatcher whose hand-off to Ray is recorded in `sent` instead of made (the suite's Ray cluster has
    no GPU, nor nodes with these budgets, to place it on); `place(rows)` lists the nodes and runs one dispatch."""
    from app.core.config import Settings
    from app.executors.ray import Dispatcher
    from app.services.cluster.nodes import node_from_row

    settings = Settings.from_env(
        {"COURSE_ENV": "test", "COURSE_DATA_DIR": str(tmp_path / "data")},
        database_url=db_url,
        executor="ray",
        embedded_workers=0,
        lease_s=5,
    )

    class Recording(Dispatcher):
        sent: list = []

        def _submit(self, job, backend, need, node_id):
            self.sent.append((backend, need, node_id))

        def place(self, rows) -> int:
            self.nodes = {
                r.node_id: {"hostname": r.hostname, "resources": r.resources, "labels": r.labels} for r in rows
            }
            return self.dispatch([node_from_row(r) for r in rows])

    d = Recording(settings, dispatcher_id="dispatcher:test:1:record00")
    d.sent = []
    try:
        yield d
    finally:
        d.engine.dispose()


def test_the_dispatcher_gives_a_gpu_job_its_share_when_it_places_it(recording_dispatcher, db, make_user):
    """dispatch() on a node Ray lists with 8 GPUs and 96 CPUs: the Ray task of a one-GPU job asks for 12 CPUs."""
    from app.core.models import ClusterNode, Job

    owner = make_user("gpu-share@example.org")
    db.add(Job(owner_id=owner.id, lab="fp8-step", params={}, backend="torch-cuda", requested_backend="torch-cuda"))
    db.commit()
    resources = {**NODE_8X96, "memory": 512 * 2**30}
    row = ClusterNode(node_id="g1", hostname="gpu-host", resources=resources, labels={"course/job_memory_mb": "65536"})
    assert recording_dispatcher.place([row]) == 1
    ((backend, need, node_id),) = recording_dispatcher.sent
    assert (backend, need.gpus, need.cpus, node_id) == ("torch-cuda", 1, 12.0, "g1")


def test_the_job_is_pinned_to_the_node_whose_budget_holds_it(recording_dispatcher, db, make_user):
    """Two CPU nodes with room, only the second within budget: the hand-off names that node, so Ray cannot start
    the run on the first (where the node would refuse it)."""
    from app.core.models import ClusterNode, Job

    owner = make_user("pinned@example.org")
    db.add(Job(owner_id=owner.id, lab="tp-sweep", params={"degrees": [2]}, backend="cpu", requested_backend="cpu"))
    db.commit()
    resources = {"CPU": 8.0, "GPU": 0.0, "memory": 64 * 2**30}
    rows = [
        ClusterNode(node_id=f"n{mb}", hostname=f"h{mb}", resources=resources, labels={"course/job_memory_mb": str(mb)})
        for mb in (256, 4096)
    ]
    assert recording_dispatcher.place(rows) == 1
    assert [node_id for _, _, node_id in recording_dispatcher.sent] == ["n4096"]
