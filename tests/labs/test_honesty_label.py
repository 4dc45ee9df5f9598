"""The honesty label says what this run really did: FP8 only where the run did FP8 arithmetic, CPU emulation
(never a GPU measurement) wherever it ran on the CPU."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from labs import env
from tests.labs import runs

SVG = "{http://www.w3.org/2000/svg}"
CPU_TIMINGS = "timings are CPU timings, not GPU measurements"


def _subtitle(svg_path) -> str:
    root = ET.fromstring(svg_path.read_text())
    return " ".join(t.text or "" for t in root.iter(f"{SVG}text") if t.get("fill") == "#444")


@pytest.mark.parametrize(
    "backend, collectives",
    [("cpu", True), ("cpu", False), ("torch-cuda", True), ("torch-cuda", False), ("te", True), ("te", False)],
)
def test_a_run_without_fp8_does_not_claim_fp8_numerics(backend, collectives):
    label = env.honesty_label(backend, "H100", collectives=collectives, fp8=False)
    assert "FP8 numerics" not in label and "FP8 kernels" not in label and "no FP8 in this run" in label
    assert ("gloo" in label or "NCCL" in label) == collectives
    if backend == "cpu":
        assert label.startswith("CPU emulation:") and label.endswith(CPU_TIMINGS + ".")
    else:
        assert label.startswith("Measured on GPU (H100)")


def test_environment_for_a_run_without_fp8_leaves_out_how_fp8_was_done():
    e = env.environment_for("cpu", env.probe(), fp8=False)
    assert e["emulated"] is True and "fp8_numerics" not in e and "FP8" in e["label"]  # "no FP8 in this run"
    assert "emulated in software" not in e["label"]
    assert env.environment_for("cpu", env.probe())["fp8_numerics"] == "emulated"  # FP8 stays the default


def _start_label(run) -> str:
    """The label on the run's first progress line (`python -m labs run` prints it before the lab starts)."""
    start = json.loads(run.measured.stdout.splitlines()[0])
    assert start["event"] == "start"
    return start["label"]


def test_overlap_trace_run_does_not_mention_fp8_numerics():
    run = runs.run("overlap-trace")
    environment = run.result["environment"]
    label = environment["label"]
    assert label == (
        "CPU emulation: each rank is a CPU process standing in for a GPU and collectives run on gloo "
        "(no FP8 in this run); timings are CPU timings, not GPU measurements."
    )
    assert _start_label(run) == label  # from the first line on, not only once the lab has read its params
    assert environment["emulated"] is True and "fp8_numerics" not in environment
    for artifact in run.result["artifacts"]:
        if artifact["media_type"] == "image/svg+xml":
            assert "FP8" not in (run.out / artifact["path"]).read_text()


def test_tp_sweep_without_fp8_gemms_says_no_fp8_in_its_label_and_timelines():
    run = runs.run("tp-sweep")  # fp8 is off by default
    assert run.result["params"]["fp8"] is False
    label = run.result["environment"]["label"]
    assert "emulated in software" not in label and "Transformer Engine" not in label
    assert label.startswith("CPU emulation:") and "gloo" in label and label.endswith(CPU_TIMINGS + ".")
    subtitle = _subtitle(run.out / "timeline_tp2.svg")
    assert subtitle == label  # the whole sentence, not cut at 110 characters
    assert _start_label(run) == label
    assert "fp8_numerics" not in run.result["environment"]


def test_tp_sweep_with_fp8_gemms_and_fp8_step_still_say_fp8_is_emulated():
    sweep = runs.run("tp-sweep", {**runs.SMALL["tp-sweep"], "degrees": [2], "fp8": True})
    step = runs.run("fp8-step")
    for run in (sweep, step):
        environment = run.result["environment"]
        assert _start_label(run) == environment["label"]
        assert "FP8 numerics are emulated in software with Transformer Engine's semantics" in environment["label"]
        assert environment["label"].startswith("CPU emulation:") and environment["fp8_numerics"] == "emulated"
    assert _subtitle(sweep.out / "timeline_tp2.svg") == sweep.result["environment"]["label"]
