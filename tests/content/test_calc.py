"""The calculation registry: seed numbers, clear errors, and the plain-Python FP8 path agreeing with labs.fp8."""

import math

import pytest

from app.content import calc


def test_worked_example_numbers():
    s = calc.fp8_scale(240, "E4M3")["scale"]
    assert s == pytest.approx(1.8667, rel=1e-4)
    normal, spike = calc.fp8_map(120, s), calc.fp8_map(300, amax=240)
    assert normal["scaled"] == pytest.approx(224) and not normal["clipped"]
    assert spike["scaled"] == pytest.approx(560) and spike["clipped"] and spike["stored"] == 448
    assert calc.step_time(12, 5, 3) == {"total": 14, "exposed": 2, "hidden": 3, "overlap_ratio": 0.6, "serial": 17}


def test_accumulation_gets_stuck_at_64():
    plain = calc.accumulate_fp8(3, 100)
    assert plain["total"] == 64 and plain["stuck_after"] == 18
    assert calc.accumulate_fp8(3, 100, promote_every=8)["total"] == 300


def test_round_fp8_matches_torch():
    torch = pytest.importorskip("torch")
    values = [0.0, 1e-4, 0.3, -0.5, 1.0625, 3.3, 17, 21, 23, 67, 100, 250, 300, 447, 449, 500, -1000]
    for fmt, dtype in (("E4M3", torch.float8_e4m3fn), ("E5M2", torch.float8_e5m2)):
        for v in values:
            limit = calc.FP8_MAX[fmt]
            expected = float(torch.tensor(max(-limit, min(limit, v))).to(dtype).float())
            assert calc.round_fp8(v, fmt) == expected, (fmt, v)


def test_python_fallback_agrees_with_labs(monkeypatch):
    if not calc.using_labs_fp8():
        pytest.skip("labs.fp8 not present; only the plain-Python path exists")
    with_labs = [calc.fp8_scale(240, "E4M3"), calc.fp8_map(300, amax=240), calc.accumulate_fp8(3, 100, 8)]
    monkeypatch.setattr(calc, "_labs_fp8", None)
    without = [calc.fp8_scale(240, "E4M3"), calc.fp8_map(300, amax=240), calc.accumulate_fp8(3, 100, 8)]
    for a, b in zip(with_labs, without):
        for key in a:
            if isinstance(a[key], float):
                assert a[key] == pytest.approx(b[key], rel=1e-6), key
            else:
                assert a[key] == b[key], key


@pytest.mark.parametrize(
    "name,args,needle",
    [
        ("nope", {}, "unknown calculation"),
        ("fp8_scale", {"amax": 0}, "amax must be a number > 0"),
        ("fp8_scale", {"amax": 1, "fmt": "E3M4"}, "fmt must be one of"),
        ("fp8_scale", {"amax": 1, "colour": 2}, "does not take ['colour']"),
        ("step_time", {"compute": 1, "comm": 2, "overlap": 3}, "cannot exceed"),
        ("pipeline_bubble", {"stages": 4}, "microbatches"),
        ("zero_memory", {"params": 1, "gpus": 4, "stage": 5}, "stage must be 0, 1, 2 or 3"),
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


def test_shipped_lessons_give_the_same_numbers_without_labs(monkeypatch):
    from app.content.loader import load_course

    from .conftest import LESSONS

    with_labs = {lid: les.values for lid, les in load_course(LESSONS).lessons.items()}
    monkeypatch.setattr(calc, "_labs_fp8", None)
    plain = load_course(LESSONS)
    assert plain.errors == []
    for lid, lesson in plain.lessons.items():
        for name, fields in lesson.values.items():
            for key, value in fields.items():
                assert value == pytest.approx(with_labs[lid][name][key], rel=1e-6), (lid, name, key)
