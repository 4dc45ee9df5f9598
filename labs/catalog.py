"""The lab catalog: every lab's `LabSpec`, found in its folder; the single contract between the app and the labs.

Torch-free on purpose. The web tier imports this module to list labs, build their forms, validate a
submission, check it against what a host can give one job, and (in the distributed mode) ask Ray for
the right resources, all without importing torch. Each spec names its runner and its checks by import path;
only `load_runner()`, called by `python -m labs run` where the lab actually runs, imports the runner.

    from labs import catalog
    catalog.names()                                        # ["env-check", "fp8-step", ...], in page order
    spec = catalog.get("tp-sweep")
    params = spec.params.model_validate({"degrees": [1, 2]})
    spec.resources(params, "cpu")                          # ranks, GPUs, CPU slots, memory, with the arithmetic
    spec.problems(params, "cpu", catalog.Capacity.local())  # [] or [Problem(field, message), ...]
    catalog.folder("tp-sweep")                             # labs/tp_sweep: its spec, checks and golden bundle

The catalog holds no list of labs: a lab is a folder `labs/<lab>/` with a `spec.py` whose `SPEC` is a
`labs.spec.LabSpec`, found by looking (docs/architecture.md, "Add a lab", walks through one). Labs are listed
by `SPEC.order`, then name.

COURSE_LAB_PATH names more folders to look in (os.pathsep-separated, like PYTHONPATH), each holding lab folders
written as if they were under labs/: its labs join the catalog as `labs.<folder>` packages. It is the operator's
setting, read from the environment of the process at start-up (web server, worker and `python -m labs run`
alike, which inherit it); nothing a web user sends reaches it.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import labs
from labs.resources import (  # noqa: F401  (re-exported: the catalog's vocabulary)
    BACKEND_CHOICES,
    BACKENDS,
    GPU_BACKENDS,
    Capacity,
    Problem,
    Resources,
    no_fp8_recipe,
    no_limits,
)
from labs.spec import Ask, LabSpec, RunWords  # noqa: F401  (re-exported: what a lab's spec.py builds)

LAB_PATH_ENV = "COURSE_LAB_PATH"
HOME = Path(labs.__file__).parent  # the labs that ship with the course


def extra_dirs() -> list[Path]:
    """The folders COURSE_LAB_PATH names, in its order (empty when it is unset)."""
    raw = os.environ.get(LAB_PATH_ENV, "")
    return [Path(p).resolve() for p in raw.split(os.pathsep) if p.strip()]


def _discover() -> tuple[dict[str, LabSpec], dict[str, Path]]:
    for extra in extra_dirs():
        if not extra.is_dir():
            raise RuntimeError(f"{LAB_PATH_ENV}: {extra} is not a folder (it names folders that hold lab folders)")
        if str(extra) not in labs.__path__:
            labs.__path__.append(str(extra))  # its lab folders import as labs.<folder>, like the course's own
    found: list[tuple[LabSpec, Path]] = []
    taken: dict[str, Path] = {}  # names that import from an earlier folder: labs.<name> is already that
    for entry in map(Path, labs.__path__):
        here = sorted(entry.iterdir())
        for folder in here:
            if not (folder / "spec.py").is_file():
                continue  # numerics/, parallel/, trace/, checks/: shared code, not labs
            if folder.name in taken:
                raise ValueError(f"{folder}: labs.{folder.name} is already {taken[folder.name]}; rename the folder")
            spec = importlib.import_module(f"labs.{folder.name}.spec").SPEC
            if not isinstance(spec, LabSpec):
                raise TypeError(f"{folder / 'spec.py'}: SPEC is a {type(spec).__name__}, expected a labs.spec.LabSpec")
            if spec.name.replace("-", "_") != folder.name:
                raise ValueError(
                    f"{folder / 'spec.py'}: lab {spec.name!r} lives in folder {folder.name!r}; "
                    f"name the folder {spec.name.replace('-', '_')!r}"
                )
            found.append((spec, folder))
        taken.update((p.stem if p.suffix == ".py" else p.name, p) for p in here)
    found.sort(key=lambda sf: (sf[0].order, sf[0].name))
    return {s.name: s for s, _ in found}, {s.name: f for s, f in found}


LABS: dict[str, LabSpec]
_FOLDERS: dict[str, Path]
LABS, _FOLDERS = _discover()


def names() -> list[str]:
    return list(LABS)


def get(name: str) -> LabSpec:
    """The spec; KeyError (with the known names) for an unknown lab."""
    try:
        return LABS[name]
    except KeyError:
        raise KeyError(f"unknown lab {name!r}; labs: {', '.join(LABS)}") from None


def folder(name: str) -> Path:
    """The lab's folder: labs/<lab>/ for the course's own labs, or under a COURSE_LAB_PATH folder."""
    get(name)
    return _FOLDERS[name]


def ships_with_course(name: str) -> bool:
    """Whether the lab is one of labs/'s own (not found through COURSE_LAB_PATH)."""
    return folder(name).parent == HOME


def check_runners() -> dict[str, str]:
    """Import every lab's runner; {lab: reason} for each that fails (empty when all import).

    This imports torch, so the web tier calls it through `python -m labs check` in a subprocess.
    """
    failures = {}
    for spec in LABS.values():
        try:
            spec.load_runner()
        except Exception as exc:  # any import-time error is a broken lab, reported with its reason
            failures[spec.name] = f"{type(exc).__name__}: {exc}"
    return failures
