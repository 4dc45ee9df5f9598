"""Timing on the device a lab runs on: collectives as nccl-tests times them, steps each alone between two events.

    new_event = events_for("cuda")            # torch.cuda.Event(enable_timing=True); HostEvent on "cpu"
    s = time_back_to_back(call, iters=20, warmup=1, barrier=host_barrier, sync=torch.cuda.synchronize,
                          new_event=new_event)                   # seconds per call
    ms = time_steps(step, steps=5, align=align, sync=sync, new_event=new_event)   # one duration per step

Why back to back: a collective of a few MiB on NVLink takes tens of µs, the size of a kernel launch plus a
device synchronize, so timing each call alone (barrier, sync, host timer, call, sync) measures the host. nccl-tests
(src/common.cu @ v2.19.6, `BenchTime`) makes one call and a barrier, then issues `iters` calls back to back with
nothing between them and divides the span by `iters` (a host timer around the launches, then one stream
synchronize; `-G`/per-iteration mode records CUDA events on the stream instead). `time_back_to_back` brackets the
same back-to-back launches with two events on the stream, so the span is the device's, without a synchronize's
host latency in it. Warm-up comes first, as `TimeTest`'s warmup_iters precede every timed size, so communicators
and buffers exist before the clock starts.

Both loops take the event factory as a parameter: CUDA events on a GPU (torch/cuda/streams.py @ v2.13:
`Event(enable_timing=True)`, `record()` on the current stream, `elapsed_time(end)` in ms once both have completed),
`HostEvent` (the host clock, with the same `record` / `elapsed_time` calls) on CPU, so the CPU runs exercise the
loop the GPU runs. A `HostEvent` given a
list appends to it as it records, which is how tests read the loop's order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol


class Event(Protocol):
    def record(self) -> None: ...

    def elapsed_time(self, end: Any) -> float: ...


class HostEvent:
    """torch.cuda.Event's timing calls on the host clock: `record()` stamps perf_counter, `elapsed_time(end)` is
    milliseconds to `end`. `log`, when given, gets ("record", name) each time the event records."""

    def __init__(self, log: list | None = None, name: str = "event"):
        self.log, self.name = log, name
        self.t: float | None = None

    def record(self) -> None:
        self.t = time.perf_counter()
        if self.log is not None:
            self.log.append(("record", self.name))

    def elapsed_time(self, end: HostEvent) -> float:
        if self.t is None or end.t is None:
            raise RuntimeError("HostEvent.elapsed_time: both events must have recorded")
        return (end.t - self.t) * 1e3


def events_for(device: str) -> Callable[[], Any]:
    """The event factory for `device`: CUDA events with timing on "cuda", HostEvent elsewhere."""
    if device == "cuda":
        import torch

        return lambda: torch.cuda.Event(enable_timing=True)
    return HostEvent


def sync_for(device: str) -> Callable[[], None]:
    """Wait for the device: torch.cuda.synchronize on "cuda"; nothing on CPU, where every call has returned."""
    if device == "cuda":
        import torch

        return torch.cuda.synchronize
    return lambda: None


def warmup_for(device: str, warmup: int) -> int:
    """Untimed steps before the first timed one: at least 1 on a GPU, where NCCL creates a communicator and
    cuBLAS its workspace on first use and the first step would time them; as asked on CPU."""
    return max(1, warmup) if device == "cuda" else warmup


def time_back_to_back(
    call: Callable[[], Any],
    *,
    iters: int,
    warmup: int,
    barrier: Callable[[], Any],
    sync: Callable[[], Any],
    new_event: Callable[[], Any],
) -> float:
    """Seconds per call of `iters` calls issued back to back between two events, after `warmup` untimed calls,
    the device drained and a barrier: nccl-tests' BenchTime. Every rank of the collective must call it."""
    if iters < 1:
        raise ValueError(f"iters: {iters}, expected >= 1")
    for _ in range(warmup):
        call()
    sync()
    barrier()
    start, stop = new_event(), new_event()
    start.record()
    for _ in range(iters):
        call()
    stop.record()
    sync()
    return start.elapsed_time(stop) / 1e3 / iters


def time_steps(
    step: Callable[[], Any],
    *,
    steps: int,
    align: Callable[[], Any],
    sync: Callable[[], Any],
    new_event: Callable[[], Any],
) -> list[float]:
    """Milliseconds of each of `steps` steps, each alone between two events after `align` (the ranks meeting):
    nothing else runs between the events, no profiler or recorder is on (the caller profiles another window)."""
    out = []
    for _ in range(steps):
        align()
        start, stop = new_event(), new_event()
        start.record()
        step()
        stop.record()
        sync()
        out.append(start.elapsed_time(stop))
    return out


__all__ = ["HostEvent", "events_for", "sync_for", "time_back_to_back", "time_steps", "warmup_for"]
