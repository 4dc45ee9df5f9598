"""GPU timelines as a profiler records them: torch.profiler with CUDA activities, NVTX ranges for Nsight.

On CUDA the parallel labs wrap their timed steps in `profiled(...)`, which records CPU and CUDA activity
with torch.profiler and writes the Chrome trace (Kineto's JSON, with every kernel on its stream); the
kernels in it are what labs.trace.kernels and Holistic Trace Analysis compute overlap from. Each phase of a
step is also an NVTX range (`nvtx_range`), in the `course-labs` domain with one colour per lane, so the
same run under Nsight Systems (`nsys profile -t cuda,nvtx python -m labs run ...`) shows the lab's phases
above the kernels. On CPU both are no-ops: the CPU path keeps its own wall-clock spans.

Steps: `profile()` marks steps only when it is given a `schedule` (torch/profiler/profiler.py @ v2.13,
`profile.__init__`: `if schedule: ... self.record_steps = True` else `record_steps = False`, so `step()` then
writes no ProfilerStep#N and HTA's per-step trimming finds no step). `profiled` passes a schedule that records
every step, so the trace carries ProfilerStep#0..N-1, one per timed step.

Ranks start each timed step together through `align_ranks`, and that rendezvous must not land on the GPU
timeline: an NCCL barrier is a one-element all-reduce kernel (ProcessGroupNCCL::barrier @ v2.13) that HTA and
the lab's kernel count both read as communication, spinning for however far the ranks are apart. So the
device is drained (`torch.cuda.synchronize`), the ranks meet on a gloo group (host only: no kernel), and the
profiler's CPU-op collection is switched off around the meeting (`toggle_collection_dynamic`, profiler.py @
v2.13 `_KinetoProfile.toggle_collection_dynamic(enable, activities)`, present since v2.4), so not even its
CPU ops fall inside a ProfilerStep window. CUDA collection stays on: the meeting launches nothing on the GPU,
so there is nothing to hide there, and switching CUPTI activity off and on within a session is a path no GPU
check of this project has run.

Checked against: torch/profiler/profiler.py (`profile(activities=[ProfilerActivity.CPU,
ProfilerActivity.CUDA], schedule=...)`, `export_chrome_trace(path)`, `step()`) in PyTorch v2.11 (the lent
H200's) and v2.13 (this repository's pin); the `nvtx` package 0.2.x (`nvtx.annotate(message, color, domain)`,
colours as ARGB ints or its named colours).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from labs.trace.chart import LANE_COLOURS, PALETTE

NVTX_DOMAIN = "course-labs"
# The timeline palette (labs/trace/chart.py LANE_COLOURS, a step in the palette's green) as opaque ARGB, so
# Nsight and the page agree.
NVTX_COLOURS = {lane: 0xFF000000 | int(colour[1:], 16) for lane, colour in {**LANE_COLOURS, "step": PALETTE[2]}.items()}


def nvtx_range(name: str, lane: str = "step", *, enabled: bool = True) -> Any:
    """An NVTX range named `name`, coloured by lane; nullcontext when disabled or without the nvtx package."""
    if not enabled:
        return contextlib.nullcontext()
    try:
        import nvtx
    except ImportError:  # the package is a project dependency; a bare GPU image may still lack it
        return contextlib.nullcontext()
    return nvtx.annotate(message=name, color=NVTX_COLOURS.get(lane, NVTX_COLOURS["step"]), domain=NVTX_DOMAIN)


def _record_every_step(step: int) -> Any:
    """A profiler schedule that records from the first step to the last (a schedule turns step markers on)."""
    from torch.profiler import ProfilerAction

    return ProfilerAction.RECORD


@contextlib.contextmanager
def profiled(trace_path: Path | None, *, enabled: bool, cuda: bool = True) -> Iterator[Any]:
    """Record the block with torch.profiler (CPU, and CUDA when `cuda`) and export its Chrome trace.

    Yields the profiler, or None when disabled (CPU runs). Call `.step()` between timed steps, not after the
    last: the trace then holds ProfilerStep#0..N-1, one per step.
    """
    if not enabled or trace_path is None:
        yield None
        return
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, schedule=_record_every_step) as prof:
        yield prof
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(trace_path))


def host_group(ranks: list[int]) -> Any:
    """A gloo group over `ranks` for host-only rendezvous (every rank must call this, members or not)."""
    import torch.distributed as dist

    return dist.new_group(ranks, backend="gloo")


def align_ranks(group: Any, *, prof: Any = None, cuda: bool = False) -> None:
    """Start the next step on every rank of `group` together, leaving nothing on the profiled timeline.

    `group` must be a gloo group (`host_group`): its barrier runs on the host and launches no kernel.
    """
    import torch
    import torch.distributed as dist

    if cuda:
        torch.cuda.synchronize()  # the device is idle before the ranks meet: no kernel waits on the skew
    toggle = getattr(prof, "toggle_collection_dynamic", None)
    if toggle is not None:
        from torch.profiler import ProfilerActivity

        activities = [ProfilerActivity.CPU]
        toggle(False, activities)
        try:
            dist.barrier(group=group)
        finally:
            toggle(True, activities)
    else:
        dist.barrier(group=group)


__all__ = ["NVTX_COLOURS", "NVTX_DOMAIN", "align_ranks", "host_group", "nvtx_range", "profiled"]
