"""calc.accumulator is labs/numerics/accumulate.py's model in plain Python: the same partial sums, the same errors."""

import math

import pytest
import torch

from app.content import calc
from app.content.calc.accumulator import dot_narrow, e4m3_inputs, round_mantissa
from labs.numerics.accumulate import AccumulatorModel, matmul_limited
from labs.numerics.accumulate import round_mantissa as torch_round_mantissa


@pytest.mark.parametrize("rounding", ["truncate", "nearest"])
def test_round_mantissa_matches_the_lab_bit_for_bit(rounding):
    xs = [3000.9, -3000.9, 1.0, 2**-20 * 3.3, 123456.789, 0.0, 5e-3, 4097.0]
    ours = [round_mantissa(x, 13, rounding) for x in xs]
    theirs = torch_round_mantissa(torch.tensor(xs, dtype=torch.float32), 13, rounding).tolist()
    # the lab rounds FP32 inputs; ours rounds the double: compare on FP32 inputs
    ours32 = [round_mantissa(calc.f32(x), 13, rounding) for x in xs]
    assert ours32 == theirs
    assert ours[0] == {"truncate": 3000.75, "nearest": 3001.0}[rounding]


@pytest.mark.parametrize("promote_every", [0, 128])
def test_dot_products_match_the_lab_model(promote_every):
    a, b = e4m3_inputs(1024, 3, seed=1)
    model = AccumulatorModel(promote_every=promote_every or None)
    lab = matmul_limited(torch.tensor(a), torch.tensor(b).T, model).diagonal().tolist()
    ours = [dot_narrow(ra, rb, promote_every=promote_every) for ra, rb in zip(a, b, strict=True)]
    # Group sums: exact then rounded once here, an FP32 matmul in the lab; a last-bit difference may carry.
    assert ours == pytest.approx(lab, rel=1e-6)


def test_fast_accumulation_grows_with_k_and_promotion_stops_it():
    short, long = calc.fast_accumulation(k=1024, rows=2), calc.fast_accumulation(k=4096, rows=2)
    assert long["fast_error"] > 2 * short["fast_error"] > 0
    assert long["promoted_error"] < long["fast_error"] / 10
    assert long["fp32_error"] < 1e-6 and long["adds"] == 128 and long["significant_bits"] == 14
    with pytest.raises(calc.CalcError, match="multiple of group"):
        calc.fast_accumulation(k=100)


def test_narrow_add_worked_numbers():
    r = calc.narrow_add(3000, 0.9)
    assert (r["stored"], r["spacing"], r["nearest"]) == (3000.75, 0.25, 3001.0)
    assert math.isclose(r["lost"], 0.15, rel_tol=1e-9)
    assert calc.narrow_add(5000, 0.3)["stored"] == 5000  # below the spacing of 0.5: the add vanishes
