"""What an operator of the Ray executor sees: whose memory budget a lab runs under. Real processes throughout:
`python -m app dispatcher`, the session's Ray cluster (tests/executors/raycluster.py) and PostgreSQL.
"""

from __future__ import annotations

import pytest

from app.models import ClusterNode, Job
from labs.resources import MIB
from tests.conftest import wait_for
from tests.executors.raycluster import NODE_JOB_MEMORY_MB


@pytest.mark.ray
@pytest.mark.postgres
def test_a_lab_runs_under_the_nodes_own_memory_budget_not_the_dispatchers(dispatchers, ray_client, ray_db):
    # The dispatcher's host allows the least any host may (512 MiB); the node allows its own NODE_JOB_MEMORY_MB (as a
    # GPU host sets COURSE_JOB_MEMORY_MB for itself). A two-rank CPU sweep holds ~1 GiB (three Python processes with
    # torch), so it finishes only under the node's budget.
    dispatchers.start(COURSE_JOB_MEMORY_MB="512")
    c = ray_client
    c.register("ann@example.org")
    r = c.post(
        "/api/v1/jobs",
        json={"lab": "tp-sweep", "params": {"degrees": [2]}, "backend": "cpu"},
        headers={"X-CSRF-Token": c.api_token()},
    )
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]

    def finished():
        ray_db.expire_all()
        j = ray_db.get(Job, job_id)
        return j if j.finished else None

    try:
        job = wait_for(finished, timeout=180, interval=0.3)
    except AssertionError:
        raise AssertionError(f"job {job_id} did not finish:\n{dispatchers.logs()}") from None
    assert job.status == "succeeded", f"{job.message}: {job.error}\n{dispatchers.logs()}"
    assert job.placement["memory_limit_bytes"] == NODE_JOB_MEMORY_MB * MIB  # recorded where the job ran
    # and the node says so to the cluster, for the dispatcher's Ray memory requests and the instructor's page
    node = next(n for n in ray_db.query(ClusterNode).filter(ClusterNode.alive.is_(True)) if n.resources.get("GPU"))
    assert node.labels["course/job_memory_mb"] == str(NODE_JOB_MEMORY_MB)
