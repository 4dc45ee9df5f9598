"""CSV for spreadsheets: cells no spreadsheet runs as a formula, however it splits the line.

    w = csvcells.writer(out)                     # csv.writer that quotes every field
    w.writerow(csvcells.row([user.display_name, 3, ...]))

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` (or a tab or carriage return before one) as a
formula, and learners choose their own names and answers. Checking a field's first character is not enough: a
spreadsheet that splits on `;` (the default where the decimal mark is a comma), on tabs or on `|`, and that does
not honour the quotes, cuts `x;=1+1;@SUM(1)` into three cells, two of them formulas. So:

- every field is quoted, so a program that reads CSV by its rules never splits inside one;
- inside a field, wherever a cell could start (the field's start, or after any character some spreadsheet splits
  on, spaces skipped) a formula's first character gets a `'` before it, which spreadsheets show as text:
  `x;=1+1;@SUM(1)` is written `x;'=1+1;'@SUM(1)`.

Numbers the course computed (ints, floats) are written as they are: they are not text anyone chose.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import Any

SEPARATORS = ",;\t|\r\n"  # what some spreadsheet's CSV import splits a line on
FORMULA_STARTS = "=+-@\t\r"  # OWASP's list of what makes a cell a formula
_CELL_START = re.compile(rf"(^|[{re.escape(SEPARATORS)}])( *)(?=[{re.escape(FORMULA_STARTS)}])")


def cell(value: Any) -> Any:
    """`value` as a field: text defused wherever a cell could start in it; numbers and None ("") as they are."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return _CELL_START.sub(r"\1\2'", str(value))


def row(values: Iterable[Any]) -> list[Any]:
    return [cell(v) for v in values]


def writer(out: Any, **kw: Any) -> Any:
    """A csv.writer that quotes every field (the cells from `row` are safe whichever way a line is split)."""
    return csv.writer(out, quoting=csv.QUOTE_ALL, **kw)
