"""Communication/computation overlap from the GPU kernels of a profiler trace: the lab's own count and
Holistic Trace Analysis's, side by side.

Both read the Chrome trace torch.profiler exports (labs.trace.profile) and use the same definition as
labs.trace.timeline: overlap ratio = |compute kernels ∩ communication kernels| / |communication kernels|,
each set merged into disjoint intervals first. Kernels are classified the way HTA classifies them
(hta/common/types.py @ v0.6.1: CommunicateKernelGroupingPattern, MemoryKernelGroupingPattern; compute is
every other GPU kernel), so where the two disagree by more than AGREEMENT_TOLERANCE something other than
arithmetic differs (a filtered kernel, a clock shift) and the result flags it.

Holistic Trace Analysis: import name `hta`; on PyPI `holistictraceanalysis` up to 0.5.0 and `traceinsight`
from 0.6.0 (the same repository, facebookresearch/HolisticTraceAnalysis, renamed). API read at v0.5.0 and
v0.6.1 (identical for this use): `hta.trace_analysis.TraceAnalysis(trace_files={rank: path}, trace_dir=...,
include_last_profiler_step=...)` then `.get_comm_comp_overlap(visualize=False)`, a DataFrame with columns
`rank` and `comp_comm_overlap_pctg` (percent, rounded to 2 decimals). Both releases declare jupyterlab,
pydot (and 0.5.0 pytest) as requirements although analysis imports only pandas, numpy, plotly, networkx,
pyyaml and psutil: the project installs it with --no-deps beside those (pyproject's `hta` extra and
scripts/gpu-check-requirements.txt say how).

Which kernels count: HTA keeps only the GPU kernels launched by CPU ops inside the traced iterations
(`Trace._filter_irrelevant_gpu_kernels` in hta/common/trace.py @ v0.6.1: launches between the first
ProfilerStep's start and the last one's, the last step included when include_last_profiler_step=True,
matched to kernels by `correlation`). `kernel_intervals` does the same, so both counts see the same kernels;
a trace without ProfilerStep markers is read whole, as HTA does after warning.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from labs.env import empty_profile_reason
from labs.trace.timeline import intersection, total
from labs.words import number

COMMUNICATION = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
# Two counts of the same kernels agree to rounding (HTA rounds percentages to 0.01 %); 5 points of overlap
# ratio is far beyond that and well below the difference between the lab's schedules (0 vs most of it).
AGREEMENT_TOLERANCE = 0.05
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def profiler_steps(trace: dict) -> list[tuple[int, float, float]]:
    """(step number, start ms, end ms) of every ProfilerStep#N the profiler recorded, in step order."""
    out = []
    for ev in trace.get("traceEvents", []):
        m = PROFILER_STEP.match(str(ev.get("name", "")))
        if m and ev.get("ph") == "X":
            start = float(ev["ts"]) / 1e3
            out.append((int(m.group(1)), start, start + float(ev.get("dur", 0)) / 1e3))
    return sorted(out)


def _launched_in_steps(trace: dict) -> set[Any] | None:
    """Correlation ids of the CPU-side launches inside the profiled steps, or None without step markers."""
    steps = profiler_steps(trace)
    if not steps:
        return None
    lo, hi = steps[0][1], max(end for _, _, end in steps)
    ids = set()
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") != "X" or str(ev.get("cat", "")).lower() in GPU_CATEGORIES:
            continue
        corr = (ev.get("args") or {}).get("correlation")
        if corr is not None and lo <= float(ev["ts"]) / 1e3 <= hi:
            ids.add(corr)
    return ids


def kernel_intervals(trace: dict) -> dict[str, list[tuple[float, float]]]:
    """{"compute": [...], "communication": [...], "memory": [...]} in ms from a Chrome trace's GPU events
    launched inside its profiled steps."""
    out: dict[str, list[tuple[float, float]]] = {"compute": [], "communication": [], "memory": []}
    launched = _launched_in_steps(trace)
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") != "X" or str(ev.get("cat", "")).lower() not in GPU_CATEGORIES:
            continue
        if launched is not None and (ev.get("args") or {}).get("correlation") not in launched:
            continue
        name = str(ev.get("name", ""))
        start, dur = float(ev["ts"]) / 1e3, float(ev.get("dur", 0)) / 1e3  # µs -> ms
        kind = "communication" if COMMUNICATION.match(name) else "memory" if MEMORY.match(name) else "compute"
        out[kind].append((start, start + dur))
    return out


