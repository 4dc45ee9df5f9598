"""What a lab run needs and what a host can give it: the vocabulary of labs.catalog (torch-free).

Kept apart from the catalog so each lab's torch-free `params.py` can import these types while the
catalog imports every `params.py`.

Run-time cost model (labs.spec LabSpec.cost, each lab's `estimate_seconds`): a first run's estimate, before
any finished run of that lab can correct it (app/services/jobs/queue.py run_estimate). On the CPU backend:

    env-check      START_S + CPU_PROBE_S
    fp8-step       START_S + TAIL_S + steps x (layers x CPU_STEP_S_PER_LAYER + training FLOPs / CPU_TRAIN_FLOPS)
    tp-sweep       START_S + world x RANK_START_S + per degree: steps x (GEMM FLOPs / CPU_GEMM_FLOPS + bytes / 1 GB/s)
    overlap-trace  START_S + ranks x RANK_START_S + per schedule: steps x (GEMM FLOPs / CPU_GEMM_FLOPS + gather bytes)

The constants here are shared; each lab's own sit beside its `estimate_seconds`. All were calibrated on the
2-core x86 CPU host (torch 2.13) with bench/cost_model_fit.py, which runs `python -m labs run` at sizes from tiny
to each lab's defaults and prints wall time beside the model, with other jobs sharing the cores (load 1-2). There
the model came within 22% of every size (median 13%); bench/eta_accuracy.py checks the same first-run estimates
through the queue. GPU figures are guesses until a GPU run calibrates them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from labs.words import byte_size, count

# Best first: `auto` picks the first one a host can run. The Literal types the result models.
Backend = Literal["te", "torch-cuda", "cpu"]
BACKENDS: tuple[str, ...] = get_args(Backend)
GPU_BACKENDS = ("te", "torch-cuda")
BACKEND_CHOICES = ("auto", *BACKENDS)

# On CPU the "devices" are processes sharing cores. Four ranks are allowed even on a 2-core machine so
# the parallel labs can show TP=4 anywhere; beyond that each rank would get too little of a core to mean anything.
MIN_CPU_SLOTS = 4


def cpu_slots_why(cores: int) -> str:
    """Why a CPU host offers max(MIN_CPU_SLOTS, cores) rank slots, in words a learner reads in a refusal."""
    slots = max(MIN_CPU_SLOTS, cores)
    return (
        f"{count(slots, 'CPU rank slot')}: one per core and at least {MIN_CPU_SLOTS}, "
        f"on {count(cores, 'core')} here; ranks share cores"
    )


def gpu_slots_why(gpus: int) -> str:
    return f"{count(gpus, 'CUDA GPU')} visible, one rank per GPU"


# What one Python process with torch imported holds before a lab allocates anything (measured with
# bench/lab_memory.py, torch 2.13 CPU: 290 MiB for a lab's main process, 320-365 MiB for a gloo rank with
# small tensors; rounded up for the allocator's slack). GPU processes also map CUDA's libraries: not measured.
PROCESS_BASE_BYTES = 448 * 2**20
# Run-time cost model (see the module docstring). What every `python -m labs run` pays around its lab: the interpreter
# and torch import (`python -c "import torch"` 1.2-1.3 s), labs' imports and result.json (env-check, a 0.2 s probe,
# takes 1.4-1.5 s in all).
START_S = 1.3
# Each spawned rank: its own torch import and gloo group start, with the ranks sharing the cores. Measured as the step
# between 2 and 4 ranks of the same tiny run: tp-sweep 4.0 -> 6.1 s, overlap-trace 2.9 -> 4.7 s (0.9-1.05 s a rank).
RANK_START_S = 1.0
# FP32 GEMMs of a few GFLOP (tp-sweep's 256-1024 x 512 x 2048 block, overlap-trace's 512-2048 token windows) on both
# cores: 4x the default's FLOPs adds 1.3 s to tp-sweep (203 GFLOP) and 1.0 s to overlap-trace (120 GFLOP).
CPU_GEMM_FLOPS = 1.4e11
# A guess until a GPU run calibrates it; finished runs correct every estimate (app/services/jobs/queue.py).
GPU_GEMM_FLOPS = 2.0e14
# multiprocessing's resource tracker, started beside the ranks of a multi-process lab (measured 12 MiB).
TRACKER_BYTES = 16 * 2**20
# Per-job memory budget when the deployment sets none: a share of the host, capped, so one learner's lab
# cannot push the web server or another lab into the OOM killer.
DEFAULT_JOB_MEMORY_FRACTION = 0.25
DEFAULT_JOB_MEMORY_CAP = 8 * 2**30
MIB = 2**20


def _host_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


def default_job_memory_bytes() -> int:
    """COURSE_JOB_MEMORY_MB if set, else a quarter of this host's memory, at most 8 GiB."""
    raw = os.environ.get("COURSE_JOB_MEMORY_MB", "").strip()
    if re.fullmatch("[0-9]{1,12}", raw) and int(raw) > 0:
        return int(raw) * MIB
    return int(min(DEFAULT_JOB_MEMORY_CAP, _host_memory_bytes() * DEFAULT_JOB_MEMORY_FRACTION))


