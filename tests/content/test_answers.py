"""Numeric answers as learners type them: numbers with units, and plain calculations of numbers
("448/400") evaluated without eval, or refused with a hint."""

import re

import pytest

from app.content.practice import make_variant
from app.content.practice.answers import parse_number, with_unit
from app.content.schema import Numeric


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


@pytest.mark.parametrize(
    "typed, value, unit",
    [
        ("6.07 × 10⁻⁷", 6.07e-7, ""),  # labs/words.py's power of ten, as a prompt or a result card shows it
        ("6.07 × 10⁻⁷ s", 6.07e-7, "s"),
        ("1 × 10¹⁸ bytes", 1e18, "bytes"),
        ("1.2·10²⁰", 1.2e20, ""),  # the raised dot of the lessons' worked numbers
        ("6.07·10^-7", 6.07e-7, ""),
        ("10⁹", 1e9, ""),
        ("2 x 10⁻⁷", 2e-7, ""),
        ("(2 × 10⁻³) / 4", 5e-4, ""),
        ("1,234 × 10⁵", 1.234e8, ""),
    ],
)
def test_a_power_of_ten_is_read_as_it_is_written(typed, value, unit):
    got, got_unit = parse_number(typed)
    assert got == pytest.approx(value) and got_unit == unit


@pytest.mark.parametrize(
    "value", [6.068043643311656e-07, 1.2e20, 10**18, 12345.678, 0.000689, -2.5e-9, 16384, 0.5, 999_999_999_999_999]
)
@pytest.mark.parametrize("unit", ["", "s", "%", "GiB"])
def test_what_a_prompt_shows_reads_back_as_that_number(value, unit):
    """A prompt's numbers and the feedback's answer are written by with_unit (labs/words.py); typed back, each
    reads as the number shown, to the three or four significant digits shown."""
    shown = with_unit(value, unit)
    got, got_unit = parse_number(shown)
    assert got == pytest.approx(value, rel=5e-3) and got_unit == unit, shown


def test_every_generated_prompt_number_reads_back(course):
    """Every number a shipped question's variants show in their prompts is one parse_number reads."""
    shown_numbers = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?: × 10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)?|10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+")
    generated = [
        q
        for lesson in course.lessons.values()
        for q in lesson.questions.values()
        if isinstance(q.body, Numeric) and q.body.generator is not None
    ]
    assert len(generated) >= 8
    for question in generated:
        for seed in range(3):
            variant = make_variant(question, seed)
            assert not re.search(r"\de[-+]?\d|·10\^", variant.prompt), variant.prompt
            for text in shown_numbers.findall(variant.prompt):
                parse_number(text)  # raises with the learner's message when it is not a number