def _kernels_per_step(trace: dict) -> list[list[tuple[float, str, float, float]]] | None:
    """Per ProfilerStep, its GPU kernels as (launch ms, kind, start ms, end ms), in launch order: each kernel in the
    step whose CPU op launched it (a rank's own clock throughout)."""
    steps = profiler_steps(trace)
    if not steps:
        return None
    launch_at = {}
    for ev in trace.get("traceEvents", []):
        corr = (ev.get("args") or {}).get("correlation")
        if ev.get("ph") == "X" and corr is not None and str(ev.get("cat", "")).lower() not in GPU_CATEGORIES:
            launch_at[corr] = float(ev["ts"]) / 1e3
    per_step: list[list[tuple[float, str, float, float]]] = [[] for _ in steps]
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") != "X" or str(ev.get("cat", "")).lower() != "kernel":
            continue
        name = str(ev.get("name", ""))
        kind = "communication" if COMMUNICATION.match(name) else "memory" if MEMORY.match(name) else "compute"
        at = launch_at.get((ev.get("args") or {}).get("correlation"))
        start = float(ev["ts"]) / 1e3
        for i, (_, a, b) in enumerate(steps):
            if at is not None and a <= at <= b:
                per_step[i].append((at, kind, start, start + float(ev.get("dur", 0)) / 1e3))
                break
    return [sorted(ks) for ks in per_step]


def _comm_kernels_per_step(trace: dict) -> list[list[float]] | None:
    """Per ProfilerStep, the durations (ms) of the communication kernels its CPU ops launched, in launch order."""
    steps = _kernels_per_step(trace)
    if steps is None:
        return None
    return [[end - start for _, kind, start, end in ks if kind == "communication"] for ks in steps]


def kernel_waits(trace_files: dict[int, Path]) -> dict[int, list[float]] | None:
    """Per rank, per profiled step: milliseconds its communication kernels spent waiting for peers.

    An NCCL kernel starts when its rank launches it and spins until every peer's has started; the rank that
    arrives last waits for nobody, so the shortest duration of the k-th collective across ranks is its
    transfer, and each rank's wait is its own duration minus that. Durations come from each rank's own
    GPU timestamps: no clock is compared across ranks (the span-based split needs one host clock aligned
    to every GPU's events, an error about as large as these collectives at small shapes). None when a trace
    lacks step markers or the ranks' collectives do not pair up.
    """
    comm = kernel_comm(trace_files)
    return None if comm is None else {r: [step["wait_ms"] for step in steps] for r, steps in comm.items()}


def kernel_comm(trace_files: dict[int, Path]) -> dict[int, list[dict[str, float]]] | None:
    """Per rank, per profiled step, from kernel durations and each rank's own clock only:

        collective_ms  the step's collectives' transfers: the k-th collective's shortest duration over the ranks
        wait_ms        the rank's communication kernels' time beyond those transfers (spinning for a peer)
        exposed_ms     the rank's communication kernel time no compute kernel of its own overlapped, less its wait

    None when a trace lacks step markers or the ranks' collectives do not pair up (as `kernel_waits`)."""
    steps = {r: _kernels_per_step(json.loads(Path(p).read_text())) for r, p in trace_files.items()}
    if any(v is None for v in steps.values()):
        return None
    ranks = {r: v for r, v in steps.items() if v is not None}
    durations = {r: [[e - s for _, k, s, e in ks if k == "communication"] for ks in v] for r, v in ranks.items()}
    n_steps = {len(v) for v in durations.values()}
    if len(n_steps) != 1:
        return None
    out: dict[int, list[dict[str, float]]] = {r: [] for r in ranks}
    for i in range(n_steps.pop()):
        counts = {len(v[i]) for v in durations.values()}
        if len(counts) != 1:
            return None
        transfers = [min(v[i][k] for v in durations.values()) for k in range(counts.pop())]
        for r, v in ranks.items():
            wait = sum(durations[r][i]) - sum(transfers)
            comm = [(s, e) for _, k, s, e in v[i] if k == "communication"]
            compute = [(s, e) for _, k, s, e in v[i] if k == "compute"]
            alone = total(comm) - total(intersection(compute, comm))
            out[r].append({"collective_ms": sum(transfers), "wait_ms": wait, "exposed_ms": max(0.0, alone - wait)})
    return out


def kernel_overlap(trace_path: Path) -> dict:
    """The lab's own overlap numbers from one rank's trace file."""
    k = kernel_intervals(json.loads(Path(trace_path).read_text()))
    comm, comp = total(k["communication"]), total(k["compute"])
    both = total(intersection(k["compute"], k["communication"]))
    return {
        "compute_kernel_ms": comp,
        "communication_kernel_ms": comm,
        "overlap_ms": both,
        "overlap_ratio": both / comm if comm > 0 else None,
        "kernels": sum(len(v) for v in k.values()),
    }


