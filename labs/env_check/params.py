"""env-check parameters and resources (torch-free: the web tier reads this through labs.catalog)."""

from __future__ import annotations

from labs.params import LabParams, Preset
from labs.resources import PROCESS_BASE_BYTES, START_S, Resources
from labs.words import byte_size


class EnvCheckParams(LabParams):
    pass


Params = EnvCheckParams  # every lab's parameters are `Params` to its own code


def resources(params: Params, backend: str) -> Resources:
    gpu = backend in ("te", "torch-cuda")
    return Resources(
        ranks=1,
        gpus=1 if gpu else 0,
        cpus=1,
        memory_bytes=PROCESS_BASE_BYTES,
        memory_note=f"one process with torch: {byte_size(PROCESS_BASE_BYTES)}",
    )


PRESETS: tuple[Preset, ...] = ()  # one run, no knobs

# The CPU probe after START_S (labs/resources.py): `python -m labs run env-check` takes 1.4-1.5 s in all there.
CPU_PROBE_S = 0.2


def estimate_seconds(params: Params, backend: str) -> float:
    """Start-up plus the capability probe (a GPU probe also initialises CUDA and imports TE)."""
    return START_S + (6.0 if backend in ("te", "torch-cuda") else CPU_PROBE_S)
