"""Capability detection: what this machine can run, checked once, with the reasons kept.

The report answers the lab's first evidence item: device, compute capability, library
versions, which FP8 recipes are supported (and why not), and which backend a lab would
use together with its honesty label.
"""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from typing import Any

from labs.resources import BACKENDS  # noqa: E402,F401  (best first)

# Without Transformer Engine nothing can run FP8 kernels; the table only words the reason. It follows TE's
# own checks (transformer_engine/pytorch/quantization.py @ v2.9 and main): per-tensor FP8 needs Ada/Hopper
# (8.9+), the 1x128/128x128 block recipe 9.0+ with CUDA >= 12.9, MXFP8 Blackwell (10.0+; not 12.x yet).
RECIPE_MIN_CC = {
    "delayed": (8, 9),
    "current": (8, 9),
    "block": (9, 0),
    "mxfp8": (10, 0),
}
RECIPE_MIN_CUDA = {"block": (12, 9)}
# Block scaling by TE version (transformer_engine/pytorch/fp8.py @ v2.3 and v2.8 `check_fp8_block_scaling_support`:
# 9.0 <= cc < 10.0, "requires Hopper"; quantization.py @ v2.9 and main: cc >= 9.0). From 2.9 a Blackwell GPU runs it
# emulated through MXFP8 with power-of-two scales (v2.9 pytorch/csrc/extensions/gemm.cpp "Emulate the FP8 block
# scaling recipe with MXFP8 on Blackwell and newer"; common/transpose/quantize_transpose_vector_blockwise.cu).
BLOCK_ON_BLACKWELL_TE = (2, 9)


def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    if not version:
        return None
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            return None
        parts.append(int(digits))
    return tuple(parts)


def block_scaling_note(cc: tuple[int, int] | None, te_version: str | None) -> str | None:
    """How the 1x128/128x128 block recipe runs on this GPU, where that is not plain Hopper: emulated through MXFP8
    on Blackwell from TE 2.9, refused there by TE 2.3-2.8 (Hopper only). None on Hopper or without a GPU."""
    if cc is None or cc < (10, 0):
        return None
    te = _version_tuple(te_version)
    if te is not None and te < BLOCK_ON_BLACKWELL_TE:
        return (
            f"Transformer Engine {te_version} runs block scaling on Hopper only (2.3-2.8); from 2.9 a Blackwell GPU "
            "runs it emulated through MXFP8"
        )
    return "on Blackwell, Transformer Engine 2.9+ runs block scaling emulated through MXFP8 (power-of-two scales)"


def is_mig(device_name: str | None) -> bool:
    """A MIG instance: CUDA names it "<GPU> MIG <profile>" (e.g. "NVIDIA H100 80GB HBM3 MIG 1g.10gb")."""
    return bool(device_name) and " MIG " in f" {device_name} "


MIG_LIMITS = (
    "a MIG instance has no NVLink or CUDA IPC to other instances, and CUPTI (which the profiler's kernel trace "
    "needs) is not supported on shared compute instances"
)


def empty_profile_reason(device_name: str | None) -> str:
    """Why a GPU profile came back without kernels, for the sentence a lab shows beside the empty trace."""
    if is_mig(device_name):
        return f"the profile recorded no GPU kernels: {MIG_LIMITS}, so run the profiling labs on a whole GPU"
    return (
        "the profile recorded no GPU kernels: CUPTI may be unavailable to this process (another profiler attached, "
        "or a driver that restricts GPU performance counters to administrators)"
    )


# Where Transformer Engine answers "can this GPU run recipe X, and if not why", per recipe:
# (TE >= 2.9 name, exported by transformer_engine.pytorch; TE 2.0-2.8 name in transformer_engine.pytorch.fp8).
# Checked against: transformer_engine/pytorch/quantization.py @ v2.9 and main (is_fp8_available,
# is_mxfp8_available, is_fp8_block_scaling_available, each with return_reason=True -> (bool, str)), and
# transformer_engine/pytorch/fp8.py @ v2.0, v2.3, v2.8 (check_fp8_support, check_mxfp8_support, and
# check_fp8_block_scaling_support from v2.3 on, each returning (bool, str)). From v2.9 fp8.py is a deprecated
# leftover module that transformer_engine.pytorch no longer imports, so the old names are looked up only as a
# fallback.
TE_SUPPORT_CHECKS = {
    "delayed": ("is_fp8_available", "check_fp8_support"),
    "current": ("is_fp8_available", "check_fp8_support"),
    "block": ("is_fp8_block_scaling_available", "check_fp8_block_scaling_support"),
    "mxfp8": ("is_mxfp8_available", "check_mxfp8_support"),
}
# The recipe class each lab recipe builds (transformer_engine/common/recipe/__init__.py): DelayedScaling and
# MXFP8BlockScaling exist from v2.0, Float8CurrentScaling from v2.2, Float8BlockScaling from v2.3.
TE_RECIPE_CLASSES = {
    "delayed": "DelayedScaling",
    "current": "Float8CurrentScaling",
    "block": "Float8BlockScaling",
    "mxfp8": "MXFP8BlockScaling",
}


