"""FP32 pinned to IEEE and recorded (labs/precision.py), run on CPU: the TF32 flags are host-side state in torch,
the same with or without a GPU, so a process started as NVIDIA's containers start it
(TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1) shows TF32 on before pinning and off after, in the launcher and in every rank,
and result.json says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labs.parallel import dist as labdist

ROOT = Path(__file__).resolve().parents[2]

NGC_KEY = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"
NGC = {NGC_KEY: "1"}
PROBE = """
import json
import torch
from labs import precision
before = precision.state()
after = precision.pin()
print(json.dumps({"before": before, "after": after}))
"""


def _python(code: str, extra_env: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in NGC} | extra_env
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_containers_override_turns_tf32_on_until_the_lab_pins_it_off():
    got = _python(PROBE, NGC)
    assert got["before"]["fp32_matmul"] == "tf32" and got["before"]["float32_matmul_precision"] == "high"
    assert got["after"]["fp32_matmul"] == "ieee" and got["after"]["float32_matmul_precision"] == "highest"
    assert got["after"]["cudnn_tf32"] is False
    assert got["after"]["torch_allow_tf32_cublas_override"] == "1"  # recorded as the run found it


def test_without_the_override_pinning_changes_nothing_that_was_ieee():
    got = _python(PROBE, {})
    assert got["before"]["fp32_matmul"] == got["after"]["fp32_matmul"] == "ieee"
    assert got["after"]["torch_allow_tf32_cublas_override"] is None


def _state(rank: int, world: int) -> dict:
    from labs import precision

    return precision.state()  # after labs.parallel.dist pinned it, before the lab's own code


def test_every_rank_pins_before_the_lab_runs_and_reports_what_it_read_back(monkeypatch):
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")  # the spawned ranks start as an NGC process does
    states: dict[int, dict] = {}
    seen = labdist.launch(_state, 2, timeout_s=120, states=states)
    assert [s["fp32_matmul"] for s in seen] == ["ieee", "ieee"]
    assert states[0] == states[1] == seen[0]
    recorded = labdist.ranks_precision(states)
    assert recorded["checked_in"] == "every rank" and recorded["torch_allow_tf32_cublas_override"] == "1"


def test_ranks_that_disagree_are_recorded_by_the_least_precise():
    ieee = {"fp32_matmul": "ieee", "cudnn_tf32": False}
    tf32 = {"fp32_matmul": "tf32", "cudnn_tf32": True}
    assert labdist.ranks_precision({0: ieee, 1: tf32})["fp32_matmul"] == "tf32"


@pytest.mark.parametrize("override", ["1", None])
def test_result_json_says_how_fp32_ran(tmp_path, override):
    env = {k: v for k, v in os.environ.items() if k not in NGC} | ({NGC_KEY: override} if override else {})
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "labs", "run", "env-check", "--params", "{}", "--out", str(out), "--backend", "cpu"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads((out / "result.json").read_text())["environment"]["precision"]
    assert got["fp32_matmul"] == "ieee" and got["checked_in"] == "launcher"
    assert got["torch_allow_tf32_cublas_override"] == override


def test_a_parity_note_says_how_fp32_matmuls_ran():
    from labs import precision

    assert precision.words({"precision": {"fp32_matmul": "ieee"}}) == "FP32 matmuls in IEEE FP32 (TF32 off)"
    assert "TF32" in precision.words({"precision": {"fp32_matmul": "tf32"}})
    assert precision.words({}) == "FP32 matmul precision not recorded"
