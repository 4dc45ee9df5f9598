"""Reading a learner's numeric answer: the number (thousands separators, decimal commas, exponents) and
its unit, converted to the question's unit. Errors are ValueErrors whose message is shown to the learner.
"""

from __future__ import annotations

import math
import re

from .generators import fmt_number

# ---------------------------------------------------------------- parsing answers

_UNITS: dict[str, tuple[str, float]] = {
    "d": ("time", 86400.0),
    "day": ("time", 86400.0),
    "days": ("time", 86400.0),
    "h": ("time", 3600.0),
    "hour": ("time", 3600.0),
    "hours": ("time", 3600.0),
    "min": ("time", 60.0),
    "s": ("time", 1.0),
    "sec": ("time", 1.0),
    "ms": ("time", 1e-3),
    "us": ("time", 1e-6),
    "µs": ("time", 1e-6),
    "μs": ("time", 1e-6),
    "ns": ("time", 1e-9),
    "b": ("bytes", 1.0),
    "bytes": ("bytes", 1.0),
    "kb": ("bytes", 1e3),
    "mb": ("bytes", 1e6),
    "gb": ("bytes", 1e9),
    "tb": ("bytes", 1e12),
    "kib": ("bytes", 2.0**10),
    "mib": ("bytes", 2.0**20),
    "gib": ("bytes", 2.0**30),
    "tib": ("bytes", 2.0**40),
    "%": ("ratio", 1.0),
    "percent": ("ratio", 1.0),
    "x": ("factor", 1.0),
    "×": ("factor", 1.0),
}
_NUMBER = re.compile(r"^([+-]?(?:\d+(?:[.,]\d*)?|[.,]\d+)(?:e[+-]?\d+)?)\s*(.*)$", re.IGNORECASE)
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$")


def parse_number(raw: str) -> tuple[float, str]:
    """'1,234.5 ms' -> (1234.5, 'ms'). ValueError with a learner-facing message when it is not a number."""
    text = (raw or "").strip().replace("−", "-").replace("\u00a0", " ").replace("_", "")
    text = re.sub(r"(?<=\d) (?=\d{3}\b)", "", text)  # "16 384" -> "16384"
    if not text:
        raise ValueError("Type a number first.")
    head = re.match(r"^[+-]?[\d.,]+(?:e[+-]?\d+)?", text, re.IGNORECASE)
    if head and _THOUSANDS.match(head.group(0).split("e")[0].split("E")[0]):
        text = text.replace(",", "", head.group(0).count(","))
    m = _NUMBER.match(text)
    if not m:
        raise ValueError(f"“{raw.strip()}” is not a number. Write digits, e.g. 14 or 1.87 or 2.5e3.")
    number = m.group(1).replace(",", ".")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"“{raw.strip()}” is not a number.") from None
    if not math.isfinite(value):
        raise ValueError("The answer must be a finite number.")
    return value, m.group(2).strip()


def convert(value: float, unit: str, target: str) -> float:
    """Express value given in `unit` in the question's `target` unit; ValueError when they do not match."""
    if not unit or unit.lower() == target.lower():
        return value
    src, dst = _UNITS.get(unit.lower()), _UNITS.get(target.lower())
    if not target:
        raise ValueError(f"This answer has no unit; drop “{unit}”.")
    if src is None or dst is None or src[0] != dst[0]:
        raise ValueError(f"“{unit}” cannot be converted to {target}; answer in {target}.")
    return value * src[1] / dst[1]


def with_unit(x: float, unit: str) -> str:
    if not unit:
        return fmt_number(x)
    sep = "" if unit in ("%", "x", "×") else " "
    return f"{fmt_number(x)}{sep}{unit}"