def _guarded_te() -> tuple[Any | None, str | None]:
    """Import Transformer Engine if it is installed; return (module, reason-if-not)."""
    try:
        import transformer_engine.pytorch as te  # noqa: F401  (optional extra "gpu")
    except Exception as exc:  # ImportError, or a CUDA library mismatch at import
        return None, f"Transformer Engine is not importable ({type(exc).__name__}: {exc})"
    return te, None


def _te_version(te: Any) -> str | None:
    try:
        import transformer_engine

        return getattr(transformer_engine, "__version__", None) or getattr(te, "__version__", None)
    except Exception:
        return getattr(te, "__version__", None)


def _te_recipe_module() -> Any | None:
    try:
        from transformer_engine.common import recipe

        return recipe
    except Exception:
        return None


def te_support(te: Any, recipe_module: Any | None, version: str | None) -> dict[str, dict]:
    """Ask Transformer Engine itself whether each recipe runs on this GPU, and why not.

    The new API (`te.is_*_available(return_reason=True)`) is preferred; the old `te.fp8.check_*` only
    where the new one is missing. A recipe whose class this TE lacks is unsupported with that reason.
    """
    legacy = getattr(te, "fp8", None)
    out: dict[str, dict] = {}
    for name, (new_fn, old_fn) in TE_SUPPORT_CHECKS.items():
        cls = TE_RECIPE_CLASSES[name]
        if recipe_module is not None and not hasattr(recipe_module, cls):
            out[name] = {
                "supported": False,
                "reason": f"Transformer Engine {version or '(unknown version)'} has no {cls} recipe "
                "(Float8CurrentScaling arrived in 2.2, Float8BlockScaling in 2.3)",
            }
            continue
        fn = getattr(te, new_fn, None)
        try:
            if fn is not None:
                ok, reason = fn(return_reason=True)
            elif (fn := getattr(legacy, old_fn, None)) is not None:
                ok, reason = fn()
            else:
                out[name] = {
                    "supported": False,
                    "reason": f"Transformer Engine {version or ''} offers neither {new_fn} nor fp8.{old_fn}",
                }
                continue
        except Exception as exc:  # a TE that fails its own check: keep the reason readable
            ok, reason = False, f"{new_fn} failed: {type(exc).__name__}: {exc}"
        out[name] = {"supported": bool(ok), "reason": None if ok else (reason or "unsupported by Transformer Engine")}
    return out


def _recipe_support(
    cc: tuple[int, int] | None, cuda: str | None, te: Any, te_reason: str | None, te_version: str | None = None
) -> dict[str, dict]:
    if te is not None and cc is not None:
        asked = te_support(te, _te_recipe_module(), te_version)
        note = block_scaling_note(cc, te_version)
        if note and "block" in asked and not asked["block"]["supported"]:
            asked["block"]["reason"] = f"{asked['block']['reason']}; {note}"
        return asked
    out: dict[str, dict] = {}
    cuda_v = tuple(int(x) for x in cuda.split(".")[:2]) if cuda else None
    for name, need in RECIPE_MIN_CC.items():
        need_cuda = RECIPE_MIN_CUDA.get(name)
        if cc is None:
            out[name] = {"supported": False, "reason": "no CUDA GPU: FP8 is emulated on CPU instead"}
        elif cc < need:
            out[name] = {
                "supported": False,
                "reason": f"needs compute capability {need[0]}.{need[1]}+, this GPU is {cc[0]}.{cc[1]}",
            }
        elif name == "block" and (note := block_scaling_note(cc, None)):
            out[name] = {"supported": False, "reason": f"{te_reason or 'Transformer Engine missing'}; {note}"}
        elif need_cuda and cuda_v is not None and cuda_v < need_cuda:
            out[name] = {
                "supported": False,
                "reason": f"needs CUDA {need_cuda[0]}.{need_cuda[1]}+, this PyTorch is built with CUDA {cuda}",
            }
        else:
            out[name] = {"supported": False, "reason": te_reason or "Transformer Engine missing"}
    return out


def honesty_label(backend: str, device_name: str | None, *, collectives: bool = True, fp8: bool = True) -> str:
    """The sentence every page and result.json shows about how numbers were produced.

    `collectives`: whether the run talks between ranks (gloo on CPU, NCCL on GPUs); a one-process lab
    does not, and its label does not claim it. `fp8`: whether the run does FP8 arithmetic at all; a run
    without it (overlap-trace, tp-sweep with its FP8 GEMMs off) does not claim FP8 numerics, emulated or not.
    A CPU run always says it is a CPU emulation whose timings are not GPU measurements.
    """
    if backend == "cpu":
        if fp8:
            what = "FP8 numerics are emulated in software with Transformer Engine's semantics" + (
                " and collectives run on gloo" if collectives else ""
            )
        elif collectives:
            what = "each rank is a CPU process standing in for a GPU and collectives run on gloo (no FP8 in this run)"
        else:
            what = "one CPU process stands in for the GPU (no FP8 in this run)"
        return f"CPU emulation: {what}; timings are CPU timings, not GPU measurements."
    if backend == "torch-cuda":
        measured = f"Measured on GPU ({device_name}) with plain PyTorch" + (" and NCCL" if collectives else "")
        if not fp8:
            return measured + " (no FP8 in this run)."
        return measured + ": FP8 numerics are emulated in software, not run on Transformer Engine's FP8 kernels."
    if not fp8:
        return f"Measured on GPU ({device_name}) with Transformer Engine modules in BF16 (no FP8 in this run)" + (
            " and NCCL." if collectives else "."
        )
    return f"Measured on GPU ({device_name}) with Transformer Engine FP8 kernels" + (
        " and NCCL." if collectives else "."
    )


