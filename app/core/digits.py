"""Whole numbers typed into a form field, a query string, a header or a setting: ASCII digits only.

`str.isdigit()` is true for "²" and "١٢", and `int()` refuses the first (a 500 wherever the two are paired) and reads
the second as 12, so a check and a parse built from them disagree. Every caller reads its whole numbers here, and
gets None for anything else, so it can answer with a sentence naming its own field.
"""

from __future__ import annotations

import math
import re

# 18 digits fit in a 64-bit integer; the bound also keeps int() far from CPython's 4300-digit refusal.
MAX_DIGITS = 18
_UNSIGNED = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")
_SIGNED = re.compile(rf"[+-]?[0-9]{{1,{MAX_DIGITS}}}")
DB_INT_MAX = 2**31 - 1  # the largest id or count a 32-bit integer column holds (PostgreSQL's INTEGER)
ANY = 10**MAX_DIGITS  # a bound no 18-digit number reaches: for callers whose own model checks the range
# A decimal as a form field holds it: digits with an optional point and exponent; no "nan", "inf" or "1_0".
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")
MAX_DECIMAL_CHARS = 40


def whole_number(text: str | None, *, lo: int = 0, hi: int = DB_INT_MAX, signed: bool = False) -> int | None:
    """The integer `text` spells in ASCII digits (a leading + or - only when `signed`), if it lies in [lo, hi];
    None for anything else: blank, spaces, "1.0", "1_000", "²", "١٢", or a number out of range."""
    if text is None or not (_SIGNED if signed else _UNSIGNED).fullmatch(text):
        return None
    value = int(text)
    return value if lo <= value <= hi else None


def decimal_number(text: str | None) -> float | None:
    """The finite float `text` spells in ASCII ("2", "-0.5", "1.5e3"), or None ("nan", "inf", "1e999", "١٢", "")."""
    if text is None or len(text) > MAX_DECIMAL_CHARS or not _DECIMAL.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None
