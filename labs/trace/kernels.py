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
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from labs.trace.timeline import intersection, total
from labs.words import number

COMMUNICATION = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
# Two counts of the same kernels agree to rounding (HTA rounds percentages to 0.01 %); 5 points of overlap
# ratio is far beyond that and well below the difference between the lab's schedules (0 vs most of it).
AGREEMENT_TOLERANCE = 0.05
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def kernel_intervals(trace: dict) -> dict[str, list[tuple[float, float]]]:
    """{"compute": [...], "communication": [...], "memory": [...]} in ms from a Chrome trace's GPU events."""
    out: dict[str, list[tuple[float, float]]] = {"compute": [], "communication": [], "memory": []}
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") != "X" or str(ev.get("cat", "")).lower() not in GPU_CATEGORIES:
            continue
        name = str(ev.get("name", ""))
        start, dur = float(ev["ts"]) / 1e3, float(ev.get("dur", 0)) / 1e3  # µs -> ms
        kind = "communication" if COMMUNICATION.match(name) else "memory" if MEMORY.match(name) else "compute"
        out[kind].append((start, start + dur))
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


def cross_check(trace_files: dict[int, Path], lab_ratios: dict[int, float | None] | None = None) -> dict:
    """Per rank: the lab's kernel count, HTA's, and (if given) the lab's own span-based ratio; flags disagreement."""
    own = {r: kernel_overlap(p) for r, p in sorted(trace_files.items())}
    hta, why = hta_overlap(trace_files)
    ranks: list[dict[str, Any]] = []
    flagged = []
    for r, o in own.items():
        h = None if hta is None else hta.get(r)
        diff = None if h is None or o["overlap_ratio"] is None else abs(h - o["overlap_ratio"])
        if diff is not None and diff > AGREEMENT_TOLERANCE:
            flagged.append(r)
        ranks.append(
            {
                "rank": r,
                "lab_kernel_overlap_ratio": o["overlap_ratio"],
                "hta_overlap_ratio": h,
                "lab_span_overlap_ratio": None if lab_ratios is None else lab_ratios.get(r),
                "difference": diff,
                "communication_kernel_ms": o["communication_kernel_ms"],
                "compute_kernel_ms": o["compute_kernel_ms"],
                "kernels": o["kernels"],
            }
        )
    return {
        "applies": True,
        "tolerance": AGREEMENT_TOLERANCE,
        "hta_available": hta is not None,
        "hta_reason": why,
        "ranks": ranks,
        "disagree_ranks": flagged,
        "note": (
            f"HTA and the lab's kernel count differ by more than {number(AGREEMENT_TOLERANCE)} on rank(s) {flagged}"
            if flagged
            else f"HTA and the lab's kernel count agree within {number(AGREEMENT_TOLERANCE)} on every rank"
            if hta is not None
            else f"HTA did not run: {why}; the lab's own kernel count stands alone"
        ),
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


__all__ = ["AGREEMENT_TOLERANCE", "cross_check", "hta_overlap", "kernel_intervals", "kernel_overlap", "not_applicable"]
