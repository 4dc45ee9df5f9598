"""The lab catalog: one `LabSpec` per lab, the single contract between the app and the labs.

Torch-free on purpose. The web tier imports this module to list labs, build their forms, validate a
submission, check it against what a host can give one job, and (in the distributed mode) ask Ray for
the right resources, all without importing torch. Each spec names its runner by import path; only
`load_runner()`, called by `python -m labs run` where the lab actually runs, imports it.

    from labs import catalog
    spec = catalog.get("tp-sweep")
    params = spec.params.model_validate({"degrees": [1, 2]})
    spec.resources(params, "cpu")                          # ranks, GPUs, CPU slots, memory, with the arithmetic
    spec.problems(params, "cpu", catalog.Capacity.local())  # [] or [Problem(field, message), ...]

A new lab is a folder `labs/<name>/` with `params.py` (torch-free: `Params`, whose fields carry a `title` in
words for the form's label, a `description` for its hint and `json_schema_extra={"group": ...}` naming the
form's fieldset, with `"advanced": True` for a rare knob folded under "More settings"; `resources`, `limits`),
`result.py` (torch-free: the model of its `results` in result.json) and `run.py` (`run(params, ctx) ->
dict`, with its page layout in `report.py`), plus one entry in `LABS` below. Then regenerate the
result schema: `python -m labs schema`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from labs.params import LabParams, Preset
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
from labs.result_common import LabResults
from labs.timebudget import over_time_limit
from labs.words import byte_size, count


@dataclass(frozen=True)
class LabSpec:
    name: str
    title: str
    question: str  # the one question the lab answers, shown on its page
    params: type[LabParams]
    result: type[LabResults]  # the `results` block of its result.json (labs.result_schema wraps the envelope)
    backends: tuple[str, ...]  # backends with a real path; others fall back (see `backend_for`)
    runner: str  # "module:function", imported only where the lab runs
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
        module, _, fn = self.runner.partition(":")
        return getattr(importlib.import_module(module), fn)


def _specs() -> dict[str, LabSpec]:
    from labs.collectives import params as collectives
    from labs.collectives.result import CollectivesResults
    from labs.context_parallel import params as context_parallel
    from labs.context_parallel.result import ContextParallelResults
    from labs.env_check import params as env_check
    from labs.env_check.result import EnvCheckResults
    from labs.fp8_step import params as fp8_step
    from labs.fp8_step.result import Fp8StepResults
    from labs.overlap_trace import params as overlap_trace
    from labs.overlap_trace.result import OverlapTraceResults
    from labs.pipeline import params as pipeline
    from labs.pipeline.result import PipelineResults
    from labs.tp_sweep import params as tp_sweep
    from labs.tp_sweep.result import TpSweepResults
    from labs.zero_fsdp import params as zero_fsdp
    from labs.zero_fsdp.result import ZeroFsdpResults

    specs = [
        LabSpec(
            name="env-check",
            title="Check my lab environment",
            question="Which backend, FP8 recipes and library versions will my labs run with here?",
            params=env_check.Params,
            result=EnvCheckResults,
            backends=BACKENDS,
            runner="labs.env_check.run:run",
            needs=env_check.resources,
            presets=env_check.PRESETS,
            cost=env_check.estimate_seconds,
        ),
        LabSpec(
            name="fp8-step",
            title="FP8 training step: BF16 reference vs an FP8 recipe",
            question="Does an FP8 recipe train like BF16, and what do its scales do when an activation spikes?",
            params=fp8_step.Params,
            result=Fp8StepResults,
            backends=BACKENDS,
            runner="labs.fp8_step.run:run",
            needs=fp8_step.resources,
            presets=fp8_step.PRESETS,
            cost=fp8_step.estimate_seconds,
            limits=fp8_step.limits,
            fp8_recipe=fp8_step.te_recipe_name,
        ),
        LabSpec(
            name="tp-sweep",
            title="Tensor-parallel sweep: local GEMMs, collectives and over-sharding",
            question="As the TP degree grows, when does collective time overtake the GEMM time it saves?",
            params=tp_sweep.Params,
            result=TpSweepResults,
            backends=("te", "torch-cuda", "cpu"),  # te: the te.Linear block beside the Megatron one
            runner="labs.tp_sweep.run:run",
            needs=tp_sweep.resources,
            presets=tp_sweep.PRESETS,
            cost=tp_sweep.estimate_seconds,
            limits=tp_sweep.limits,
            fp8_recipe=tp_sweep.te_recipe_name,
            uses_fp8=lambda params: params.fp8,  # FP8 GEMMs only when asked for
        ),
        LabSpec(
            name="overlap-trace",
            title="Overlap trace: async all-gather, the overlap window, and a dependency that forbids it",
            question="How much of an all-gather can independent work hide, and what must wait for it?",
            params=overlap_trace.Params,
            result=OverlapTraceResults,
            backends=("torch-cuda", "cpu"),
            runner="labs.overlap_trace.run:run",
            needs=overlap_trace.resources,
            presets=overlap_trace.PRESETS,
            cost=overlap_trace.estimate_seconds,
            limits=overlap_trace.limits,
            uses_fp8=lambda params: False,  # all-gathers and plain GEMMs: no FP8 anywhere
        ),
        LabSpec(
            name="collectives",
            title="Collectives: bandwidth, the α-β model, and what crossing a node costs",
            question="How long does each collective take as messages grow, and what does crossing a node boundary cost?",
            params=collectives.Params,
            result=CollectivesResults,
            backends=("torch-cuda", "cpu"),
            runner="labs.collectives.run:run",
            needs=collectives.resources,
            presets=collectives.PRESETS,
            cost=collectives.estimate_seconds,
            limits=collectives.limits,
            uses_fp8=lambda params: False,  # collectives of FP32 buffers: no FP8 anywhere
        ),
        LabSpec(
            name="zero-fsdp",
            title="DDP, ZeRO-1 and FSDP2: what each rank holds and moves",
            question="How much memory does each rank save by sharding, and how many more bytes does it send per step?",
            params=zero_fsdp.Params,
            result=ZeroFsdpResults,
            backends=("torch-cuda", "cpu"),
            runner="labs.zero_fsdp.run:run",
            needs=zero_fsdp.resources,
            presets=zero_fsdp.PRESETS,
            cost=zero_fsdp.estimate_seconds,
            limits=zero_fsdp.limits,
            uses_fp8=lambda params: False,  # FP32 training throughout: no FP8 anywhere
        ),
        LabSpec(
            name="pipeline",
            title="Pipeline schedules: GPipe, 1F1B, interleaved and zero-bubble on real stages",
            question="Where does a pipeline idle, and what do 1F1B, interleaving and zero-bubble buy against GPipe?",
            params=pipeline.Params,
            result=PipelineResults,
            backends=("torch-cuda", "cpu"),
            runner="labs.pipeline.run:run",
            needs=pipeline.resources,
            presets=pipeline.PRESETS,
            cost=pipeline.estimate_seconds,
            limits=pipeline.limits,
            uses_fp8=lambda params: False,  # FP32 layers and p2p sends: no FP8 anywhere
        ),
        LabSpec(
            name="context-parallel",
            title="Context parallelism: ring attention, a zig-zag split, and an all-to-all over heads",
            question="How do ranks share the attention of one long sequence, and what does a causal mask do to their work?",
            params=context_parallel.Params,
            result=ContextParallelResults,
            backends=("torch-cuda", "cpu"),
            runner="labs.context_parallel.run:run",
            needs=context_parallel.resources,
            presets=context_parallel.PRESETS,
            cost=context_parallel.estimate_seconds,
            limits=context_parallel.limits,
            uses_fp8=lambda params: False,  # FP32 attention and p2p sends: no FP8 anywhere
        ),
    ]
    return {s.name: s for s in specs}


LABS: dict[str, LabSpec] = _specs()


def names() -> list[str]:
    return list(LABS)


def get(name: str) -> LabSpec:
    """The spec; KeyError (with the known names) for an unknown lab."""
    try:
        return LABS[name]
    except KeyError:
        raise KeyError(f"unknown lab {name!r}; labs: {', '.join(LABS)}") from None


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
