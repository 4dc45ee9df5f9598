"""Delayed scaling for one tensor, as Transformer Engine updates it after each step.

TE keeps, per FP8 tensor, an amax history (length L) and a scale. During a step the cast kernels
write the tensor's amax into row 0 of the history (an fmaxf reduction: NaN is ignored, inf is
kept); after the step one update turns the history into the next step's scale. TE has two updates:

fused (the default): `kernel_bulk` in transformer_engine/common/recipe/delayed_scaling.cu, called
    through tex.fused_amax_and_scale_update_after_reduction by
    FP8GlobalStateManager.reduce_and_update_fp8_tensors (checked against TE v2.0, v2.4, v2.9 and
    main 2.20.0.dev0; the kernel is the same in all four):
      last = row 0 (the step's amax)
      if last != 0:   roll: rows 1..L-1 move up one, `last` goes into row L-1, row 0 is zeroed;
                      window max = fmaxf over the old rows 1..L-1 and `last` (NaN ignored)
      else:           nothing rolls and the window max is 0 (so the scale below is kept)
      amax  = last ("most_recent") or the window max ("max")
      scale = (fp8_max * 2**-margin) / amax if amax is finite and > 0, else the previous scale;
              a scale that overflows FP32 becomes FLT_MAX.
    With L = 1 the roll zeroes the only row, so after the update the step's amax is gone from the
    history (read it before the update).
unfused: TE's Python path, taken when NVTE_UNFUSED_FP8_UPDATE=1 (or a callable amax/scale algo):
    `_amax_and_scale_update` in transformer_engine/pytorch/quantization.py (fp8.py before v2.9):
    amax = torch.max over all L rows (NaN propagates) or row 0; the history rolls on every step,
    zero steps included; scale = (fp8_max / amax) / 2**margin with the same keep/FLT_MAX rules.

Both read the same window: this step's amax and the L-1 before it. The scale used during step t
therefore comes from amaxes of steps <= t-1; step 0 runs with scale 1 (TE allocates its scales as
ones: DelayedScalingRecipeState in quantization.py).
"""

from __future__ import annotations

from typing import Literal

import torch

from labs.numerics.fp8 import FLT_MAX, FORMATS

Update = Literal["fused", "unfused"]
UPDATES: tuple[Update, ...] = ("fused", "unfused")


def _fmaxf_reduce(x: torch.Tensor) -> torch.Tensor:
    """max(0, x...) with NaN ignored, as a chain of CUDA fmaxf starting from 0 computes it."""
    return torch.where(torch.isnan(x), torch.zeros_like(x), x).clamp(min=0.0).max()


def fused_scale(amax: torch.Tensor, scaled_max: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """kernel_bulk's scale: scaled_max / amax for a finite positive amax, else the previous scale."""
    sf = scaled_max / amax
    sf = torch.where(torch.isfinite(amax) & (amax > 0), sf, prev)
    return torch.where(torch.isinf(sf), torch.full_like(sf, FLT_MAX), sf)


class DelayedScaling:
    """One tensor's delayed-scaling state (TE's rules; one tensor, so the history is 1-D).

    Per step: `record(amax)` any number of times (their fmaxf goes into row 0), then `update()` once
    after the step. `self.scale` during step t is the scale in force for that step.
    """

    def __init__(
        self,
        fmt: str = "e4m3",
        history_len: int = 1024,
        algo: str = "max",
        margin: int = 0,
        device=None,
        update: Update = "fused",
    ):
        if history_len < 1:
            raise ValueError(f"history_len: got {history_len}, expected >= 1")
        if algo not in ("max", "most_recent"):
            raise ValueError(f"algo: got {algo!r}, expected 'max' or 'most_recent'")
        if fmt not in FORMATS:
            raise ValueError(f"fmt: got {fmt!r}, expected one of {', '.join(FORMATS)}")
        if update not in UPDATES:
            raise ValueError(f"update: got {update!r}, expected 'fused' (TE's default) or 'unfused'")
        self.fmt, self.history_len, self.algo, self.margin, self.update_rule = fmt, history_len, algo, margin, update
        self.fmt_max = FORMATS[fmt].max
        self.amax_history = torch.zeros(history_len, dtype=torch.float32, device=device)  # (L,)
        self.scale = torch.ones((), dtype=torch.float32, device=device)

    def record(self, amax) -> None:
        """Fold one cast's amax into row 0 the way TE's cast kernels do (fmaxf: a NaN never lands)."""
        a = torch.as_tensor(amax, dtype=torch.float32, device=self.amax_history.device)
        self.amax_history[0] = torch.fmax(self.amax_history[0], a)

    def update(self) -> torch.Tensor:
        """End of step: the next step's scale and the rolled history. Returns the amax the scale used."""
        if self.update_rule == "fused":
            return self._update_fused()
        return self._update_unfused()

    def _update_fused(self) -> torch.Tensor:
        h = self.amax_history  # (L,)
        last = h[0].clone()
        moved = last != 0  # NaN != 0 too: a NaN step rolls (and is then ignored by the max)
        window = torch.cat([h[1:], last.reshape(1)])  # (L,) this step and the L-1 before it
        zero = torch.zeros(1, dtype=h.dtype, device=h.device)
        rolled = zero if self.history_len == 1 else torch.cat([zero, h[2:], last.reshape(1)])  # (L,)
        window_max = torch.where(moved, _fmaxf_reduce(window), torch.zeros_like(last))
        amax = last if self.algo == "most_recent" else window_max
        scaled_max = torch.tensor(self.fmt_max * 2.0**-self.margin, dtype=torch.float32, device=h.device)
        self.scale = fused_scale(amax, scaled_max, self.scale)
        self.amax_history = torch.where(moved, rolled, h)
        return amax

    def _update_unfused(self) -> torch.Tensor:
        h = self.amax_history
        amax = h.max() if self.algo == "max" else h[0].clone()  # torch.max propagates NaN
        fp8_max = torch.tensor(self.fmt_max, dtype=torch.float32, device=h.device)
        sf = (fp8_max / amax) / (2.0**self.margin)
        sf = torch.where(amax > 0.0, sf, self.scale)
        sf = torch.where(torch.isfinite(amax), sf, self.scale)
        self.scale = torch.where(torch.isinf(sf), torch.full_like(sf, FLT_MAX), sf)
        # _update_amax_history: roll so the newest sits in the last row, then zero row 0, every step.
        if self.history_len > 1:
            h = torch.roll(h, -1, 0)
        h = h.clone()
        h[0] = 0.0
        self.amax_history = h
        return amax


__all__ = ["FLT_MAX", "UPDATES", "DelayedScaling", "Update", "fused_scale"]
