"""The real torch profiler on CPU (2 gloo ranks) through labs.trace.profile: the trace carries one
ProfilerStep#N per profiled step, the steps hold the step's own collective, and the rendezvous that starts each
step together (`align_ranks`, between `profile_step` blocks) leaves no barrier inside any step. A loop with a
plain barrier inside each step is run beside it, so the test sees that a barrier inside the window would be
caught."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labs.parallel import dist as labdist
from labs.trace.kernels import profiler_steps

STEPS = 3


def _profile_both_ways(rank: int, world: int, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    from labs.trace.profile import align_ranks, host_group, profile_step, profiled

    host = host_group(list(range(world)))
    x = torch.ones(64)
    for name, aligned in (("aligned", True), ("plain", False)):
        with profiled(Path(out_dir) / f"{name}_rank{rank}.json", enabled=True, cuda=False) as prof:
            for s in range(STEPS):
                if aligned:
                    align_ranks(host)
                with profile_step(prof, s):
                    if not aligned:
                        dist.barrier()
                    dist.all_reduce(x)  # the step's own work: a 64-element collective


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    out = tmp_path_factory.mktemp("profile")
    labdist.launch(_profile_both_ways, 2, args=(str(out),), timeout_s=120)
    return {name: json.loads((out / f"{name}_rank0.json").read_text()) for name in ("aligned", "plain")}


def _ops_in_steps(trace: dict) -> list[list[str]]:
    """Per ProfilerStep window, the names of the CPU ops that start inside it (HTA's per-step filtering)."""
    steps = profiler_steps(trace)
    ops = [ev for ev in trace["traceEvents"] if ev.get("ph") == "X" and not str(ev["name"]).startswith("ProfilerStep")]
    return [[str(ev["name"]) for ev in ops if a <= float(ev["ts"]) / 1e3 <= b] for _, a, b in steps]


def test_every_timed_step_is_a_profiler_step(traces):
    for trace in traces.values():
        assert [n for n, _, _ in profiler_steps(trace)] == list(range(STEPS))


def test_each_step_holds_its_collective_and_no_barrier(traces):
    per_step = _ops_in_steps(traces["aligned"])
    assert all(any("allreduce" in n for n in names) for names in per_step), per_step
    assert not any("barrier" in n for names in per_step for n in names), per_step


def test_a_barrier_inside_the_step_would_be_seen(traces):
    per_step = _ops_in_steps(traces["plain"])
    assert all(any("barrier" in n for n in names) for names in per_step), per_step
