"""The calculation registry: seed numbers, clear errors, and FP8 numbers bit-identical to labs.fp8.

app/content/calc/ is pure Python (the web tier never imports torch); this test may import labs.numerics.fp8,
and with it torch, to check that the lesson's FP8 arithmetic is the lab's.
"""

import math
import random
import subprocess
import sys

import pytest

from app.content import calc

from .conftest import ROOT


def test_worked_example_numbers():
    s = calc.fp8_scale(240, "E4M3")["scale"]
    assert s == pytest.approx(1.8667, rel=1e-4)
    normal, spike = calc.fp8_map(120, s), calc.fp8_map(300, amax=240)
    assert normal["scaled"] == pytest.approx(224) and not normal["clipped"]
    assert spike["scaled"] == pytest.approx(560) and spike["clipped"] and spike["stored"] == 448
    step = calc.step_time(12, 5, 3)
    assert (step["total"], step["exposed"], step["hidden"], step["overlap_ratio"], step["serial"]) == (
        14,
        2,
        3,
        0.6,
        17,
    )


def test_accumulation_gets_stuck_at_64():
    plain = calc.accumulate_fp8(3, 100)
    assert plain["total"] == 64 and plain["stuck_after"] == 18
    assert calc.accumulate_fp8(3, 100, promote_every=8)["total"] == 300


def test_f32_rounds_like_ieee_single():
    assert calc.f32(0.1) == 0.10000000149011612
    assert calc.f32(1 + 2**-24) == 1.0  # a tie goes to the even neighbour
    assert calc.f32(1 + 3 * 2**-24) == 1 + 2**-22
    assert calc.f32(3.5e38) == math.inf and calc.f32(-3.5e38) == -math.inf
    assert calc.f32(calc.FLT_MAX * (1 + 2**-25)) == calc.FLT_MAX  # below the half-ulp: still finite
    assert calc.fp8_scale(1e-40)["scale"] == calc.FLT_MAX  # the quotient overflows FP32: TE uses FLT_MAX


def test_fp8_grid_counts_and_limits():
    e4m3, e5m2 = calc.fp8_grid("E4M3"), calc.fp8_grid("E5M2")
    # E4M3 (fn): 126 finite positive values + 0; E5M2: 123 finite positive values + 0.
    assert (len(e4m3), len(e5m2)) == (127, 124)
    assert e4m3[1] == 2.0**-9 and e4m3[8] == 2.0**-6 and e4m3[-1] == 448
    assert e5m2[1] == 2.0**-16 and e5m2[4] == 2.0**-14 and e5m2[-1] == 57344
    assert all(calc.round_fp8(v, "E4M3") == v for v in e4m3)


def test_round_fp8_matches_torch():
    torch = pytest.importorskip("torch")
    values = [0.0, 1e-4, 0.3, -0.5, 1.0625, 3.3, 17, 21, 23, 67, 100, 250, 300, 447, 449, 500, -1000]
    for fmt, dtype in (("E4M3", torch.float8_e4m3fn), ("E5M2", torch.float8_e5m2)):
        for v in values:
            limit = calc.FP8_MAX[fmt]
            expected = float(torch.tensor(max(-limit, min(limit, v))).to(dtype).float())
            assert calc.round_fp8(v, fmt) == expected, (fmt, v)


def _cases():
    """The worked numbers of the lessons, then random ones over the whole FP8 range (fixed seed)."""
    worked = [(240.0, 120.0, "E4M3", 0), (240.0, 300.0, "E4M3", 0), (1.0, 1.0, "E4M3", 0), (1.0, 1.0, "E5M2", 0)]
    rng = random.Random(20240613)
    rand = []
    for _ in range(400):
        fmt = rng.choice(["E4M3", "E5M2"])
        amax = 10 ** rng.uniform(-6, 6)
        value = rng.choice([-1, 1]) * amax * rng.uniform(0, 1.6)  # some clip, most do not
        rand.append((amax, value, fmt, rng.choice([0, 0, 1, 3])))
    return worked + rand


def test_fp8_numbers_agree_with_labs_fp8_exactly():
    torch = pytest.importorskip("torch")
    from labs.numerics import fp8

    for amax, value, fmt, margin in _cases():
        ours = calc.fp8_scale(amax, fmt, margin)["scale"]
        theirs = fp8.compute_scale(amax, fmt.lower(), margin=margin)
        assert ours == theirs, ("scale", amax, fmt, margin)
        m = calc.fp8_map(value, scale=ours, fmt=fmt)
        res = fp8.quantize(torch.tensor([value]), fmt.lower(), theirs)
        assert m["stored"] == float(res.data.float()[0]), ("stored", value, ours, fmt)
        assert m["scaled"] == float(torch.tensor([value], dtype=torch.float32)[0] * torch.tensor(theirs)), value
        assert m["clipped"] == (res.clipped > 0), ("clipped", value, ours, fmt)
        assert m["dequantized"] == float(res.dequant[0]), ("dequantized", value, ours, fmt)
    rng = random.Random(7)
    for _ in range(60):
        addend, count = rng.choice([0.25, 1, 2, 3, 5, 7.5, 13]), rng.randint(1, 150)
        every, fmt = rng.choice([0, 0, 4, 8, 16]), rng.choice(["E4M3", "E5M2"])
        ours = calc.accumulate_fp8(addend, count, every, fmt)["total"]
        theirs = fp8.accumulate([addend] * count, fmt.lower(), promote_every=every or None)
        assert ours == theirs, ("accumulate", addend, count, every, fmt)


def test_the_check_can_fail():
    """A deliberately different arithmetic (double instead of FP32 scale) is caught by the same comparison."""
    pytest.importorskip("torch")
    from labs.numerics import fp8

    differs = [
        (amax, fmt)
        for amax, _, fmt, margin in _cases()
        if (calc.FP8_MAX[fmt] / amax) / 2.0**margin != fp8.compute_scale(amax, fmt.lower(), margin=margin)
    ]
    assert len(differs) > 100


def test_importing_calc_does_not_import_torch():
    code = "import sys, app.content.calc as c; c.fp8_map(300, amax=240); assert 'torch' not in sys.modules"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(
    "name,args,needle",
    [
        ("nope", {}, "unknown calculation"),
        ("fp8_scale", {"amax": 0}, "amax must be a number > 0"),
        ("fp8_scale", {"amax": 1, "fmt": "E3M4"}, "fmt must be one of"),
        ("fp8_scale", {"amax": 1, "colour": 2}, "does not take ['colour']"),
        ("fp8_scale", {"amax": 1, "margin": -1}, "margin must be an integer >= 0"),
        ("step_time", {"compute": 1, "comm": 2, "overlap": 3}, "cannot exceed"),
        ("pipeline_bubble", {"stages": 4}, "microbatches"),
        ("zero_memory", {"params": 1, "gpus": 4, "stage": 5}, "stage must be 0, 1, 2 or 3"),
        ("accumulate_fp8", {"addend": 3, "count": 0}, "count must be an integer >= 1"),
    ],
)
def test_errors_name_the_argument(name, args, needle):
    with pytest.raises(calc.CalcError) as exc:
        calc.evaluate(name, args)
    assert needle in str(exc.value)


def test_format_value():
    assert calc.format_value(True, ".2f") == "yes"
    assert calc.format_value(4395.5, ",.0f") == "4,396"
    assert math.isclose(calc.tp_threshold(989e12, 450e9)["d_min"], 4395.56, rel_tol=1e-4)
