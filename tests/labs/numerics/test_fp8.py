"""labs.numerics: FP8 formats, scaling rules and the emulated FP8 linear against independent references."""

from __future__ import annotations

import math

import pytest
import torch

from labs.numerics.delayed import DelayedScaling
from labs.numerics.fp8 import (
    FLT_MAX,
    FORMATS,
    FP8_MAX,
    Fp8Recipe,
    absmax_quantize,
    accumulate,
    compute_scale,
    current_scale,
    quantize,
    quantize_blockwise,
    quantize_mx,
    round_to_format,
)
from labs.numerics.fp8_linear import Fp8Linear, TensorQuantizer, fp8_frozen

# --------------------------------------------------------------------------- an independent decoder


def decode_code(code: int, fmt: str) -> float:
    """Value of one FP8 bit pattern, from the format definition alone (no torch casts)."""
    e_bits, m_bits, bias = (4, 3, 7) if fmt == "e4m3" else (5, 2, 15)
    sign = -1.0 if code & 0x80 else 1.0
    exp = (code >> m_bits) & ((1 << e_bits) - 1)
    man = code & ((1 << m_bits) - 1)
    e_max = (1 << e_bits) - 1
    if fmt == "e4m3" and exp == e_max and man == (1 << m_bits) - 1:
        return math.nan  # E4M3 (fn) spends only S.1111.111 on NaN and has no inf
    if fmt == "e5m2" and exp == e_max:
        return sign * math.inf if man == 0 else math.nan
    if exp == 0:
        return sign * man * 2.0 ** (1 - bias - m_bits)  # subnormal
    return sign * (1 + man / (1 << m_bits)) * 2.0 ** (exp - bias)


def finite_grid(fmt: str) -> list[tuple[float, int]]:
    """(value, code) for every finite non-negative code, ascending."""
    pts = {}
    for code in range(128):
        v = decode_code(code, fmt)
        if math.isfinite(v):
            pts[v] = code
    return sorted(pts.items())


def nearest_even(x: float, fmt: str) -> float:
    """Round-to-nearest, ties to the code with an even last mantissa bit; saturate at max."""
    grid = finite_grid(fmt)
    mag = min(abs(x), grid[-1][0])
    best = min(grid, key=lambda vc: (abs(vc[0] - mag), vc[1] & 1))
    return math.copysign(best[0], x) if best[0] != 0 else 0.0


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_all_256_codes_decode_as_the_format_defines(fmt):
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    torch_vals = codes.view(FORMATS[fmt].torch_dtype).float().tolist()
    for code, got in enumerate(torch_vals):
        want = decode_code(code, fmt)
        if math.isnan(want):
            assert math.isnan(got), (fmt, code)
        else:
            assert got == want, (fmt, code, got, want)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_format_table_matches_the_decoded_codes(fmt):
    spec = FORMATS[fmt]
    grid = [v for v, _ in finite_grid(fmt)]
    assert spec.max == grid[-1] == FP8_MAX[fmt]
    assert spec.min_subnormal == grid[1]
    assert spec.min_normal == 2.0 ** (1 - spec.bias)
    assert FP8_MAX == {"e4m3": 448.0, "e5m2": 57344.0}


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_rounding_matches_independent_nearest_even_in_range(fmt):
    grid = [v for v, _ in finite_grid(fmt)]
    # Every grid value, every midpoint (the ties), points just either side of the midpoints,
    # and random values across the whole range including subnormals.
    mids = [(a + b) / 2 for a, b in zip(grid, grid[1:])]
    probes = grid + mids + [m * (1 + 2**-12) for m in mids] + [m * (1 - 2**-12) for m in mids]
    gen = torch.Generator().manual_seed(0)
    probes += (
        (torch.rand(2000, generator=gen) * 2 * math.log2(grid[-1] / grid[1]) - math.log2(grid[-1])).exp2().tolist()
    )
    probes = [p for p in probes if p <= grid[-1]]
    xs = torch.tensor(probes + [-p for p in probes], dtype=torch.float64).float()
    got = round_to_format(xs, fmt).tolist()
    for x, g in zip(xs.tolist(), got):
        assert g == nearest_even(x, fmt), (fmt, x, g)


# --------------------------------------------------------------------------- quantize


