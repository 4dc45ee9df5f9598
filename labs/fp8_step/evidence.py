"""fp8-step's evidence: the numbers result.json carries, taken from the two runs and the FP8 quantizers.

Everything here turns what the training loop recorded (losses, step times, step-0 gradients, each
quantizer's per-step history) into plain JSON-ready values; non-finite numbers (a diverged run)
become null rather than NaN. The page layout built from them lives in report.py.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from labs.fp8_step.params import Params
from labs.numerics.fp8 import FP8_MAX
from labs.numerics.fp8_linear import fp8_quantizers

MAX_HISTORY_POINTS = 512  # per-quantizer points kept in result.json for long runs


def rel_err(a: Any, b: Any) -> float | None:
    """||a - b|| / ||b|| for two tensors; None when it is undefined or not finite."""
    denom = float(b.norm())
    if denom == 0 or not math.isfinite(denom):
        return None
    val = float((a - b).norm()) / denom
    return val if math.isfinite(val) else None


def finite(xs: list[float]) -> list[float | None]:
    return [x if math.isfinite(x) else None for x in xs]


def keep_indices(n: int, must: set[int]) -> list[int]:
    """Indices to keep from an n-long history: all of them, or an even spread plus `must`."""
    if n <= MAX_HISTORY_POINTS:
        return list(range(n))
    stride = math.ceil(n / MAX_HISTORY_POINTS)
    return sorted(set(range(0, n, stride)) | {n - 1} | {i for i in must if 0 <= i < n})


def emulated_quantizers(model: Any, p: Params) -> list[dict]:
    """Every emulated FP8 tensor's per-step amax, scale, clipped and flushed counts."""
    out = []
    for name, q in fp8_quantizers(model).items():
        hist = q.history()
        must = {i for i, h in enumerate(hist) if h.clipped}
        if p.outlier_step is not None:
            must |= {p.outlier_step - 1, p.outlier_step, p.outlier_step + 1}
        keep = keep_indices(len(hist), must)
        layer, role = name.rsplit(".", 1)
        out.append(
            {
                "name": name,
                "layer": layer,
                "role": role,
                "format": q.fmt,
                "fp8_max": FP8_MAX[q.fmt],
                "source": "emulation",
                "steps": [hist[i].step for i in keep],
                "amax": finite([hist[i].amax for i in keep]),  # NaN/inf (a diverged run) -> null
                "scale": finite([hist[i].scale for i in keep]),
                "clipped": [hist[i].clipped for i in keep],
                "underflow": [hist[i].flushed for i in keep],
                "numel": hist[-1].numel if hist else 0,
                "total_clipped": sum(h.clipped for h in hist),
                "total_underflow": sum(h.flushed for h in hist),
            }
        )
    return out


def per_step_totals(quantizers: list[dict], steps: int, key: str) -> list[int] | None:
    """Sum of `key` ("clipped" or "underflow") over all tensors, per step; None where nothing counts."""
    if not quantizers or quantizers[0][key] is None:
        return None
    totals = [0] * steps
    for q in quantizers:
        for s, c in zip(q["steps"], q[key]):
            totals[s] += c
    return totals


def timing(step_ms: list[float]) -> dict:
    """Median step time of the steps timed after training (labs/fp8_step/run.py timed_steps): the model is warm by
    then, so every one counts."""
    return {"ms_per_step": statistics.median(step_ms)}


def outlier_report(p: Params, quantizers: list[dict], target: str) -> dict | None:
    """What the spiked tensor's scale and clip count did just before, at and after the spike."""
    if p.outlier_step is None:
        return None
    k = p.outlier_step
    q = next((q for q in quantizers if q["name"] == f"{target}.input"), None)
    rep: dict = {"step": k, "target": f"{target}.input", "scale_factor": p.outlier_scale}
    if q is None:
        return rep | {"note": "no per-step record for the target on this backend"}
    at = {s: i for i, s in enumerate(q["steps"])}

    def field_at(key: str, s: int) -> Any:
        i = at.get(s)
        return None if i is None or q[key] is None else q[key][i]

    rep.update(
        amax_before=field_at("amax", k - 1),
        amax_at_spike=field_at("amax", k),
        scale_at_spike=field_at("scale", k),
        clipped_at_spike=field_at("clipped", k),
        scale_after=field_at("scale", k + 1),
        clipped_after=field_at("clipped", k + 1),
    )
    return rep


def focus_quantizer(p: Params, quantizers: list[dict], target: str) -> dict | None:
    """The tensor worth plotting: the spiked one, else the one that clipped most, else the first."""
    if not quantizers:
        return None
    if p.outlier_step is not None:
        for q in quantizers:
            if q["name"] == f"{target}.input":
                return q
    worst = max(quantizers, key=lambda q: q["total_clipped"] or 0)
    return worst if (worst["total_clipped"] or 0) > 0 else quantizers[0]


def accumulation_evidence(model: Any, x: Any, fprop: str, autocast: Any) -> dict:
    """Each FP8 layer's forward GEMM on one fresh batch, exact FP32 vs the MODEL of fast accumulation.

    The model runs frozen (current scales, nothing recorded); a hook takes each Fp8Linear's input, and the
    GEMM is summed from the same FP8-rounded operands three ways: exactly in FP32, with the modelled fast
    accumulator (TE's forward GEMM for delayed and current scaling on Hopper), and with promotion to FP32
    every 128 elements of K. The unrounded FP32 GEMM beside them shows the size of FP8 rounding itself.
    """
    import torch

    from labs.numerics.accumulate import AccumulatorModel, demo, matmul_limited, rel_error
    from labs.numerics.fp8_linear import fp8_frozen, fp8_modules

    fast, promoted = AccumulatorModel(), AccumulatorModel(promote_every=128)
    inputs: dict[str, Any] = {}
    handles = [
        mod.register_forward_pre_hook(lambda m, args, name=name: inputs.setdefault(name, args[0].detach()))
        for name, mod in fp8_modules(model)
    ]
    try:
        with torch.no_grad(), fp8_frozen(model), autocast():
            model(x)
    finally:
        for h in handles:
            h.remove()
    layers = []
    with torch.no_grad():
        for name, mod in fp8_modules(model):
            x2 = inputs[name].reshape(-1, mod.in_features).float()  # (M, K)
            w = mod.weight.detach().float()  # (N, K)
            xq = mod.input_quantizer.quantize(x2, record=False)
            wq = mod.weight_quantizer.quantize(w, record=False)
            exact = xq @ wq.t()  # (M, N)
            layers.append(
                {
                    "layer": name,
                    "k": mod.in_features,
                    "fast_model_rel_error": rel_error(matmul_limited(xq, wq.t(), fast), exact),
                    "promote_128_rel_error": rel_error(matmul_limited(xq, wq.t(), promoted), exact),
                    "fp8_inputs_rel_error": rel_error(exact, x2 @ w.t()),
                }
            )
    return {
        "label": "model",
        "fprop": fprop,
        "model": fast.describe(),
        "layers": layers,
        "demo": demo(),
        "note": (
            "A MODEL of Hopper's fast FP8 accumulation (labs.numerics.accumulate), not a GPU measurement. "
            "Each layer's error is against the exact FP32 sum of the same FP8 operands; the demo shows "
            "positive E4M3 values summed over growing K, where an accumulator without promotion drifts."
        ),
    }
