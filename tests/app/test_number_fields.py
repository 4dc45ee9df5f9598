"""Whole numbers and decimals typed into forms, query strings and headers (app/core/digits.py), and the fields
that read them: a lab's run form and the interactive tools. Property-based (hypothesis): any text gives a value
or a worded error, never an exception; a digit that is not an ASCII digit ("²", "١٢") is never a number.

Bounded and derandomized: a few hundred examples per property, the same on every run, no example database."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.digits import DB_INT_MAX, MAX_DIGITS, decimal_number, whole_number
from app.services.jobs import forms as labforms
from app.services.learning import tools as tool_service
from labs import catalog

BOUNDED = settings(
    max_examples=300, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
FIELD_CHARS = list("0123456789+-.,_eE ²³¹١٢٣۴߁٠𝟘") + ["1e999", "nan", "inf", "9" * 30, "2147483648"]
typed = st.one_of(st.text(max_size=24), st.lists(st.sampled_from(FIELD_CHARS), max_size=12).map("".join))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("12", 12),
        ("007", 7),
        (str(DB_INT_MAX), DB_INT_MAX),
        (str(DB_INT_MAX + 1), None),
        ("²", None),  # str.isdigit() is true; int() raises
        ("١٢", None),  # str.isdigit() is true; int() reads 12
        ("1²", None),
        (" 12", None),
        ("12\n", None),
        ("1_000", None),
        ("+1", None),
        ("-1", None),
        ("1.0", None),
        ("", None),
        (None, None),
        ("9" * 4400, None),  # past CPython's 4300-digit int() limit: refused before int() is called
    ],
)
def test_only_ascii_digits_are_a_whole_number(text, expected):
    assert whole_number(text) == expected


def test_signs_and_bounds_when_the_caller_allows_them():
    assert whole_number("-5", signed=True, lo=-10) == -5 and whole_number("+5", signed=True) == 5
    assert whole_number("-5", signed=True) is None  # below lo=0
    assert whole_number("11", hi=10) is None and whole_number("0", lo=1) is None


@BOUNDED
@given(typed)
def test_a_whole_number_is_ascii_digits_in_range_or_none(text):
    value = whole_number(text)
    if value is None:
        return
    assert text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS
    assert value == int(text) and 0 <= value <= DB_INT_MAX


@BOUNDED
@given(typed)
def test_a_decimal_is_finite_ascii_or_none(text):
    value = decimal_number(text)
    if value is None:
        return
    assert text.isascii() and math.isfinite(value) and value == float(text)


LABS = catalog.names()


@BOUNDED
@given(st.sampled_from(LABS), st.data())
def test_a_lab_form_gives_params_or_errors_by_field(lab, data):
    fields = labforms.form_fields(lab)
    form = {f.name: data.draw(typed, label=f.name) for f in fields if data.draw(st.booleans(), label=f"{f.name}?")}
    params, errors = labforms.parse_form(lab, form)
    names = {f.name for f in fields}
    assert set(errors) <= names and all(errors.values()), errors
    for name, value in params.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            assert math.isfinite(value), (name, value)
    numeric = {f.name for f in fields if f.kind in ("int", "float", "int_list")}
    for name, text in form.items():
        if name in numeric and any(c.isdigit() and not c.isascii() for c in text):
            assert name in errors, (name, text)  # "١٢" is not twelve


@BOUNDED
@given(st.sampled_from(sorted(tool_service.TOOLS)), st.data())
def test_a_tool_gives_a_result_or_errors_by_field(name, data):
    tool = tool_service.TOOLS[name]
    query = {f: data.draw(typed, label=f) for f in tool.model.model_fields if data.draw(st.booleans(), label=f"{f}?")}
    if data.draw(st.booleans(), label="predicts?"):
        query |= {"predicts": data.draw(st.sampled_from(sorted(tool.outputs))), "predict": data.draw(typed)}
    state = tool_service.run(name, query)
    assert (state.result is None) == bool(set(state.errors) - {"predict"}), state.errors
    for field, message in state.errors.items():
        assert message, field