def test_worked_example_scale_and_spike():
    # Lesson 06: amax 240 gives scale 448/240 ~ 1.87; 120 lands near 224; a spike of 300 would
    # need ~560 and saturates at 448.
    scale = compute_scale(240.0, "e4m3")
    assert scale == pytest.approx(448 / 240, rel=1e-6)
    assert round(scale, 2) == 1.87
    res = quantize(torch.tensor([120.0, 300.0, -300.0]), "e4m3", scale)
    assert res.data.float().tolist() == [224.0, 448.0, -448.0]
    assert 300 * scale == pytest.approx(560, rel=1e-6)
    assert res.clipped == 2 and res.flushed == 0
    assert res.dequant[1].item() == pytest.approx(240.0, rel=1e-6)  # the spike comes back as 240


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_overflow_is_clamped_not_left_to_the_cast(fmt):
    big = torch.tensor([1e6, -1e6, 1e30])
    res = quantize(big, fmt, 1.0)
    assert res.data.float().tolist() == [FP8_MAX[fmt], -FP8_MAX[fmt], FP8_MAX[fmt]]
    assert res.clipped == 3


def test_own_amax_is_not_counted_as_clipped():
    # 448/240 rounds up in FP32, so 240 * scale is a hair over 448: rounding, not clipping.
    res = quantize(torch.tensor([240.0]), "e4m3", compute_scale(240.0, "e4m3"))
    assert res.data.float().item() == 448.0 and res.clipped == 0


def test_flush_to_zero_is_counted():
    tiny = FORMATS["e4m3"].min_subnormal
    res = quantize(torch.tensor([tiny / 4, tiny, 0.0, 1.0]), "e4m3", 1.0)
    assert res.data.float().tolist() == [0.0, tiny, 0.0, 1.0]
    assert res.flushed == 1  # the exact zero does not count, only a nonzero that vanished


# --------------------------------------------------------------------------- scale rules


@pytest.mark.parametrize("bad", [0.0, math.inf, -math.inf, math.nan])
def test_compute_scale_keeps_previous_for_bad_amax(bad):
    assert compute_scale(bad, "e4m3", prev_scale=3.5) == 3.5
    assert compute_scale(bad, "e4m3") == 1.0


def test_compute_scale_margin_and_overflow():
    assert compute_scale(7.0, "e4m3", margin=2) == pytest.approx(448 / 7 / 4)
    assert compute_scale(1.0, "e5m2") == 57344.0
    # 448 / 1e-39 overflows FP32: TE stores FLT_MAX rather than inf.
    assert compute_scale(1e-39, "e4m3") == FLT_MAX
    t = compute_scale(torch.tensor(1e-39), "e4m3")
    assert t.dtype == torch.float32 and t.item() == FLT_MAX


@pytest.mark.parametrize("bad", [0.0, math.inf, math.nan])
def test_current_scale_is_one_for_bad_amax(bad):
    assert current_scale(bad, "e4m3") == 1.0


def test_current_scale_values():
    assert current_scale(240.0, "e4m3") == pytest.approx(448 / 240)
    assert current_scale(1e-3, "e4m3", eps=1e-2) == pytest.approx(44800.0)
    assert current_scale(1e-39, "e4m3") == FLT_MAX


def test_current_scale_applies_eps_before_the_zero_rule():
    # TE's compute_scale_from_amax (recipe_common.cuh): `if (amax < epsilon) amax = epsilon;` comes first, so
    # an all-zero tensor with eps > 0 is scaled by fp8_max / eps, not left at 1.
    assert current_scale(0.0, "e4m3", eps=1e-2) == pytest.approx(44800.0)
    assert current_scale(0.0, "e4m3", eps=0.0) == 1.0
    assert current_scale(math.nan, "e4m3", eps=1e-2) == 1.0  # NaN < eps is false: NaN keeps scale 1
    assert current_scale(math.inf, "e4m3", eps=1e-2) == 1.0


def test_delayed_history_roll_max():
    ds = DelayedScaling("e4m3", history_len=3, algo="max")
    used = []
    for amax in [1.0, 5.0, 2.0, 3.0, 1.0]:
        ds.record(amax)
        used.append(float(ds.update()))
    # A spike stays in the window for history_len updates, then drops out.
    assert used == [1.0, 5.0, 5.0, 5.0, 3.0]
    # Row 0 is zeroed for the next step; the newest value sits in the last row.
    assert ds.amax_history.tolist() == [0.0, 3.0, 1.0]
    assert float(ds.scale) == pytest.approx(448 / 3)


