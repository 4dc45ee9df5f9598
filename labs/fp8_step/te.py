"""fp8-step's Transformer Engine glue: te.Linear layers, the TE recipe for Params, TE's autocast, and
reading TE's own FP8 metadata back as evidence.

Only the `te` backend calls into this module, and only there is `transformer_engine` imported (the
backend exists only where that import works). The other backends emulate the same recipe with
labs.numerics.
"""

from __future__ import annotations

import contextlib
import os
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


def te_fp8_autocast(te: Any, recipe: Any, enabled: bool = True, group: Any = None) -> Any:
    """te.autocast(recipe=..., amax_reduction_group=...) from TE 2.9 (a function in 2.9, a class on main);
    te.fp8_autocast(fp8_recipe=..., fp8_group=...) before (transformer_engine/pytorch/quantization.py @ v2.9,
    main; fp8.py @ v2.0-v2.8). `group`: the ranks whose amaxes delayed scaling reduces; None means the whole
    world, which would wait for ranks that are not running this block."""
    if hasattr(te, "autocast"):
        return te.autocast(enabled=enabled, recipe=recipe, amax_reduction_group=group)
    return te.fp8_autocast(enabled=enabled, fp8_recipe=recipe, fp8_group=group)


def fp8_context(recipe: Any, bf16: Callable[[], Any]) -> Callable[[], Any]:
    """The context the FP8 run's forward enters: BF16 autocast with TE's FP8 autocast inside it."""
    import transformer_engine.pytorch as te  # the te backend exists only when this import works

    @contextlib.contextmanager
    def ctx() -> Iterator[None]:
        with bf16(), te_fp8_autocast(te, recipe, True):
            yield

    return ctx


# ---- reading TE's delayed-scaling state at the moment it is updated -------------------------------
#
# TE updates delayed scaling twice per training step, both before the step returns to the lab:
#   forward:  at the outermost te.autocast's exit (FP8GlobalStateManager.autocast_exit ->
#             reduce_and_update_fp8_tensors(forward=True));
#   backward: at the end of the backward of the first FP8 module of the forward (linear.py:
#             `if ctx.reduce_and_update_bwd_fp8_tensors: reduce_and_update_fp8_tensors(forward=False)`).
# Read after the step, `scale` is already the next step's scale (amax x scale can then never exceed the
# format's max, so a spike's clipping could never show), and the step's amax has left row 0: it sits in
# the last row after a roll, is absent after a zero step, and with amax_history_len=1 the fused kernel
# zeroes the only row. So the recorder wraps reduce_and_update_fp8_tensors and reads every module's row 0
# (this step's amax, written by the cast kernels) and `scale` (the scale this step used) just before TE
# updates them: one read location for every history length.
# Checked against FP8GlobalStateManager.reduce_and_update_fp8_tensors(cls, forward=True) and autocast_exit
# in transformer_engine/pytorch/quantization.py @ v2.9 and main, transformer_engine/pytorch/fp8.py @ v2.0,
# v2.3 and v2.8; module/linear.py @ v2.9 and main (the backward call); DelayedScalingRecipeState (scale:
# ones(n), amax_history: zeros(L, n)) and the tensor indices in pytorch/csrc/common.h (forward: GEMM1_INPUT
# = 0, GEMM1_WEIGHT = 1; backward: GRAD_OUTPUT1 = 0) @ v2.9.
FWD_INDEX = {"input": 0, "weight": 1}
BWD_INDEX = {"grad_output": 0}


def state_manager() -> Any:
    """TE's FP8GlobalStateManager: in quantization.py from v2.9, in fp8.py before."""
    try:
        from transformer_engine.pytorch.quantization import FP8GlobalStateManager
    except ImportError:
        from transformer_engine.pytorch.fp8 import FP8GlobalStateManager
    return FP8GlobalStateManager


