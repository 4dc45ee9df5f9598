"""GPU timelines as a profiler records them: torch.profiler with CUDA activities, NVTX ranges for Nsight.

On CUDA the parallel labs wrap their timed steps in `profiled(...)`, which records CPU and CUDA activity
with torch.profiler and writes the Chrome trace (Kineto's JSON, with every kernel on its stream); the
kernels in it are what labs.trace.kernels and Holistic Trace Analysis compute overlap from. Each phase of a
step is also an NVTX range (`nvtx_range`), in the `course-labs` domain with one colour per lane, so the
same run under Nsight Systems (`nsys profile -t cuda,nvtx python -m labs run ...`) shows the lab's phases
above the kernels. On CPU both are no-ops: the CPU path keeps its own wall-clock spans.

Checked against: torch/profiler/profiler.py (`profile(activities=[ProfilerActivity.CPU,
ProfilerActivity.CUDA], ...)`, `export_chrome_trace(path)`, `step()`) in PyTorch v2.11 (the lent H200's) and
v2.13 (this repository's pin); the `nvtx` package 0.2.x (`nvtx.annotate(message, color, domain)`, colours as
ARGB ints or its named colours).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

NVTX_DOMAIN = "course-labs"
# The timeline palette (labs.trace.svgplot LANE_COLOURS) as opaque ARGB, so Nsight and the page agree.
NVTX_COLOURS = {"compute": 0xFF0072B2, "communication": 0xFFD55E00, "wait": 0xFF8A8A8A, "step": 0xFF009E73}


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
def profiled(trace_path: Path | None, *, enabled: bool) -> Iterator[Any]:
    """Record the block with torch.profiler (CPU + CUDA) and export its Chrome trace to `trace_path`.

    Yields the profiler (call `.step()` between steps so the trace carries ProfilerStep#N markers), or
    None when disabled (CPU runs).
    """
    if not enabled or trace_path is None:
        yield None
        return
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        yield prof
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(trace_path))


__all__ = ["NVTX_COLOURS", "NVTX_DOMAIN", "nvtx_range", "profiled"]