def hta_overlap(trace_files: dict[int, Path]) -> tuple[dict[int, float | None] | None, str | None]:
    """HTA's overlap ratio per rank, or (None, why not)."""
    try:
        from hta.trace_analysis import TraceAnalysis
    except Exception as exc:  # not installed (an optional extra), or its own imports failing
        return None, f"Holistic Trace Analysis is not importable ({type(exc).__name__}: {exc})"
    files = {int(r): str(Path(p).resolve()) for r, p in trace_files.items()}
    trace_dir = str(Path(next(iter(files.values()))).parent)
    try:
        # Every profiled step counts: the lab profiles only the steps it measures.
        analysis = TraceAnalysis(trace_files=files, trace_dir=trace_dir, include_last_profiler_step=True)
        df = analysis.get_comm_comp_overlap(visualize=False)
    except Exception as exc:  # a trace HTA cannot parse is a finding, not a crash
        return None, f"HTA could not analyse the trace: {type(exc).__name__}: {exc}"
    out: dict[int, float | None] = {}
    for rank, pct in zip(df["rank"].tolist(), df["comp_comm_overlap_pctg"].tolist()):
        out[int(rank)] = None if pct is None or not math.isfinite(float(pct)) else float(pct) / 100.0
    return out, None


def cross_check(
    trace_files: dict[int, Path], lab_ratios: dict[int, float | None] | None = None, *, device_name: str | None = None
) -> dict:
    """Per rank: the lab's kernel count, HTA's, and (if given) the lab's own span-based ratio.

    A rank is flagged when HTA or the lab's spans differ from the kernel count by more than the tolerance:
    the spans are CUDA events around the lab's phases, so a gap there means the events bracket something the
    kernels do not show (a launch delay, a stream wait), or the reverse. A rank whose trace holds no kernel at
    all is named with the likely reason for `device_name` (a MIG instance, CUPTI unavailable: labs.env).
    """
    own = {r: kernel_overlap(p) for r, p in sorted(trace_files.items())}
    hta, why = hta_overlap(trace_files)
    ranks: list[dict[str, Any]] = []
    hta_flagged, span_flagged = [], []
    for r, o in own.items():
        h = None if hta is None else hta.get(r)
        kernel = o["overlap_ratio"]
        diff = None if h is None or kernel is None else abs(h - kernel)
        if diff is not None and diff > AGREEMENT_TOLERANCE:
            hta_flagged.append(r)
        span = None if lab_ratios is None else lab_ratios.get(r)
        if span is not None and kernel is not None and abs(span - kernel) > AGREEMENT_TOLERANCE:
            span_flagged.append(r)
        ranks.append(
            {
                "rank": r,
                "lab_kernel_overlap_ratio": kernel,
                "hta_overlap_ratio": h,
                "lab_span_overlap_ratio": span,
                "difference": diff,
                "communication_kernel_ms": o["communication_kernel_ms"],
                "compute_kernel_ms": o["compute_kernel_ms"],
                "kernels": o["kernels"],
            }
        )
    tol = number(AGREEMENT_TOLERANCE)
    if hta_flagged:
        hta_note = f"HTA and the lab's kernel count differ by more than {tol} on rank(s) {hta_flagged}"
    elif hta is not None:
        hta_note = f"HTA and the lab's kernel count agree within {tol} on every rank"
    else:
        hta_note = f"HTA did not run: {why}; the lab's own kernel count stands alone"
    span_note = (
        f"; the lab's CUDA-event spans and its kernel count differ by more than {tol} on rank(s) {span_flagged}"
        if span_flagged
        else f"; the lab's CUDA-event spans agree with its kernel count within {tol}"
        if lab_ratios is not None
        else ""
    )
    empty = [r for r, o in own.items() if not o["kernels"]]
    empty_note = f"; rank(s) {empty}: {empty_profile_reason(device_name)}" if empty else ""
    return {
        "applies": True,
        "tolerance": AGREEMENT_TOLERANCE,
        "hta_available": hta is not None,
        "hta_reason": why,
        "ranks": ranks,
        "disagree_ranks": sorted(set(hta_flagged) | set(span_flagged)),
        "note": hta_note + span_note + empty_note,
    }


def not_applicable(backend: str) -> dict:
    """What the result says on CPU, where there is no GPU kernel for HTA to read."""
    return {
        "applies": False,
        "tolerance": AGREEMENT_TOLERANCE,
        "hta_available": False,
        "hta_reason": None,
        "ranks": [],
        "disagree_ranks": [],
        "note": (
            f"not on the {backend} backend: it reads GPU kernels from a CUDA profiler trace; the overlap here comes "
            "from gloo wall-clock spans"
        ),
    }


__all__ = [
    "AGREEMENT_TOLERANCE",
    "cross_check",
    "hta_overlap",
    "kernel_comm",
    "kernel_intervals",
    "kernel_overlap",
    "kernel_waits",
    "not_applicable",
    "profiler_steps",
]
