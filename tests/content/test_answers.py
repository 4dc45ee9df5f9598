"""Numeric answers as learners type them: numbers with units, and plain calculations of numbers
("448/400") evaluated without eval, or refused with a hint."""

import pytest

from app.content.practice.answers import parse_number


@pytest.mark.parametrize(
    "typed, value, unit",
    [
        ("448/400", 1.12, ""),
        ("448 / 400", 1.12, ""),
        ("2 × 8 GiB", 16.0, "GiB"),
        ("(70e9 * 2) / 8", 17.5e9, ""),
        ("3*(4+5) ms", 27.0, "ms"),
        ("2^10", 1024.0, ""),
        ("2**10 B", 1024.0, "B"),
        ("16 384/2", 8192.0, ""),
        ("0,5/2", 0.25, ""),
        ("1,234.5 ms", 1234.5, "ms"),  # plain numbers read as before
        ("-3", -3.0, ""),
        ("2.5e3", 2500.0, ""),
    ],
)
def test_numbers_and_calculations(typed, value, unit):
    got, got_unit = parse_number(typed)
    assert got == pytest.approx(value) and got_unit == unit


@pytest.mark.parametrize(
    "typed, says",
    [
        ("448/0", "divides by zero"),
        ("2**999", "too large"),
        ("9**9**9", "too large"),
        ("(1+2", "use numbers, + − × ÷ and parentheses"),
        ('__import__("os")', "or a calculation such as 448/400"),
        ("x/2", "or a calculation such as 448/400"),
        ("about twelve", "is not a number"),
        ("1" + "+1" * 60, "is not a number or a plain calculation"),
    ],
)
def test_what_is_not_a_calculation_is_refused_with_a_hint(typed, says):
    with pytest.raises(ValueError, match=None) as exc:
        parse_number(typed)
    assert says in str(exc.value)