@dataclass(frozen=True)
class Capacity:
    """What a host (or the best node of a cluster) can give one job."""

    cpu_slots: int  # ranks a CPU job may start; they share the host's cores
    gpus: int  # GPUs one job can hold on one node (0: no GPU backend can run)
    memory_bytes: int  # the per-job memory budget the worker enforces
    cpu_why: str = ""  # the sentence behind cpu_slots, shown when a run asks for more
    gpu_why: str = ""
    gpu_name: str = ""  # e.g. "NVIDIA H100 80GB HBM3", named when a recipe cannot run on it
    # FP8 recipes Transformer Engine says this GPU cannot run, with TE's reason (labs.env probe: fp8_recipes).
    # Empty when unknown or when every recipe runs; only the `te` backend consults it.
    fp8_unsupported: dict[str, str] = field(default_factory=dict, hash=False)
    # Seconds one job may run before it is stopped (the course's COURSE_JOB_TIME_LIMIT); None: no limit known here
    # (the CLI), so no run is refused for its estimate.
    time_limit_s: float | None = None

    @classmethod
    def local(
        cls,
        *,
        gpus: int = 0,
        memory_bytes: int | None = None,
        gpu_name: str = "",
        fp8_unsupported: dict[str, str] | None = None,
    ) -> Capacity:
        """This machine: CPU slots from os.cpu_count(); GPUs as the caller found them (torch-free here)."""
        n = os.cpu_count() or 1
        return cls(
            cpu_slots=max(MIN_CPU_SLOTS, n),
            gpus=gpus,
            memory_bytes=memory_bytes if memory_bytes is not None else default_job_memory_bytes(),
            cpu_why=cpu_slots_why(n),
            gpu_why=gpu_slots_why(gpus),
            gpu_name=gpu_name,
            fp8_unsupported=dict(fp8_unsupported or {}),
        )


@dataclass(frozen=True)
class Resources:
    """What one run of a lab needs, as a function of its params and backend."""

    ranks: int  # processes that each hold a device (1 for single-process labs)
    gpus: int  # GPUs on one node (one per rank on GPU backends, 0 on cpu)
    cpus: int  # CPU slots (one per rank on cpu; one for the driving process on GPU backends)
    memory_bytes: int  # estimated peak host memory of the whole process group
    memory_note: str  # the arithmetic behind memory_bytes, in the learner's terms
    ranks_field: str | None = None  # the parameter that sets `ranks`, where errors about ranks belong
    memory_field: str | None = None  # the parameter that drives memory most, where a memory error belongs


def rank_job(
    ranks: int, backend: str, *, per_rank_bytes: int, what: str, memory_field: str, safety: float = 1.5
) -> Resources:
    """A lab of `ranks` processes started by labs/parallel/dist.py plus its launcher and the resource tracker: one
    GPU per rank on a GPU backend (the tensors live there), one CPU slot per rank on cpu, each rank holding
    about `per_rank_bytes` of host tensors (`what` says which, in the learner's terms) times `safety`."""
    gpu = backend in GPU_BACKENDS
    per_rank = 0 if gpu else per_rank_bytes
    processes = (ranks + 1) * PROCESS_BASE_BYTES + TRACKER_BYTES
    note = (
        f"{ranks} rank(s) + 1 launcher x {byte_size(PROCESS_BASE_BYTES)} + tracker {byte_size(TRACKER_BYTES)} "
        f"= {byte_size(processes)}"
    )
    if not gpu:
        note += f", + {safety} x {ranks} ranks x {byte_size(per_rank)} {what}"
    return Resources(
        ranks=ranks,
        gpus=ranks if gpu else 0,
        cpus=1 if gpu else ranks,
        memory_bytes=processes + int(safety * ranks * per_rank),
        memory_note=note,
        ranks_field="ranks",
        memory_field=memory_field,
    )


@dataclass(frozen=True)
class Problem:
    """Why a run cannot go ahead: the parameter it belongs to and a sentence that starts with its name, and where
    the refusal rests on a sum the learner may want to check, that arithmetic (`detail`, lines a page shows as a
    block of their own and the command line after the sentence)."""

    field: str
    message: str
    detail: str = ""


def no_limits(params: Any, backend: str) -> list[Problem]:
    return []


def no_fp8_recipe(params: Any, backend: str) -> str | None:
    return None
