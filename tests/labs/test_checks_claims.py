"""An upload's self-description is checked against itself: a result that reads as one GPU run has no contradiction,
and each way of editing one part of it (the backend, the device, the emulated flag, the FP8 numerics, the
timings, the label) is named."""

from __future__ import annotations

import copy

import pytest

from labs.checks.claims import check_claims, contradictions
from labs.env import honesty_label
from tests.app import labruns

H100 = "NVIDIA H100 80GB HBM3"


def _te_run() -> dict:
    """fp8-step's golden result as a te run on an H100 would write it."""
    result = copy.deepcopy(labruns.result("fp8-step"))
    env = result["environment"]
    env["device"].update(type="cuda", name=H100, compute_capability="9.0")
    env["versions"].update(cuda="12.8", transformer_engine="2.9.0", nccl="2.27")
    env["transformer_engine"] = {"available": True, "reason": None}
    env.update(backend="te", emulated=False, fp8_numerics="transformer_engine", label=honesty_label("te", H100))
    result["results"]["timing"]["kind"] = "cuda"
    for q in result["results"]["quantizers"]:
        q["source"] = "transformer_engine"
    return result


def test_a_consistent_gpu_run_and_every_golden_cpu_run_contradict_nothing():
    assert contradictions(_te_run()) == []
    assert check_claims(_te_run())["status"] == "info"
    for lab in (
        "env-check",
        "fp8-step",
        "tp-sweep",
        "overlap-trace",
        "collectives",
        "zero-fsdp",
        "pipeline",
        "context-parallel",
    ):
        assert contradictions(labruns.result(lab)) == [], lab


def _edit_env(**values):
    def edit(result: dict) -> None:
        result["environment"].update(values)

    return edit


@pytest.mark.parametrize(
    "edit, words",
    [
        (
            lambda r: r["environment"]["device"].update(type="cpu"),
            "the te backend, which runs on a GPU, on a device of type 'cpu'",
        ),
        (_edit_env(emulated=True), "emulated is true with the te backend"),
        (_edit_env(fp8_numerics="emulated"), "the te backend (Transformer Engine's FP8 kernels), but fp8_numerics"),
        (
            lambda r: r["results"]["quantizers"][0].update(source="emulation"),
            "the te backend (Transformer Engine's FP8 kernels), but source: emulation",
        ),
        (lambda r: r["environment"]["versions"].update(cuda=None), "the te backend, but no CUDA version"),
        (
            lambda r: r["environment"]["transformer_engine"].update(available=False),
            "Transformer Engine is not available",
        ),
        (lambda r: r["results"]["timing"].update(kind="cpu"), "but CPU timings (timing kind cpu)"),
        (
            _edit_env(label="Course-measured on the course's H100 cluster"),
            "a label `python -m labs run` does not write for the te backend",
        ),
        (
            lambda r: r["environment"].update(backend="cpu", emulated=True, label=honesty_label("cpu", H100)),
            "the cpu backend, but the device is a GPU",
        ),
    ],
)
def test_each_contradiction_is_named(edit, words):
    result = _te_run()
    edit(result)
    found = contradictions(result)
    assert any(words in f for f in found), found
    check = check_claims(result)
    assert check["status"] == "warn" and check["sentence"].startswith("This upload contradicts itself: ")


def test_a_cpu_device_named_like_a_gpu_is_named():
    result = copy.deepcopy(labruns.result("fp8-step"))
    result["environment"]["device"]["name"] = H100
    assert any("a CPU device named like a GPU" in f for f in contradictions(result))