class TeScaleRecorder:
    """Per layer and role, (step, amax of the step, scale in force during the step), read from fp8_meta."""

    def __init__(self, layers: list[tuple[str, Any]]):
        self.layers = layers
        self.step: int | None = None  # set by the training loop; None outside training (nothing recorded)
        self.rows: dict[tuple[str, str], list[tuple[int, Any, Any]]] = {}
        self.error: str | None = None

    def before_update(self, forward: bool) -> None:
        """Called by TE (through the wrapper) right before it updates amax histories and scales."""
        if self.step is None or self.error is not None:
            return
        key, index = ("scaling_fwd", FWD_INDEX) if forward else ("scaling_bwd", BWD_INDEX)
        try:
            for name, mod in self.layers:
                state = (getattr(mod, "fp8_meta", None) or {}).get(key)
                if state is None:
                    continue
                row0, scale = state.amax_history[0], state.scale  # (n,) each, on the GPU
                for role, i in index.items():
                    # Clones, no host sync: all steps are read back at once at the end.
                    self.rows.setdefault((name, role), []).append((self.step, row0[i].clone(), scale[i].clone()))
        except Exception as exc:  # TE internals differ between versions: keep the reason, not a crash
            self.error = f"could not read TE fp8_meta: {type(exc).__name__}: {exc}"

    @contextlib.contextmanager
    def attached(self, manager: Any = None) -> Iterator[TeScaleRecorder]:
        """Wrap FP8GlobalStateManager.reduce_and_update_fp8_tensors for the duration of the FP8 run.

        `manager` defaults to TE's own class (tests pass a TE-shaped stand-in on machines without TE).
        """
        manager = manager if manager is not None else state_manager()
        original = manager.__dict__.get("reduce_and_update_fp8_tensors")
        if not isinstance(original, classmethod):
            self.error = (
                "this Transformer Engine has no FP8GlobalStateManager.reduce_and_update_fp8_tensors classmethod"
            )
            yield self
            return
        recorder = self

        def wrapped(cls: Any, forward: bool = True, *args: Any, **kwargs: Any) -> Any:
            recorder.before_update(forward)
            return original.__func__(cls, forward, *args, **kwargs)

        manager.reduce_and_update_fp8_tensors = classmethod(wrapped)
        try:
            yield self
        finally:
            manager.reduce_and_update_fp8_tensors = original

    def history(self) -> dict[tuple[str, str], list[tuple[int, float, float]]]:
        """{(layer, role): [(step, amax, scale in force), ...]} as floats (one host sync)."""
        out = {}
        for key, rows in self.rows.items():
            values = torch.stack([torch.stack([a.float(), s.float()]) for _, a, s in rows]).cpu().tolist()
            out[key] = [(step, a, s) for (step, _, _), (a, s) in zip(rows, values)]
        return out


@contextlib.contextmanager
def delayed_session(recorder: TeScaleRecorder, update: str) -> Iterator[None]:
    """The FP8 training run: the recorder attached, and TE's unfused update when the lab asks for it.

    TE reads NVTE_UNFUSED_FP8_UPDATE with os.getenv at every update (reduce_and_update_fp8_tensors,
    quantization.py @ v2.9/main, fp8.py @ v2.0-v2.8), so setting it for the run's duration is enough.
    """
    before = os.environ.get("NVTE_UNFUSED_FP8_UPDATE")
    if update == "unfused":
        os.environ["NVTE_UNFUSED_FP8_UPDATE"] = "1"
    try:
        with recorder.attached():
            yield
    finally:
        if before is None:
            os.environ.pop("NVTE_UNFUSED_FP8_UPDATE", None)
        else:
            os.environ["NVTE_UNFUSED_FP8_UPDATE"] = before


def te_quantizers(
    recorder: TeScaleRecorder, rec: Fp8Recipe, layers: list[str], outlier_step: int | None = None
) -> list[dict]:
    """Per-tensor amax/scale histories as TE held them during each step (TE counts no clipped values).

    Long histories are thinned as the emulated path thins them (evidence.emulated_quantizers): the outlier
    step and the steps either side always stay, so the spike and the scale catching up are never thinned away.
    """
    hist = recorder.history()
    around = set() if outlier_step is None else {outlier_step - 1, outlier_step, outlier_step + 1}
    out = []
    for layer in layers:
        for role in ("input", "weight", "grad_output"):
            pts = hist.get((layer, role))
            if not pts:
                continue
            keep = keep_indices(len(pts), {i for i, (step, _, _) in enumerate(pts) if step in around})
            fmt = rec.format_for(role)
            out.append(
                {
                    "name": f"{layer}.{role}",
                    "layer": layer,
                    "role": role,
                    "format": fmt,
                    "fp8_max": FP8_MAX[fmt],
                    "source": "transformer_engine",
                    "steps": [pts[i][0] for i in keep],
                    "amax": finite([pts[i][1] for i in keep]),
                    "scale": finite([pts[i][2] for i in keep]),
                    "clipped": None,  # TE's kernels do not count saturated values
                    "underflow": None,
                    "numel": None,
                    "total_clipped": None,
                    "total_underflow": None,
                }
            )
    return out


def te_metadata_summary(fp8_model: Any, recorder: TeScaleRecorder | None, recipe: str) -> dict:
    """FP8 state of each te.Linear after training's last update (the scale a next step would use); read
    before the generation check, whose forward passes update delayed scaling again."""
    if recorder is None:
        return {
            "available": False,
            "reason": f"TE keeps no per-step amax history for the {recipe} recipe (scales are computed per tensor or block)",
            "layers": {},
        }
    layers: dict = {}
    reason = recorder.error
    if reason is not None:
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
                        # After a roll the last step's amax sits in the last row (history_len > 1).
                        "amax_history_newest": [float(v) for v in s.amax_history[-1].flatten()[:4]],
                        "amax_history_len": int(s.amax_history.shape[0]),
                    }
        except Exception as exc:  # TE internals differ between versions
            reason = f"could not read TE fp8_meta: {type(exc).__name__}: {exc}"
            continue
        layers[name] = entry
    return {"available": bool(layers), "reason": None if layers else reason, "layers": layers}
