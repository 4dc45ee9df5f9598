"""Capability detection: what this machine can run, checked once, with the reasons kept.

The report answers the lab's first evidence item: device, compute capability, library
versions, which FP8 recipes are supported (and why not), and which backend a lab would
use together with its honesty label.
"""

from __future__ import annotations

import platform
from functools import lru_cache
from typing import Any

from labs.resources import BACKENDS  # noqa: E402,F401  (best first)

# Minimum compute capability per recipe, as Transformer Engine documents them:
# per-tensor FP8 needs Ada/Hopper (8.9+), MXFP8 needs Blackwell (10.0+), and the
# 1x128/128x128 block recipe is a Hopper-generation recipe (9.0+).
RECIPE_MIN_CC = {
    "delayed": (8, 9),
    "current": (8, 9),
    "block": (9, 0),
    "mxfp8": (10, 0),
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


def _recipe_support(cc: tuple[int, int] | None, te: Any, te_reason: str | None) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for name, need in RECIPE_MIN_CC.items():
        if cc is None:
            out[name] = {"supported": False, "reason": "no CUDA GPU: FP8 is emulated on CPU instead"}
        elif cc < need:
            out[name] = {
                "supported": False,
                "reason": f"needs compute capability {need[0]}.{need[1]}+, this GPU is {cc[0]}.{cc[1]}",
            }
        elif te is None:
            out[name] = {"supported": False, "reason": te_reason or "Transformer Engine missing"}
        else:
            out[name] = {"supported": True, "reason": None}
    if te is not None and cc is not None:
        # Ask TE itself where it can answer; its verdict wins over our table.
        checks = {
            "delayed": "check_fp8_support",
            "current": "check_fp8_support",
            "block": "check_fp8_block_scaling_support",
            "mxfp8": "check_mxfp8_support",
        }
        for name, fn_name in checks.items():
            fn = getattr(getattr(te, "fp8", None), fn_name, None)
            if fn is None:
                continue
            try:
                ok, reason = fn()
            except Exception as exc:  # older TE signatures
                ok, reason = False, f"{fn_name} failed: {exc}"
            out[name] = {"supported": bool(ok), "reason": None if ok else (reason or "unsupported")}
    return out


def honesty_label(backend: str, device_name: str | None) -> str:
    """The sentence every page and result.json shows about how numbers were produced."""
    if backend == "cpu":
        return (
            "CPU emulation: FP8 numerics are emulated in software with Transformer Engine's "
            "semantics and collectives run on gloo; timings are CPU timings, not GPU measurements."
        )
    if backend == "torch-cuda":
        return f"Measured on GPU ({device_name}) with plain PyTorch: no Transformer Engine FP8 kernels."
    return f"Measured on GPU ({device_name}) with Transformer Engine FP8 kernels and NCCL."


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
    import os

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
    recipes = _recipe_support(cc, te, te_reason)
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


def environment_for(backend: str, report: dict | None = None) -> dict:
    """The `environment` block of result.json for a run on `backend`."""
    report = dict(report or probe())
    report["backend"] = backend
    report["label"] = honesty_label(backend, report["device"].get("name"))
    report["emulated"] = backend == "cpu"
    return report
