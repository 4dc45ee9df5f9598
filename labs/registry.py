"""Which labs exist. Modules are imported lazily so `probe` stays quick."""

from __future__ import annotations

import importlib
from types import ModuleType

LAB_MODULES = {
    "env-check": "labs.env_check",
    "fp8-step": "labs.fp8_step",
    "tp-sweep": "labs.tp_sweep",
    "overlap-trace": "labs.overlap_trace",
}


def lab_names() -> list[str]:
    return [name for name in LAB_MODULES if available(name)]


def available(name: str) -> bool:
    try:
        load(name)
    except (KeyError, ModuleNotFoundError):
        return False
    return True


def load(name: str) -> ModuleType:
    """Return the lab module; KeyError for an unknown name."""
    return importlib.import_module(LAB_MODULES[name])
