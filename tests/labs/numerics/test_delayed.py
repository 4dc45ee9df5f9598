"""Delayed scaling against the rules of Transformer Engine's update kernels, one rule per test.

The fused update is `kernel_bulk` in transformer_engine/common/recipe/delayed_scaling.cu (identical at v2.0,
v2.4, v2.9 and main); the unfused one is `_amax_and_scale_update` in transformer_engine/pytorch/quantization.py
(fp8.py before v2.9), taken when NVTE_UNFUSED_FP8_UPDATE=1. Each expectation below is worked out by hand from
those sources, not by running our code.
"""

from __future__ import annotations

import math

import pytest
import torch

from labs.numerics.delayed import DelayedScaling
from labs.numerics.fp8 import FLT_MAX, Fp8Recipe, absmax, quantize
from labs.numerics.fp8_linear import TensorQuantizer


def run(ds: DelayedScaling, amaxes) -> list[tuple[list[float], float]]:
    """(history, scale) after each step's update."""
    out = []
    for a in amaxes:
        if a is not None:
            ds.record(a)
        ds.update()
        out.append((ds.amax_history.tolist(), float(ds.scale)))
    return out


def test_fused_zero_step_neither_rolls_nor_rescales():
    # kernel_bulk: `if (last_amax != 0.0f) { roll ... }` and with MAX the window max stays 0, so the
    # `isfinite(amax) && amax > 0` test fails and the previous scale is kept.
    ds = DelayedScaling("e4m3", history_len=2, algo="max")
    steps = run(ds, [4.0, 8.0, 0.0, 0.0])
    assert steps[1] == ([0.0, 8.0], 56.0)
    assert steps[2] == ([0.0, 8.0], 56.0)  # not rolled, scale kept
    assert steps[3] == ([0.0, 8.0], 56.0)


def test_zero_steps_do_not_age_the_window_in_the_fused_kernel_but_do_in_the_unfused_path():
    # After [4, 8, 0, 0] a step with amax 1: the fused window still holds 8 (zero steps never rolled it out);
    # the unfused path rolled on each zero step, so 8 has aged out and the scale jumps to 448 / 1.
    fused = DelayedScaling("e4m3", history_len=2, algo="max")
    unfused = DelayedScaling("e4m3", history_len=2, algo="max", update="unfused")
    assert run(fused, [4.0, 8.0, 0.0, 0.0, 1.0])[-1] == ([0.0, 1.0], 56.0)
    assert run(unfused, [4.0, 8.0, 0.0, 0.0, 1.0])[-1] == ([0.0, 1.0], 448.0)


def test_most_recent_zero_step_keeps_the_scale_in_both():
    for update in ("fused", "unfused"):
        ds = DelayedScaling("e4m3", history_len=4, algo="most_recent", update=update)
        assert run(ds, [7.0, 0.0])[-1][1] == 64.0, update


def test_fused_window_max_ignores_nan_and_the_unfused_max_propagates_it():
    # A NaN can only reach row 0 through an amax reduction, not a cast (fmaxf); written there directly.
    # Fused: NaN != 0 so the history rolls (the NaN is kept in the last row), and fmaxf skips it in the max.
    fused = DelayedScaling("e4m3", history_len=3, algo="max")
    run(fused, [2.0, 4.0])
    fused.amax_history[0] = math.nan
    fused.update()
    hist = fused.amax_history.tolist()
    assert hist[:2] == [0.0, 4.0] and math.isnan(hist[2])
    assert float(fused.scale) == 112.0  # 448 / max(4, NaN ignored)
    # Unfused: torch.max over the history is NaN, so the scale is kept (112 from the 4), whatever else is there.
    unfused = DelayedScaling("e4m3", history_len=3, algo="max", update="unfused")
    run(unfused, [2.0, 4.0, 1.0])
    unfused.amax_history[0] = math.nan
    unfused.update()
    assert float(unfused.scale) == 112.0
    unfused.record(0.5)
    unfused.update()  # the NaN is still in the window: torch.max stays NaN, the scale stays frozen
    assert float(unfused.scale) == 112.0


def test_record_ignores_nan_like_the_cast_kernels():
    ds = DelayedScaling("e4m3", history_len=2)
    ds.record(3.0)
    ds.record(math.nan)
    assert ds.amax_history[0].item() == 3.0
    assert absmax(torch.tensor([math.nan, -3.0, 2.0])).item() == 3.0
    assert absmax(torch.tensor([math.nan, math.nan])).item() == 0.0  # fmaxf from 0 over NaNs only
    assert absmax(torch.tensor([1.0, -math.inf])).item() == math.inf  # inf is kept
    assert quantize(torch.tensor([math.nan, 5.0]), "e4m3", 1.0).amax.item() == 5.0


def test_history_len_one_is_zeroed_by_the_update():
    # kernel_bulk with length 1: `a = last_amax` for i = 0 = length-1, then `updated[0] = (i > 0) ? a : 0`.
    ds = DelayedScaling("e4m3", history_len=1)
    assert run(ds, [4.0]) == [([0.0], 112.0)]


def test_scale_is_scaled_max_over_amax_and_caps_at_flt_max():
    ds = DelayedScaling("e4m3", history_len=2, margin=3)
    assert run(ds, [7.0])[-1][1] == pytest.approx(448 * 2**-3 / 7)
    ds = DelayedScaling("e4m3", history_len=2)
    assert run(ds, [1e-39])[-1][1] == FLT_MAX  # 448 / 1e-39 overflows FP32
    ds = DelayedScaling("e4m3", history_len=2)
    run(ds, [8.0])
    assert run(ds, [math.inf])[-1][1] == 56.0  # inf amax keeps the previous scale ...
    assert run(ds, [1.0])[-1][1] == 56.0  # ... and stays in the window, keeping it frozen for L steps
    assert run(ds, [1.0])[-1][1] == 448.0


def test_the_unfused_rule_is_offered_by_name_on_the_recipe():
    q = TensorQuantizer("x", "input", Fp8Recipe(kind="delayed", amax_history_len=2, delayed_update="unfused"))
    assert q.delayed is not None and q.delayed.update_rule == "unfused"
    assert TensorQuantizer("y", "input", Fp8Recipe(kind="delayed")).delayed.update_rule == "fused"
    with pytest.raises(ValueError, match="delayed_update"):
        Fp8Recipe(delayed_update="sometimes")


def test_scale_in_force_during_a_step_is_the_one_quantization_used():
    # The convention every backend records: scale[s] is the scale step s quantized with (from amaxes of
    # steps < s), so at a spike amax x scale exceeds the format's max, and one step later it does not.
    q = TensorQuantizer("x", "input", Fp8Recipe(kind="delayed", fp8_format="e4m3", amax_history_len=2))
    xs = [torch.tensor([100.0]), torch.tensor([200.0]), torch.tensor([2000.0]), torch.tensor([200.0])]
    for x in xs:
        q.quantize(x)
        q.end_step()
    hist = q.history()
    assert [h.scale for h in hist] == pytest.approx([1.0, 4.48, 2.24, 0.224])
    assert hist[2].amax * hist[2].scale > 448 and hist[2].clipped == 1  # the spike quantized with the old scale
    assert hist[3].amax * hist[3].scale <= 448 and hist[3].clipped == 0
