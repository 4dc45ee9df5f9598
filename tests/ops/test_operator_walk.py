"""What a walk-through from a fresh clone shows an operator: `dispatcher-health` names the age of each
dispatcher's last cycle (not a bare "(0 s ago)" after "active since ..."), and a node whose label and enforced
budget disagree (its `COURSE_JOB_MEMORY_MB` set in front of `ray start` only, after `$(ray-node-flags)` had
expanded) says so in the refusal the dispatcher logs. Real processes for the health check; no Ray cluster."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.executors.ray_node import budget_refusal
from labs.api import MIB
from tests.executors.health import dispatcher_health

# fp8-step on cpu at this size needs about 4.6 GiB (labs/fp8_step/params.py resources): over a 3072 MiB budget
BIG = {"job_id": 1, "attempt": 1, "lab": "fp8-step", "backend": "cpu", "params": {"batch": 384, "seq": 256, "steps": 2}}


@pytest.fixture
def fake_dispatcher():
    """A process whose command line reads as `... app dispatcher`, as the health check recognises one."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "-m", "app", "dispatcher"])
    yield proc
    proc.kill()
    proc.wait()


def test_dispatcher_health_names_the_last_cycles_age_after_the_role(tmp_path, fake_dispatcher):
    pid = fake_dispatcher.pid
    (tmp_path / f"course-dispatcher.{pid}.alive").write_text("active since 2026-12-04 04:15:42 UTC\n")
    out = dispatcher_health(tmp_path)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert line.startswith(f"dispatcher pid {pid}: active since 2026-12-04 04:15:42 UTC; last cycle "), line
    assert line.endswith(" s ago") and "(" not in line, line


def test_a_node_whose_label_and_budget_disagree_says_how_it_was_started():
    enforced = 3072 * MIB
    refused = budget_refusal(BIG, enforced, advertised_mb="6026")
    assert refused is not None and refused.lost  # the course's loss, never the learner's
    assert "allows 3.0 GiB per job and this run needs about 4.6 GiB" in (refused.error or ""), refused.error
    assert "its label advertises 6026 MiB per job, but it enforces 3072 MiB" in (refused.error or "")
    assert "COURSE_JOB_MEMORY_MB exported before `ray start" in (refused.error or "")
    agreeing = budget_refusal(BIG, enforced, advertised_mb="3072")  # a label that tells the truth: no hint
    assert agreeing is not None and "label" not in (agreeing.error or "")
    unlabelled = budget_refusal(BIG, enforced)  # Ray gave no label
    assert unlabelled is not None and "label" not in (unlabelled.error or "")
