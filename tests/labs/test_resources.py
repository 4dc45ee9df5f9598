"""Memory estimates that hold: each lab's `resources()` against the peak RSS of its real process tree, and
runs far beyond a job's budget refused before anything starts, with the arithmetic in the message.

The wide calibration table lives in bench/lab_memory.py; here each lab runs once small and once medium
(tensors in the hundreds of MiB), quick enough for the suite.
"""

from __future__ import annotations

import pytest

from labs import catalog
from labs.resources import Capacity
from labs.words import byte_size
from tests.labs import runs

MEDIUM = {
    "fp8-step": {
        "steps": 2,
        "d_model": 256,
        "n_heads": 4,
        "ffn": 1024,
        "n_layers": 2,
        "seq": 128,
        "batch": 8,
        "vocab": 1024,
    },
    "tp-sweep": {"degrees": [1, 2], "tokens": 512, "hidden": 1024, "ffn": 4096, "steps": 1, "warmup": 0},
    "overlap-trace": {"tokens": 2048, "hidden": 512, "ffn": 4096, "window_out": 512, "steps": 1, "warmup": 0},
}
CASES = [(lab, "small", None) for lab in runs.SMALL] + [(lab, "medium", params) for lab, params in MEDIUM.items()]
# Conservative, not absurd: never below the measurement and at most this many times above it.
MAX_OVER = 3.0
BUDGET = 4 * 2**30


@pytest.mark.parametrize("lab, size, params", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_estimate_covers_the_measured_peak_of_the_process_tree(lab, size, params):
    done = runs.run(lab, params)
    spec = catalog.get(lab)
    need = spec.resources(spec.params.model_validate(done.params), "cpu")
    measured = done.measured.peak_rss_bytes
    ratio = need.memory_bytes / measured
    detail = f"estimate {byte_size(need.memory_bytes)} vs measured {byte_size(measured)} ({need.memory_note})"
    assert ratio >= 1.0, "underestimate: " + detail
    assert ratio <= MAX_OVER, "estimate too far above the measurement: " + detail
    if spec.name in ("tp-sweep", "overlap-trace"):  # the ranks and the resource tracker were counted
        assert done.measured.peak_processes >= need.ranks + 1, done.measured


def _memory_problem(lab: str, params: dict, backend: str):
    spec = catalog.get(lab)
    capacity = Capacity(cpu_slots=8, gpus=8, memory_bytes=BUDGET)
    problems = spec.problems(spec.params.model_validate(params), backend, capacity)
    found = [p for p in problems if "of memory" in p.message]
    assert len(found) == 1, problems
    return found[0]


@pytest.mark.parametrize("backend", ["cpu", "torch-cuda"])
def test_the_issues_fp8_step_example_is_refused_with_the_arithmetic(backend):
    # seq 32: the context the issue's example had (the lab's default is now 16)
    p = _memory_problem("fp8-step", {"d_model": 8192, "ffn": 65536, "vocab": 65536, "seq": 32}, backend)
    assert p.field == "d_model"
    assert p.message.startswith("d_model: this run needs about ") and "over the per-job budget of 4.0 GiB" in p.message
    assert "3,758,358,528 params x" in p.message  # the parameter count the estimate starts from
    if backend == "cpu":
        assert "params x 44 B" in p.message and "logits 4 x 512 tokens x 65,536 vocab x 4 B" in p.message


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"batch": 384, "seq": 256, "steps": 2}, "batch"),  # the operator walk's 4.6 GiB run: activations
        ({"batch": 8, "seq": 2048, "n_heads": 16, "d_model": 64, "ffn": 256}, "seq"),  # attention scores
    ],
)
def test_an_fp8_step_refusal_names_the_parameter_behind_the_largest_term(params, field):
    p = _memory_problem("fp8-step", params, "cpu")
    assert p.field == field and p.message.startswith(f"{field}: this run needs about ")


@pytest.mark.parametrize("degrees", [[1, 2, 4, 8], [2, 4, 6]])
@pytest.mark.parametrize("backend", ["cpu", "torch-cuda"])
def test_the_issues_tp_sweep_example_is_refused_with_the_arithmetic(backend, degrees):
    p = _memory_problem("tp-sweep", {"degrees": degrees, "hidden": 8192, "ffn": 32768}, backend)
    assert p.field == "ffn" and "over the per-job budget of 4.0 GiB" in p.message
    ranks = max(degrees)
    assert f"{ranks} rank(s) + 1 launcher x 448.0 MiB" in p.message
    assert "2 x ffn(32768) x hidden(8192) x 4 B = 2.0 GiB" in p.message


def test_a_small_run_fits_the_default_budget_of_a_small_host():
    for lab in catalog.names():
        spec = catalog.get(lab)
        need = spec.resources(spec.params(), "cpu")
        assert need.memory_bytes < BUDGET, (lab, need.memory_note)
