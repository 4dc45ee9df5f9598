"""The timing loops every GPU measurement goes through (labs/parallel/timing.py), run on CPU with the same code:
HostEvent is the CPU's event, and one given a log records into it, so the loop's order is what these tests read.
The collectives lab's real gloo run (tests/labs/test_collectives.py) times through the same loop."""

from __future__ import annotations

import time

import pytest

from labs.parallel import timing


def _loop_log():
    log: list = []
    starts = iter(["start", "stop"] * 10)
    new_event = lambda: timing.HostEvent(log, next(starts))  # noqa: E731
    return log, new_event


def test_back_to_back_calls_sit_between_one_pair_of_events_after_warmup_sync_and_barrier():
    log, new_event = _loop_log()
    per_call = timing.time_back_to_back(
        lambda: log.append("call"),
        iters=4,
        warmup=2,
        barrier=lambda: log.append("barrier"),
        sync=lambda: log.append("sync"),
        new_event=new_event,
    )
    assert log == [
        "call",
        "call",  # warm-up: communicators and buffers exist before the clock starts
        "sync",
        "barrier",
        ("record", "start"),
        "call",
        "call",
        "call",
        "call",  # back to back: no barrier, sync or event between calls
        ("record", "stop"),
        "sync",
    ]
    assert per_call >= 0


def test_the_time_is_the_span_over_the_calls():
    per_call = timing.time_back_to_back(
        lambda: time.sleep(0.01), iters=5, warmup=0, barrier=lambda: None, sync=lambda: None, new_event=timing.HostEvent
    )
    assert 0.009 <= per_call < 0.05


def test_each_timed_step_is_alone_between_its_events_after_the_ranks_meet():
    log, new_event = _loop_log()
    ms = timing.time_steps(
        lambda: log.append("step"),
        steps=2,
        align=lambda: log.append("align"),
        sync=lambda: log.append("sync"),
        new_event=new_event,
    )
    one = ["align", ("record", "start"), "step", ("record", "stop"), "sync"]
    assert log == one + one and len(ms) == 2


def test_a_gpu_run_always_warms_up_and_a_cpu_run_does_as_asked():
    assert timing.warmup_for("cuda", 0) == 1 and timing.warmup_for("cuda", 3) == 3
    assert timing.warmup_for("cpu", 0) == 0


def test_the_factories_give_host_events_on_cpu_and_no_iteration_is_refused_quietly():
    assert timing.events_for("cpu") is timing.HostEvent
    with pytest.raises(ValueError, match="iters: 0"):
        timing.time_back_to_back(
            lambda: None, iters=0, warmup=0, barrier=lambda: None, sync=lambda: None, new_event=timing.HostEvent
        )
    with pytest.raises(RuntimeError, match="both events"):
        timing.HostEvent().elapsed_time(timing.HostEvent())
