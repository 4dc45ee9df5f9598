"""What a lab declares about itself (`LabSpec`), in its own folder as `labs/<lab>/spec.py`: `SPEC = LabSpec(...)`.

Torch-free, like everything a spec names besides its runner: the web tier reads specs through labs/catalog.py to
list labs, build their forms, validate a submission, size it against a host, grade its evidence and speak of its
runs, all without importing torch. `runner` and `checks` are import paths ("module:function"), imported only when
a lab runs (`python -m labs run`) or its evidence is judged (labs/checks/).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from labs.params import LabParams, Preset
from labs.resources import GPU_BACKENDS, Capacity, Problem, Resources, no_fp8_recipe, no_limits
from labs.result_common import LabResults
from labs.timebudget import over_time_limit
from labs.words import byte_size, count


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Ask:
    """What run an evidence slot asks for, beyond being of its lab: said under the slot's run menu, and the runs
    that fit it marked. It mirrors what the lab's checks need from the slot's result, read from the run's
    parameters (a result can be megabytes; its parameters are a few fields)."""

    text: str  # "a sweep with TP 1 and at least one degree above it"
    fits: Callable[[dict], bool]  # the run's parameters, defaults filled in
    # What a fitting run's result must also show, read from its summary (a few numbers of result.json): "" when it
    # does, else why not ("it clipped nothing"). Only "Attach my latest runs" asks; the menu marks by parameters.
    shows: Callable[[dict], str] | None = None


def no_words(params: dict) -> list[str]:
    return []


@dataclass(frozen=True)
class RunWords:
    """How the lesson and report pages speak of a learner's runs of this lab (all optional: a lab without them is
    listed by its title and default settings)."""

    # What to set when running the lab so the run shows what its lesson section teaches.
    nudge: str = ""
    # A finished run in the lesson's sentences, read from that run alone: (its `results`, the `params` it ran with)
    # -> ["Your latest run: delayed scaling, ...", "The 50× spike at step 3 ..."]. Where the run lacks what the
    # section shows (no spike, one node), a sentence says so and names the preset that has it.
    sentences: Callable[[dict, dict], list[str]] | None = None
    # The parameters that tell one run from another, always said, and how they are said (params with defaults).
    key_params: tuple[str, ...] = ()
    params_words: Callable[[dict], list[str]] = no_words
    # What each evidence slot kind (evidence, fallback, stretch) of a lesson asks of a run of this lab.
    asks: Mapping[str, Ask] = field(default_factory=dict)


@dataclass(frozen=True)
class LabSpec:
    """One lab as the app and `python -m labs` see it: what it asks, what it takes, what it needs and costs, where
    its runner and checks are, its test runs, and how the pages speak of its runs."""

    name: str  # the lab's URL word; its folder is the name with "_" for "-" (tp-sweep: labs/tp_sweep/)
    # Where the lab stands on pages and in `python -m labs list`: ascending, ties by name. Steps of ten leave room
    # for a new lab between two others without renumbering them.
    order: int
    title: str
    question: str  # the one question the lab answers, shown on its page
    params: type[LabParams]
    result: type[LabResults]  # the `results` block of its result.json (labs.result_schema wraps the envelope)
    backends: tuple[str, ...]  # backends with a real path; others fall back (see `backend_for`)
    runner: str  # "module:function", imported only where the lab runs
    # "module:function" of the grader's automatic checks (labs/checks/common.py LabChecks): torch-free, and judging
    # by tolerances from the lab's own code, never from the result it judges (an uploaded result.json says anything).
    checks: str
    needs: Callable[[Any, str], Resources]  # resources(params, backend)
    limits: Callable[[Any, str], list[Problem]] = field(default=no_limits)  # lab rules beyond the Params bounds
    # The FP8 recipe a run hands to Transformer Engine on `backend` (None: it runs no TE FP8), and the
    # parameter that chooses it: a recipe this GPU cannot run is refused up front, naming GPU and reason.
    fp8_recipe: Callable[[Any, str], str | None] = field(default=no_fp8_recipe)
    fp8_recipe_field: str = "recipe"
    # Whether a run with these params does FP8 arithmetic at all (TE's kernels or emulated): the honesty label
    # says so from the first progress line, and a run without any claims none.
    uses_fp8: Callable[[Any], bool] = field(default=lambda params: True)
    # Named runs the lesson's pauses ask for ("Spike at step 20"), shown on the form as one-click prefills.
    presets: tuple[Preset, ...] = ()
    # Seconds a run of these params takes on `backend`, start-up included, from the lab's cost model (calibrated
    # on a 2-core CPU; GPU figures are guesses): a first run's estimate, which finished runs then correct
    # (app/services/jobs/queue.py scales it by how long this lab's recent runs took against their own estimates).
    cost: Callable[[Any, str], float] = field(default=lambda params, backend: 30.0)
    # Test runs. `tiny`: the smallest run that still exercises every field the checks read, the params of the golden
    # bundle in the lab's folder (golden/, what `python -m tests.app.labruns` writes) and of the app tests' real runs.
    # `small`: a run that finishes in seconds on a shared 2-core machine and still takes every code path, the one
    # the lab's own tests read (tests/labs/runs.py; None: the tiny run).
    tiny: Mapping[str, Any] = field(default_factory=dict)
    small: Mapping[str, Any] | None = None
    # A two-rank run on NCCL that scripts/gpu-check.sh makes on a machine with two GPUs (None: its gpu-marked tests
    # or another step of the check cover the lab).
    nccl_run: Mapping[str, Any] | None = None
    # How the lesson and report pages speak of its runs (labs/<lab>/describe.py where a lab has it).
    words: RunWords = field(default_factory=RunWords)

    def estimate_seconds(self, params: LabParams, backend: str) -> float:
        return max(1.0, float(self.cost(params, backend)))

    def preset(self, key: str) -> Preset:
        """The preset called `key` (its URL word); KeyError naming the lab's presets otherwise."""
        for p in self.presets:
            if p.key == key:
                return p
        known = ", ".join(p.key for p in self.presets) or "none"
        raise KeyError(f"{self.name} has no preset {key!r}; presets: {known}")

    def resources(self, params: LabParams, backend: str) -> Resources:
        return self.needs(params, backend)

    def backend_for(self, backend: str) -> str:
        """The backend this lab really runs when `backend` (already resolved, not auto) is asked for.

        A lab without a TE path runs plain PyTorch on the GPU when `te` is asked for, and says so in
        its result; anything else it lacks falls back to the CPU.
        """
        if backend in self.backends:
            return backend
        if backend == "te" and "torch-cuda" in self.backends:
            return "torch-cuda"
        return "cpu"

    def problems(self, params: LabParams, backend: str, capacity: Capacity) -> list[Problem]:
        """Every reason this run cannot go ahead on `capacity`, each naming its field; [] when it can."""
        out = list(self.limits(params, backend))
        need = self.resources(params, backend)
        rf = need.ranks_field or "backend"
        if backend in GPU_BACKENDS:
            if capacity.gpus == 0:
                out.append(
                    Problem(
                        "backend",
                        f"backend: {backend} needs a GPU and none is available "
                        f"({capacity.gpu_why or 'no GPU'}); choose cpu",
                    )
                )
            elif need.gpus > capacity.gpus:
                out.append(
                    Problem(
                        rf,
                        f"{rf}: {need.ranks} ranks need {need.gpus} GPUs on one node but "
                        f"{capacity.gpu_why or count(capacity.gpus, 'GPU') + ' available'}; "
                        f"use {rf} <= {capacity.gpus}",
                    )
                )
        elif need.ranks > capacity.cpu_slots:
            out.append(
                Problem(
                    rf,
                    f"{rf}: {need.ranks} ranks need {need.ranks} CPU slots but this machine has "
                    f"{capacity.cpu_why or capacity.cpu_slots}; use {rf} <= {capacity.cpu_slots}",
                )
            )
        recipe = self.fp8_recipe(params, backend) if backend == "te" else None
        if recipe is not None and recipe in capacity.fp8_unsupported:
            f = self.fp8_recipe_field
            runs = [r for r in ("delayed", "current", "block", "mxfp8") if r not in capacity.fp8_unsupported]
            out.append(
                Problem(
                    f,
                    f"{f}: {recipe} cannot run on this GPU ({capacity.gpu_name or 'unnamed'}) with Transformer "
                    f"Engine: {capacity.fp8_unsupported[recipe].rstrip('.')}; it runs "
                    f"{', '.join(runs) if runs else 'no FP8 recipe'} there (backend torch-cuda emulates any recipe)",
                )
            )
        if capacity.time_limit_s is not None:
            late = over_time_limit(params, backend, estimate=self.estimate_seconds, limit_s=capacity.time_limit_s)
            out += [late] if late else []
        if need.memory_bytes > capacity.memory_bytes:
            mf = need.memory_field or "params"
            out.append(
                Problem(
                    mf,
                    f"{mf}: this run needs about {byte_size(need.memory_bytes)} of memory "
                    f"({need.memory_note}), over the per-job budget of {byte_size(capacity.memory_bytes)}; "
                    f"make the run smaller",
                )
            )
        return out

    def load_runner(self) -> Callable[[Any, Any], dict]:
        return _load(self.runner)

    def load_checks(self) -> Callable[[str, dict, Any], list[dict]]:
        return _load(self.checks)
