"""labs.result_common.table_number: how the labs round numbers for their result tables."""

from __future__ import annotations

import pytest

from labs.result_common import table_number


@pytest.mark.parametrize(
    "value, nd, shown",
    [
        (1.23456, 3, 1.235),
        (327.04, 3, 327.04),
        (0.0, 5, 0.0),
        (None, 3, None),
        (2.5e-06, 5, 2.5e-06),  # a tiny predicted time keeps its size instead of reading as 0
        (-3.14159e-09, 3, -3.14e-09),
        (0.00049, 3, 0.00049),  # rounds to 0.0 at 3 decimals
        (0.0005, 3, 0.001),  # does not: the decimals win
    ],
)
def test_decimals_unless_that_would_show_zero(value, nd, shown):
    assert table_number(value, nd) == shown
