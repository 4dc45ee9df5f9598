"""Property-based tests (hypothesis) of what learners and authors type into content: a numeric answer or a
prediction, a unit, a format spec. Any text gives a value or a clean, worded error (ValueError, CalcError,
PracticeError), never another exception: an exception is a 500 on the page that called it.

Bounded and derandomized: a fixed set of a few hundred examples per property, the same on every run (no example
database is written), seconds in all. The alphabets lean on what breaks parsers: digits, operators, powers,
separators, superscripts, non-ASCII digits and unit letters."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.content import calc
from app.content.formats import MAX_SPEC_NUMBER
from app.content.practice.answers import convert, parse_number
from app.content.practice.generators import PracticeError, fill
from app.content.tools import TOOLS, read_prediction

BOUNDED = settings(
    max_examples=400, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
ANSWER_CHARS = list("0123456789.,eE+-*/^()×÷ ²⁻¹⁰·x%msGiBµ_−\u00a0١٢") + ["**", "10", "(-8)", "0.5"]
# Calculations as a learner writes them, nested: "(-8)^(0.5)", "((2)*(1e3))/(0)", "(16,384)**(-8)"
NUMBERS = ["8", "-8", "0", "-0.5", "0.5", "2", "1e3", "16,384", "0,5", "1e6", "64", "-1"]
calculations = st.recursive(
    st.sampled_from(NUMBERS),
    lambda inner: st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "^", "**", "×", "÷"]), inner).map(
        lambda t: f"({t[0]}){t[1]}({t[2]})"
    ),
    max_leaves=6,
)
answers = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(ANSWER_CHARS), max_size=25).map("".join),
    st.tuples(calculations, st.sampled_from(["", " ms", " GiB", "%"])).map("".join),
)
units = st.one_of(st.sampled_from(["", "ms", "s", "GiB", "GB", "%", "x", "h", "bytes"]), st.text(max_size=6))


@BOUNDED
@given(answers)
def test_an_answer_reads_as_a_finite_number_or_a_worded_error(text):
    try:
        value, unit = parse_number(text)
    except ValueError as exc:
        assert str(exc)  # the sentence the learner sees
        return
    assert isinstance(value, float) and math.isfinite(value), (text, value)
    assert isinstance(unit, str)


@BOUNDED
@given(st.floats(allow_nan=False, allow_infinity=False), units, units)
def test_a_unit_converts_or_says_which_unit_to_use(value, unit, target):
    try:
        converted = convert(value, unit, target)
    except ValueError as exc:
        assert str(exc)
        return
    assert isinstance(converted, float)


@BOUNDED
@given(st.sampled_from([(t, o) for t in TOOLS.values() for o in t.outputs.values()]), answers)
def test_a_written_prediction_reads_as_a_number_or_nothing(tool_output, text):
    _, output = tool_output
    found = read_prediction(output, text)
    assert found is None or (isinstance(found, float) and math.isfinite(found))


# Single characters only, at most seven: a spec's largest number is 9,999,999 (a 10 MB string where unbounded)
SPEC_CHARS = list("0123456789.,<>^=+- _%#zeEfgGnsdxXbco١٥") + ["sci", "_million"]
specs = st.one_of(st.text(max_size=7), st.lists(st.sampled_from(SPEC_CHARS), max_size=7).map("".join))
values = st.one_of(st.floats(allow_nan=False), st.integers(-(10**20), 10**20), st.booleans())


@BOUNDED
@given(values, specs)
def test_a_calc_format_spec_gives_a_short_string_or_a_worded_error(value, spec):
    try:
        shown = calc.format_value(value, spec)
    except calc.CalcError as exc:
        assert str(exc)
        return
    # a width or precision of at most MAX_SPEC_NUMBER, plus a number's own digits and grouping
    assert len(shown) <= 2 * MAX_SPEC_NUMBER + 400, (spec, len(shown))


@BOUNDED
@given(st.floats(allow_nan=False, allow_infinity=False), specs)
def test_a_question_placeholder_spec_gives_a_short_string_or_a_worded_error(value, spec):
    try:
        shown = fill("{{x|" + spec + "}}", {"x": value})
    except PracticeError as exc:
        assert str(exc)
        return
    assert len(shown) <= 2 * MAX_SPEC_NUMBER + 400, (spec, len(shown))
