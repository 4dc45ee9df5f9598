"""JSON from outside the course is parsed within bounds, each refusal naming the bound, and anything inside them
reads exactly as json.loads reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labs.jsonbounds import RESULT, TRACE, Bounds, TooMuch, loads

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
SMALL = Bounds(max_bytes=1000, max_depth=3, max_items=10, max_string=8, max_number=5)


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*/*.json")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_golden_file_reads_as_json_loads_reads_it(path):
    raw = path.read_bytes()
    assert loads(raw, what=path.name, bounds=RESULT if path.name == "result.json" else TRACE) == json.loads(raw)


@pytest.mark.parametrize(
    "text, value",
    [
        ('["[[[[", "{{{{"]', ["[[[[", "{{{{"]),  # brackets inside strings are not nesting
        ('["a\\\\"]', ["a\\"]),  # a closing quote after an escaped backslash
        ('["\\"q\\""]', ['"q"']),
        ("[NaN, Infinity, -1e3]", None),
        ("12345", 12345),
        ('{"k": [1, [2]]}', {"k": [1, [2]]}),
    ],
)
def test_what_is_inside_the_bounds_is_read(text, value):
    got = loads(text, what="x", bounds=SMALL)
    if value is None:
        assert json.dumps(got) == json.dumps(json.loads(text))
    else:
        assert got == value


@pytest.mark.parametrize(
    "text, words",
    [
        ("[" * 4 + "]" * 4, "nests objects and arrays more than 3 levels deep (the nesting limit) at line 1, column 4"),
        ('"' + '\\"' * 3, "the string at line 1, column 1 is never closed"),
        ('["ab\\', "the string at line 1, column 2 is never closed"),
        ('\n  "abc', "the string at line 2, column 3 is never closed"),
        ('["123456789"]', "has a string of more than 8 characters at line 1, column 2 (the limit)"),
        ('["1234567890123', "has a string of more than 8 characters"),
        ("[" + '"",' * 10 + '""]', "holds more than 10 strings and containers (the limit)"),
        ("[123456]", "has a number of 6 characters (123456…); at most 5 are allowed"),
        ("[1.23456]", "has a number of 7 characters"),
        ("[1, 2", "is not valid JSON: Expecting ',' delimiter at line 1, column 6"),
        ("x" * 1001, "is 1,001 B; at most 1,000 B"),
    ],
)
def test_each_bound_is_refused_in_words(text, words):
    with pytest.raises(TooMuch) as exc:
        loads(text, what="result.json", bounds=SMALL)
    assert str(exc.value).startswith("result.json ") and words in str(exc.value)


def test_bytes_that_are_not_utf8_are_refused():
    with pytest.raises(TooMuch, match="result.json is not UTF-8 text"):
        loads(b'{"a": "\xff"}', what="result.json", bounds=SMALL)


def test_a_refusal_is_a_value_error_for_callers_that_catch_those():
    assert issubclass(TooMuch, ValueError)
