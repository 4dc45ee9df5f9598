"""The MODEL of limited-precision accumulation: its rounding, its promotion rule, and what the lesson claims."""

from __future__ import annotations

import math

import pytest
import torch

from labs.numerics.accumulate import AccumulatorModel, demo, matmul_limited, round_mantissa
from labs.numerics.fp8 import Fp8Recipe
from labs.numerics.fp8_linear import Fp8Linear


def test_round_mantissa_keeps_the_stated_bits():
    x = torch.tensor([1.0, 1 + 2**-13, 1 + 2**-14, 1 + 3 * 2**-14, -(1 + 2**-13 + 2**-14), 0.0, math.inf])
    near = round_mantissa(x, 13, "nearest").tolist()
    trunc = round_mantissa(x, 13, "truncate").tolist()
    assert near[:4] == [1.0, 1 + 2**-13, 1.0, 1 + 2**-12]  # the tie 1 + 2**-14 goes to even (1.0)
    assert trunc[:4] == [1.0, 1 + 2**-13, 1.0, 1 + 2**-13]  # toward zero drops the half ulp
    assert trunc[4] == -(1 + 2**-13)  # toward zero for negatives too
    assert near[5] == 0.0 and near[6] == math.inf
    assert math.isnan(round_mantissa(torch.tensor([math.nan]), 13).item())


def test_narrow_accumulator_stalls_like_the_lessons_threes_and_promotion_fixes_it():
    # With 3 significant bits (E4M3's mantissa) one product per step reproduces the lesson's example:
    # adding 3s stalls at 64 (the grid step there is 8), and promoting every 8 terms gives exactly 300.
    a = torch.full((1, 100), 3.0)
    b = torch.ones(100, 1)
    stalled = matmul_limited(a, b, AccumulatorModel(mantissa_bits=3, group=1, rounding="nearest"))
    promoted = matmul_limited(a, b, AccumulatorModel(mantissa_bits=3, group=1, promote_every=8, rounding="nearest"))
    assert stalled.item() == 64.0 and promoted.item() == 300.0


def test_fast_accumulation_drifts_with_k_and_promotion_bounds_it():
    rows = {r["k"]: r for r in demo()}
    # FP32 stays at rounding noise; without promotion the truncated ~14-bit partial sum loses more as K grows.
    assert all(r["fp32"] < 1e-6 for r in rows.values())
    assert rows[256]["fast"] < rows[4096]["fast"] < rows[16384]["fast"]
    assert rows[16384]["fast"] > 3e-3  # ~1% at K=16384: the order DeepSeek-V3 reported for H800
    assert all(r["promote_128"] < 3e-4 for r in rows.values())  # bounded by 128-element chunks


def test_model_settings_are_checked():
    with pytest.raises(ValueError, match="promote_every"):
        AccumulatorModel(group=32, promote_every=48)
    with pytest.raises(ValueError, match="mantissa_bits"):
        AccumulatorModel(mantissa_bits=30)
    assert "MODEL" in AccumulatorModel().describe()


@pytest.mark.parametrize("kind, modelled", [("delayed", True), ("current", True), ("block", False)])
def test_fp8_linear_uses_the_model_only_where_te_runs_fast_accumulation(kind, modelled):
    # TE: use_split_accumulator=False for the forward GEMM of delayed and current scaling only.
    torch.manual_seed(0)
    base = torch.nn.Linear(4096, 8, bias=False)
    with torch.no_grad():
        base.weight.copy_(torch.rand(8, 4096))  # positive operands: the running sum grows steadily
    x = torch.rand(16, 4096)
    rec = Fp8Recipe(kind=kind, fp8_format="e4m3")
    exact = Fp8Linear.from_linear(base, rec, collect=False)
    fast = Fp8Linear.from_linear(base, rec, collect=False, accumulator=AccumulatorModel())
    y_exact, y_fast = exact(x), fast(x)
    if modelled:
        assert 1e-4 < ((y_fast - y_exact).norm() / y_exact.norm()).item() < 0.05
        assert (y_fast <= y_exact + 1e-3).all()  # truncation only ever loses magnitude from a positive sum
    else:
        assert torch.equal(y_fast, y_exact)