def test_delayed_history_roll_most_recent():
    ds = DelayedScaling("e4m3", history_len=3, algo="most_recent")
    used = []
    for amax in [1.0, 5.0, 2.0, 3.0]:
        ds.record(amax)
        used.append(float(ds.update()))
    assert used == [1.0, 5.0, 2.0, 3.0]
    assert float(ds.scale) == pytest.approx(448 / 3)


def test_delayed_history_len_one_and_nan_step():
    ds = DelayedScaling("e4m3", history_len=1, algo="max")
    ds.record(4.0)
    ds.update()
    assert ds.amax_history.tolist() == [0.0] and float(ds.scale) == 112.0
    ds.record(math.nan)
    ds.update()
    assert float(ds.scale) == 112.0  # NaN amax keeps the previous scale
    ds.update()  # a step that recorded nothing (amax 0) also keeps it
    assert float(ds.scale) == 112.0


def test_delayed_scaling_lags_one_step_behind_a_spike():
    recipe = Fp8Recipe(kind="delayed", fp8_format="e4m3", amax_history_len=4)
    q = TensorQuantizer("x", "input", recipe)
    base = torch.tensor([120.0, -240.0, 10.0])
    k = 3
    for step in range(6):
        x = base.clone()
        if step == k:
            x[0] = 300.0
        q.quantize(x)
        q.end_step()
    hist = q.history()
    assert hist[0].scale == 1.0  # step 0 runs on the initial scale, as in TE
    assert hist[k - 1].scale == pytest.approx(448 / 240) and hist[k - 1].clipped == 0
    # Step k quantizes the spike with the stale scale: 300 * 1.87 = 560 saturates.
    assert hist[k].scale == pytest.approx(448 / 240) and hist[k].clipped == 1
    assert hist[k].amax == 300.0
    # Step k+1 already uses the spike's amax: nothing clips, and resolution is coarser.
    assert hist[k + 1].scale == pytest.approx(448 / 300) and hist[k + 1].clipped == 0


def test_current_scaling_never_lags():
    q = TensorQuantizer("x", "input", Fp8Recipe(kind="current"))
    for x in ([1.0, 2.0], [300.0, 1.0]):
        q.quantize(torch.tensor(x))
        q.end_step()
    assert [h.clipped for h in q.history()] == [0, 0]
    assert q.history()[1].scale == pytest.approx(448 / 300)


def test_several_casts_in_one_step_keep_the_max_amax_min_scale_and_summed_counts():
    """Gradient accumulation: a step with two casts of one tensor gets one history row, as TE keeps it."""
    recipe = Fp8Recipe(kind="current", fp8_format="e4m3")
    q = TensorQuantizer("x", "input", recipe)
    tiny = 2.0**-40  # flushes to 0 next to 300 in E4M3 (scale 448/300)
    q.quantize(torch.tensor([1.0, 2.0, tiny]))
    q.quantize(torch.tensor([300.0, tiny, tiny]))
    q.end_step()
    (row,) = q.history()
    assert row.amax == 300.0
    assert row.scale == pytest.approx(448 / 300)  # the smaller of the two calls' scales (448/2 and 448/300)
    assert row.flushed == 2 + 1 and row.clipped == 0
    assert row.numel == 6


# --------------------------------------------------------------------------- block formats


def test_blockwise_pow2_scales_and_local_outlier():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 256, generator=gen)
    x[0, 5] = 1000.0
    res = quantize_blockwise(x, "e4m3", block=(1, 128))
    assert res.scale.shape == (4, 2)
    log2 = torch.log2(res.scale)
    assert torch.equal(log2, log2.round())  # powers of two
    assert (res.scale <= 448 / res.scale.new_tensor(1.0)).all()
    assert res.clipped == 0  # rounding down the scale leaves headroom
    err = (res.dequant - x).abs() / x.abs().clamp_min(1e-3)
    # The outlier's block has a scale of 0.25; every other block keeps its fine scale.
    assert res.scale[0, 0].item() == 0.25
    assert (res.scale.flatten()[1:] >= 64).all()
    assert err[1:].median() < 0.05


