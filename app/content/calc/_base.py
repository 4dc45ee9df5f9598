"""What every calculation shares: the error type and argument checks whose messages name the argument."""

from __future__ import annotations

from typing import Any


class CalcError(ValueError):
    """A calculation got arguments it cannot use; the message names the argument and the allowed values."""


def positive(name: str, value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise CalcError(f"{name} must be a number > 0, got {value!r}")
    return float(value)


def whole(name: str, value: Any, least: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise CalcError(f"{name} must be an integer >= {least}, got {value!r}")
    return value


def at_least(name: str, value: Any, least: float = 0.0) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= least:
        raise CalcError(f"{name} must be a number >= {least:g}, got {value!r}")
    return float(value)


def fraction(name: str, value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 1:
        raise CalcError(f"{name} must be in (0, 1], got {value!r}")
    return float(value)
