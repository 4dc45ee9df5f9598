"""quantize()'s clipped and flushed counts on the CPU take shortcuts; they must equal the plain formulas.

The plain formulas (what "count what clipped and what flushed to zero" means):
clipped = #(|x * scale| > clip threshold), flushed = #(dequant == 0 and x != 0).
"""

from __future__ import annotations

import math

import pytest
import torch

from labs.numerics.fp8 import FLT_MAX, FORMATS, quantize, quantize_blockwise, quantize_mx

# the dev extra installs hypothesis; the GPU check's torch-only venv (scripts/gpu-check.sh) collects tests/labs
# without it and runs only the gpu/hta tests, none of them here
pytest.importorskip(
    "hypothesis", reason="the CPU path's property tests; the GPU check's torch-only venv has no hypothesis"
)
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def reference_counts(x: torch.Tensor, fmt: str, scale) -> tuple[int, int]:
    spec = FORMATS[fmt]
    xf = x.float()
    s = torch.as_tensor(scale, dtype=torch.float32)
    scaled = xf * s
    dequant = scaled.clamp(-spec.max, spec.max).to(spec.torch_dtype).float() * torch.reciprocal(s)
    return int((scaled.abs() > spec.clip_threshold).sum()), int(((dequant == 0) & (xf != 0)).sum())


# Values from every region that matters: exact zeros, NaN, +-inf, subnormal-sized, ordinary, near and past max,
# and the FP32 neighbours of half of each format's smallest subnormal (where the cast decides 0 or not).
HALF_SUBNORMALS = [2.0**-10, 2.0**-17]
SPECIAL = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e-45, 1e-30, 2.0**-20, 1e-3, 0.5, 1.0, 240.0, 448.0, 464.0] + [
    h * f for h in HALF_SUBNORMALS for f in (1 - 2.0**-24, 1.0, 1 + 2.0**-23, 1 + 2.0**-22)
]
values = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats(min_value=-(2.0**20), max_value=2.0**20, width=32, allow_nan=False),
    st.floats(min_value=-(2.0**-13), max_value=2.0**-13, width=32),
)
# Scales: the ordinary range, the edges of the shortcut's assumptions, and values outside them.
scales = st.one_of(
    st.floats(min_value=2.0**-10, max_value=2.0**13, width=32),
    st.sampled_from([0.0, 2.0**-127, 2.0**-126, 1.0, 448 / 240, FLT_MAX, math.inf, math.nan, 1e30, 1e-30]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(xs=st.lists(values, min_size=0, max_size=40), scale=scales, fmt=st.sampled_from(["e4m3", "e5m2"]))
def test_per_tensor_counts_equal_the_plain_formulas(xs, scale, fmt):
    x = torch.tensor(xs, dtype=torch.float32)
    res = quantize(x, fmt, scale)
    assert (res.clipped, res.flushed) == reference_counts(x, fmt, scale)


@settings(max_examples=150, deadline=None)
@given(
    xs=st.lists(values, min_size=8, max_size=8),
    block_scales=st.lists(scales, min_size=2, max_size=2),
    fmt=st.sampled_from(["e4m3", "e5m2"]),
)
def test_per_block_scales_count_like_the_plain_formulas(xs, block_scales, fmt):
    x = torch.tensor(xs, dtype=torch.float32).reshape(2, 4)
    scale = torch.tensor(block_scales, dtype=torch.float32).reshape(2, 1)
    res = quantize(x, fmt, scale)
    assert (res.clipped, res.flushed) == reference_counts(x, fmt, scale)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_values_at_half_the_smallest_subnormal(fmt):
    half = FORMATS[fmt].min_subnormal / 2
    for x in ([half * (1 + 2.0**-23)] * 3, [half] * 3, [half * (1 + 2.0**-23), half, 0.0, 1.0]):
        t = torch.tensor(x, dtype=torch.float32)
        assert quantize(t, fmt, 1.0).flushed == reference_counts(t, fmt, 1.0)[1]
    assert quantize(torch.tensor([half, half * (1 + 2.0**-23)]), fmt, 1.0).flushed == 1


@pytest.mark.parametrize("amax_given", [False, True])
def test_a_large_tensor_counts_clips_and_flushes_exactly(amax_given):
    # Gaussian values with a spike, zeros and values small enough to flush: every branch of the shortcut runs.
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 256, generator=gen)
    x[0, :8] *= 1000.0  # clips under a scale set for the rest
    x[1, :64] = 0.0
    x[2, :64] *= 1e-6  # flushes
    scale = 448 / 4.0
    amax = x.abs().amax() if amax_given else None
    res = quantize(x, "e4m3", scale, amax=amax)
    expected = reference_counts(x, "e4m3", scale)
    assert expected[0] > 0 and expected[1] > 0
    assert (res.clipped, res.flushed) == expected
    # A tensor with nothing to count takes the shortcuts and still reports zeros.
    calm = torch.randn(256, 64, generator=gen)
    res = quantize(calm, "e4m3", 448 / float(calm.abs().amax()))
    assert (res.clipped, res.flushed) == reference_counts(calm, "e4m3", 448 / float(calm.abs().amax())) == (0, 0)


def test_block_and_mx_recipes_count_like_the_plain_formulas():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(130, 200, generator=gen)  # not a multiple of the tiles: padding must not count
    x[5, 3:40] = 0.0
    x[7, ::2] *= 1e-12  # beside ordinary values in every tile, so they flush
    cases = [
        ("e4m3", (1, 128), quantize_blockwise(x, "e4m3", (1, 128))),
        ("e5m2", (128, 128), quantize_blockwise(x, "e5m2", (128, 128))),
        ("e4m3", (1, 32), quantize_mx(x)),
    ]
    for fmt, (bm, bk), res in cases:
        per_value = res.scale.repeat_interleave(bm, 0).repeat_interleave(bk, 1)[: x.shape[0], : x.shape[1]]
        assert res.flushed > 0
        assert (res.clipped, res.flushed) == reference_counts(x, fmt, per_value)