def test_blockwise_weight_tiles_and_padding():
    x = torch.randn(130, 200)
    res = quantize_blockwise(x, "e4m3", block=(128, 128))
    assert res.scale.shape == (2, 2)
    assert res.dequant.shape == x.shape
    assert res.clipped == 0


def test_mx_scale_rounds_up_so_nothing_clips():
    # A block whose amax is exactly 448 * 2**3 gets the exact shared scale 2**3 ...
    x = torch.zeros(2, 32)
    x[0, 0] = 448.0 * 8
    # ... and one a hair above it needs the next power of two, never a clip.
    x[1, 0] = 448.0 * 8 * (1 + 2**-10)
    res = quantize_mx(x, block=32)
    assert res.scale.flatten().tolist() == [2.0**-3, 2.0**-4]
    assert res.clipped == 0
    assert res.dequant[0, 0].item() == 448.0 * 8
    gen = torch.Generator().manual_seed(2)
    y = torch.randn(64, 96, generator=gen) * torch.logspace(-6, 6, 96)
    assert quantize_mx(y).clipped == 0
    assert quantize_mx(y, dim=0).scale.shape == (96, 2)


# --------------------------------------------------------------------------- accumulation & int8


def test_e4m3_accumulation_stalls_at_64_and_promotion_fixes_it():
    assert accumulate([3.0] * 100, "e4m3") == 64.0
    assert accumulate([3.0] * 18, "e4m3") == 64.0  # reaches 64 after 18 additions
    assert accumulate([3.0] * 17, "e4m3") == 60.0
    assert accumulate([3.0] * 100, "e4m3", promote_every=8) == 300.0


def test_absmax_int8_worked_example():
    r = absmax_quantize(torch.tensor([0.3, -0.5, 0.12, 1.5]))
    assert r.scale.item() == pytest.approx(1.5 / 127)
    assert r.q.tolist() == [25, -42, 10, 127]
    assert r.dequant.tolist() == pytest.approx([0.295, -0.496, 0.118, 1.5], abs=5e-4)
    # An outlier of 30 coarsens the step to ~0.236; 0.3 and 0.12 collapse onto the same code.
    r = absmax_quantize(torch.tensor([0.3, -0.5, 0.12, 30.0]))
    assert r.scale.item() == pytest.approx(0.236, abs=1e-3)
    assert r.q.tolist() == [1, -2, 1, 127]
    # Blocks of two: the outlier only spoils its own block.
    r = absmax_quantize(torch.tensor([0.3, -0.5, 0.12, 30.0]), block=2)
    assert r.q.tolist()[:2] == [76, -127]


# --------------------------------------------------------------------------- emulated linear

# Relative Frobenius error budgets against an FP32 linear. E4M3 keeps 3 mantissa bits, so a
# round-to-nearest error is at most 2**-4 relative and about 2**-4/sqrt(3) ~ 3.6% rms; two
# quantized operands give ~5%. E5M2 gradients keep 2 bits (~7% rms), ~8% with the E4M3 operand
# beside them. The budgets leave room for that, yet a wrong scale, a skipped dequantization or a
# transposed operand gives errors of 50% and more.
FWD_REL_TOL = 0.08  # y = q(x) q(W)^T, both E4M3
GRAD_REL_TOL_HYBRID = 0.12  # dx, dW with an E5M2 output-gradient
GRAD_REL_TOL_E4M3 = 0.08  # dx, dW with an E4M3 output-gradient


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.parametrize("kind", ["delayed", "current", "block", "mxfp8"])
@pytest.mark.parametrize("fmt", ["hybrid", "e4m3"])
def test_fp8_linear_matches_fp32_linear_within_budget(kind, fmt):
    torch.manual_seed(0)
    ref = torch.nn.Linear(192, 96)
    fp8 = Fp8Linear.from_linear(ref, Fp8Recipe(kind=kind, fp8_format=fmt, amax_history_len=4), name="l")
    x = torch.randn(4, 64, 192, requires_grad=True)
    r = torch.randn(4, 64, 96)
    # One calibration step first: delayed scaling starts from scale 1, like TE.
    for _ in range(2):
        x.grad = None
        ref.weight.grad = None
        y = fp8(x)
        (y * r).sum().backward()
        fp8.end_step()
    dx, dw = x.grad.clone(), ref.weight.grad.clone()
    x.grad = None
    ref.weight.grad = None
    y_ref = ref(x)
    (y_ref * r).sum().backward()
    tol = GRAD_REL_TOL_HYBRID if fmt == "hybrid" else GRAD_REL_TOL_E4M3
    assert 1e-4 < rel(y, y_ref) < FWD_REL_TOL  # it really quantized, and not badly
    assert rel(dx, x.grad) < tol
    assert rel(dw, ref.weight.grad) < tol
    hist = fp8.grad_quantizer.history()
    assert len(hist) == 2 and hist[-1].clipped == 0
    assert fp8.grad_quantizer.fmt == ("e5m2" if fmt == "hybrid" else "e4m3")
    assert fp8.input_quantizer.fmt == fp8.weight_quantizer.fmt == "e4m3"


