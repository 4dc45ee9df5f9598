"""GPU timelines as a profiler records them: torch.profiler with CUDA activities, NVTX ranges for Nsight.

On CUDA the parallel labs wrap a window of steps in `profiled(...)`, which records CPU and CUDA activity
with torch.profiler and writes the Chrome trace (Kineto's JSON, with every kernel on its stream); the
kernels in it are what labs.trace.kernels and Holistic Trace Analysis compute overlap from. Each phase of a
step is also an NVTX range (`nvtx_range`), in the `course-labs` domain with one colour per lane, so the
same run under Nsight Systems (`nsys profile -t cuda,nvtx python -m labs run ...`) shows the lab's phases
above the kernels. On CPU both are no-ops: the CPU path keeps its own wall-clock spans.

Steps: each timed step is a `profile_step(prof, n)` block, a `record_function("ProfilerStep#n")` around the step's
own work: the range `profile.step()` itself opens (torch/profiler/profiler.py @ v2.13, `step()`:
`prof.record_function("ProfilerStep#" + str(self.step_num))`), which HTA and labs.trace.kernels select steps by.
`step()` opens the next range where the last one closes, so everything between two steps, the rendezvous
included, would fall inside one; a block per step leaves gaps between steps instead.

Ranks start each profiled step together through `align_ranks`, between two steps' blocks: the device is drained
(`torch.cuda.synchronize`) and the ranks meet on a gloo group, which runs on the host and launches no kernel (an
NCCL barrier is a one-element all-reduce kernel, ProcessGroupNCCL::barrier @ v2.13, that HTA and the lab's
kernel count would both read as communication). Collection stays on throughout: switching CPU collection off
around the meeting (`toggle_collection_dynamic`) makes Kineto log, at every toggle, that toggling CPU activity with
GPU activity on "may result in traces with GPU events on arbitrary tracks" (profiler_kineto.cpp, torch 2.13.0).

The profiled window is never the timed one: a lab times its steps first with nothing but two events around each
(labs.parallel.timing.time_steps), then profiles further steps for the kernels (labs/trace/kernels.py).

Checked against: torch/profiler/profiler.py (`profile(activities=[ProfilerActivity.CPU,
ProfilerActivity.CUDA])`, `export_chrome_trace(path)`, `record_function(name)`) in PyTorch v2.11 (the lent
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


@contextlib.contextmanager
def profiled(trace_path: Path | None, *, enabled: bool, cuda: bool = True) -> Iterator[Any]:
    """Record the block with torch.profiler (CPU, and CUDA when `cuda`) and export its Chrome trace.

    Yields the profiler, or None when disabled (CPU runs). Mark each step with `profile_step(prof, n)`: the
    trace then holds ProfilerStep#0..N-1, one per step, and nothing between them.
    """
    if not enabled or trace_path is None:
        yield None
        return
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        yield prof
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(trace_path))


def profile_step(prof: Any, step: int) -> Any:
    """Step `step` of a profiled window: ProfilerStep#step around the block; nothing when `prof` is None."""
    if prof is None:
        return contextlib.nullcontext()
    from torch.profiler import record_function

    return record_function(f"ProfilerStep#{step}")


def host_group(ranks: list[int]) -> Any:
    """A gloo group over `ranks` for host-only rendezvous (every rank must call this, members or not)."""
    import torch.distributed as dist

    return dist.new_group(ranks, backend="gloo")


def align_ranks(group: Any, *, cuda: bool = False) -> None:
    """Start the next step on every rank of `group` together, launching nothing on the GPU.

    `group` must be a gloo group (`host_group`): its barrier runs on the host. Call it between steps, outside
    any `profile_step` block.
    """
    import torch
    import torch.distributed as dist

    if cuda:
        torch.cuda.synchronize()  # the device is idle before the ranks meet: no kernel waits on the skew
    dist.barrier(group=group)


__all__ = ["NVTX_COLOURS", "NVTX_DOMAIN", "align_ranks", "host_group", "nvtx_range", "profile_step", "profiled"]