def relabel(environment: dict, *, fp8: bool, collectives: bool) -> None:
    """Word `environment` (result.json's block, from `environment_for`) for what this run really did: a lab calls
    it once it knows from its parameters whether the run does FP8 arithmetic at all."""
    backend = environment["backend"]
    environment["label"] = honesty_label(backend, environment["device"].get("name"), collectives=collectives, fp8=fp8)
    if fp8:
        environment["fp8_numerics"] = "transformer_engine" if backend == "te" else "emulated"
    else:
        environment.pop("fp8_numerics", None)  # no FP8 arithmetic was done, neither by TE nor emulated


@lru_cache(maxsize=1)
def probe() -> dict:
    """Capability report as a JSON-ready dict (cached: detection runs once per process)."""
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    device: dict[str, Any] = {"type": "cuda" if cuda else "cpu"}
    cc = None
    if cuda:
        props = torch.cuda.get_device_properties(0)
        cc = (props.major, props.minor)
        device.update(
            name=props.name,
            compute_capability=f"{cc[0]}.{cc[1]}",
            memory_gib=round(props.total_memory / 2**30, 1),
            count=torch.cuda.device_count(),
        )
    else:
        device.update(name=platform.processor() or platform.machine(), compute_capability=None)
    device["cpu_count"] = os.cpu_count()

    te, te_reason = _guarded_te() if cuda else (None, "no CUDA GPU, so Transformer Engine is not used")
    nccl = None
    if cuda and dist.is_nccl_available():
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:
            nccl = None
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformer_engine": _te_version(te) if te is not None else None,
        "nccl": nccl,
    }
    recipes = _recipe_support(cc, torch.version.cuda, te, te_reason, versions["transformer_engine"])
    if te is not None and recipes["delayed"]["supported"]:
        backend = "te"
    elif cuda:
        backend = "torch-cuda"
    else:
        backend = "cpu"
    return {
        "device": device,
        "versions": versions,
        "transformer_engine": {"available": te is not None, "reason": te_reason},
        "distributed": {
            "gloo": dist.is_gloo_available(),
            "nccl": bool(cuda and dist.is_nccl_available()),
        },
        "fp8_recipes": recipes,
        "backend": backend,
        "label": honesty_label(backend, device.get("name")),
    }


def available_backends(report: dict | None = None) -> list[str]:
    report = report or probe()
    out = ["cpu"]
    if report["device"]["type"] == "cuda":
        out.insert(0, "torch-cuda")
        if report["transformer_engine"]["available"]:
            out.insert(0, "te")
    return out


def resolve_backend(requested: str, report: dict | None = None) -> str:
    """Map --backend (auto|te|torch-cuda|cpu) to one that can run here, or raise ValueError."""
    report = report or probe()
    if requested == "auto":
        return report["backend"]
    if requested not in BACKENDS:
        raise ValueError(f"backend: got {requested!r}, expected one of auto, {', '.join(BACKENDS)}")
    have = available_backends(report)
    if requested not in have:
        why = report["transformer_engine"]["reason"] if requested == "te" else "no CUDA GPU is visible"
        raise ValueError(f"backend: {requested!r} is not available here ({why}); available: {', '.join(have)}")
    return requested


def environment_for(backend: str, report: dict | None = None, *, collectives: bool = True, fp8: bool = True) -> dict:
    """The `environment` block of result.json for a run on `backend`.

    `emulated` keeps its meaning for the app: the run is a CPU emulation. `fp8_numerics` says how FP8
    arithmetic was done: by Transformer Engine's kernels, or emulated in software (cpu and torch-cuda); it is
    left out for a run without FP8 (`fp8=False`, or a lab's `relabel` once it knows its parameters).
    """
    report = dict(report or probe())
    report["backend"] = backend
    report["emulated"] = backend == "cpu"
    relabel(report, fp8=fp8, collectives=collectives)
    return report


def unsupported_recipes(report: dict) -> dict[str, str]:
    """{recipe: why} for the FP8 recipes this GPU cannot run with Transformer Engine (empty without a GPU)."""
    if report["device"]["type"] != "cuda":
        return {}
    return {
        name: v["reason"] or "unsupported"
        for name, v in report.get("fp8_recipes", {}).items()
        if not v.get("supported")
    }