def test_fp8_linear_under_bf16_autocast_and_frozen():
    lin = Fp8Linear(32, 16, recipe=Fp8Recipe(kind="delayed", amax_history_len=2))
    x = torch.randn(8, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = lin(x)
    assert y.dtype == torch.bfloat16  # follows autocast like te.Linear; the GEMM itself ran in FP32
    y.float().sum().backward()
    lin.end_step()
    assert lin.weight.grad.dtype == torch.float32  # master weights keep their precision
    scale = lin.input_quantizer.scale
    with fp8_frozen(lin), torch.no_grad():
        lin(x * 100)
        lin.end_step()
    assert lin.input_quantizer.scale == scale
    assert len(lin.input_quantizer.history()) == 1


def test_quantizer_merges_calls_within_a_step_and_collect_off_still_scales():
    q = TensorQuantizer("x", "input", Fp8Recipe(kind="delayed", fp8_format="e4m3", amax_history_len=2))
    q.quantize(torch.tensor([2.0, 500.0]))  # scale 1 at step 0: 500 saturates
    q.quantize(torch.tensor([7.0, 600.0]))
    q.end_step()
    (rec,) = q.history()
    assert rec.amax == 600.0 and rec.clipped == 2 and rec.numel == 4
    assert q.scale == pytest.approx(448 / 600)  # both calls fed row 0 of the amax history
    quiet = TensorQuantizer("y", "input", Fp8Recipe(kind="delayed", amax_history_len=2), collect=False)
    quiet.quantize(torch.tensor([4.0]))
    quiet.end_step()
    assert quiet.history() == [] and quiet.scale == pytest.approx(112.0)


def _te_float_to_e8m0(val: float) -> int:
    """Transformer Engine's float_to_e8m0 for Hopper (transformer_engine/common/util/ptx.cuh @ v2.9), on FP32 bits:
    the exponent field, incremented when the mantissa is not zero (not at 0xFE, not for a tiny subnormal)."""
    import struct

    bits = struct.unpack("<I", struct.pack("<f", val))[0]
    exponent, mantissa = bits >> 23, bits & 0x7FFFFF
    if (mantissa > 0 and exponent != 0xFE) and not (exponent == 0 and mantissa <= 0x400000):
        exponent += 1
    return exponent


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_mx_shared_exponent_is_te_float_to_e8m0_of_the_fp32_product(fmt):
    import numpy as np

    fp8_max = FORMATS[fmt].max
    rcp = np.float32(1.0 / fp8_max)
    gen = np.random.default_rng(5)
    amaxes = list(np.float32(10.0) ** gen.uniform(-30, 30, 2000).astype(np.float32))
    for k in range(-20, 21):  # every power of two times fp8_max, and the FP32 neighbours either side
        edge = np.float32(fp8_max * 2.0**k)
        amaxes += [np.nextafter(edge, np.float32(0)), edge, np.nextafter(edge, np.float32(np.inf))]
    x = torch.zeros(len(amaxes), 32)
    x[:, 0] = torch.tensor(np.array(amaxes, dtype=np.float32))
    got = quantize_mx(x, block=32, fmt=fmt).scale.flatten()  # the multiplier 2**-e
    for amax, scale in zip(amaxes, got.tolist()):
        e = _te_float_to_e8m0(float(np.float32(amax * rcp))) - 127
        assert scale == 2.0**-e, (amax, scale, e)
