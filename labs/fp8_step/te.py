"""fp8-step's Transformer Engine glue: te.Linear layers, the TE recipe for Params, TE's autocast, and
reading TE's own FP8 metadata back as evidence.

Only the `te` backend calls into this module, and only there is `transformer_engine` imported (the
backend exists only where that import works). The other backends emulate the same recipe with
labs.numerics.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from labs.fp8_step.evidence import finite, keep_indices
from labs.fp8_step.model import LinearFactory
from labs.fp8_step.params import Params
from labs.numerics.fp8 import FP8_MAX, Fp8Recipe


def te_linear_factory(params_dtype: torch.dtype = torch.float32) -> LinearFactory:
    """te.Linear layers; FP8 is switched on by the te.autocast around the forward, not here."""
    import transformer_engine.pytorch as te  # guarded by the caller: only on the `te` backend

    def make(in_features: int, out_features: int, bias: bool, name: str) -> torch.nn.Module:
        return te.Linear(in_features, out_features, bias=bias, params_dtype=params_dtype)

    return make


def te_recipe_for(p: Params) -> Any:
    """The Transformer Engine recipe object matching Params (only called on the te backend)."""
    from transformer_engine.common import recipe as te_recipe

    fmt = te_recipe.Format.HYBRID if p.fp8_format == "hybrid" else te_recipe.Format.E4M3
    if p.recipe == "delayed":
        return te_recipe.DelayedScaling(
            margin=p.margin, fp8_format=fmt, amax_history_len=p.amax_history_len, amax_compute_algo=p.amax_compute_algo
        )
    if p.recipe == "current":
        return te_recipe.Float8CurrentScaling(fp8_format=fmt)
    if p.recipe == "block":
        return te_recipe.Float8BlockScaling(fp8_format=fmt)
    return te_recipe.MXFP8BlockScaling(fp8_format=fmt)


def te_fp8_autocast(te: Any, recipe: Any, enabled: bool = True) -> Any:
    """te.autocast(recipe=...) on current TE; te.fp8_autocast(fp8_recipe=...) before it existed."""
    if hasattr(te, "autocast"):
        return te.autocast(enabled=enabled, recipe=recipe)
    return te.fp8_autocast(enabled=enabled, fp8_recipe=recipe)


def fp8_context(recipe: Any, bf16: Callable[[], Any]) -> Callable[[], Any]:
    """The context the FP8 run's forward enters: BF16 autocast with TE's FP8 autocast inside it."""
    import transformer_engine.pytorch as te  # the te backend exists only when this import works

    @contextlib.contextmanager
    def ctx() -> Iterator[None]:
        with bf16(), te_fp8_autocast(te, recipe, True):
            yield

    return ctx


def read_te_meta(model: Any, step: int, trace: dict) -> None:
    """Copy each te.Linear's delayed-scaling state after the step (TE's own numbers).

    TE rolls the history when it updates the scale: the step's amax then sits in the last row and
    row 0 is zeroed. A version that defers the update to the next forward still has it in row 0.
    Any surprise in TE's internals is kept as a reason instead of failing the run.
    """
    if "__error__" in trace:
        return
    try:
        _read_te_meta_unguarded(model, step, trace)
    except Exception as exc:  # TE internals differ between versions
        trace["__error__"] = f"could not read TE fp8_meta: {type(exc).__name__}: {exc}"


def _read_te_meta_unguarded(model: Any, step: int, trace: dict) -> None:
    for name, mod in model.gemm_layers():
        meta = getattr(mod, "fp8_meta", None)
        if not meta or "scaling_fwd" not in meta:
            continue
        entry = {}
        for direction, roles in (("scaling_fwd", ("input", "weight")), ("scaling_bwd", ("grad_output",))):
            s = meta.get(direction)
            if s is None:
                continue
            hist = s.amax_history  # (history_len, n)
            newest = hist[0] if (hist.shape[0] == 1 or bool((hist[0] != 0).any())) else hist[-1]
            for i, role in enumerate(roles):
                entry[role] = (float(newest[i]), float(s.scale[i]))
        trace.setdefault(name, []).append((step, entry))


def te_quantizers(trace: dict, rec: Fp8Recipe) -> list[dict]:
    """Per-tensor amax/scale histories as read from TE (no clip counts: TE's kernels keep none)."""
    out = []
    for layer, points in trace.items():
        if layer.startswith("__"):
            continue
        for role in ("input", "weight", "grad_output"):
            pts = [(s, e[role]) for s, e in points if role in e]
            if not pts:
                continue
            keep = keep_indices(len(pts), set())
            out.append(
                {
                    "name": f"{layer}.{role}",
                    "layer": layer,
                    "role": role,
                    "format": rec.format_for(role),
                    "fp8_max": FP8_MAX[rec.format_for(role)],
                    "source": "transformer_engine",
                    "steps": [pts[i][0] for i in keep],
                    "amax": finite([pts[i][1][0] for i in keep]),
                    "scale": finite([pts[i][1][1] for i in keep]),
                    "clipped": None,  # TE's kernels do not count saturated values
                    "underflow": None,
                    "numel": None,
                    "total_clipped": None,
                    "total_underflow": None,
                }
            )
    return out


def te_metadata_summary(fp8_model: Any, trace: dict) -> dict:
    """Final FP8 state of each te.Linear, as TE holds it (scales and amax history rows)."""
    layers, reason = {}, trace.get("__error__")
    if "__error__" in trace:
        return {"available": False, "reason": reason, "layers": {}}
    for name, mod in fp8_model.gemm_layers():
        meta = getattr(mod, "fp8_meta", None)
        if not meta or "scaling_fwd" not in meta:
            reason = "this recipe keeps no delayed-scaling fp8_meta (TE computes scales per tensor or per block)"
            continue
        entry = {}
        try:
            for direction in ("scaling_fwd", "scaling_bwd"):
                s = meta.get(direction)
                if s is not None:
                    entry[direction] = {
                        "scale": [float(v) for v in s.scale.flatten()[:4]],
                        "amax_history_newest": [float(v) for v in s.amax_history[-1].flatten()[:4]],
                        "amax_history_len": int(s.amax_history.shape[0]),
                    }
        except Exception as exc:  # TE internals differ between versions
            reason = f"could not read TE fp8_meta: {type(exc).__name__}: {exc}"
            continue
        layers[name] = entry
    return {"available": bool(layers), "reason": None if layers else reason, "layers": layers}
