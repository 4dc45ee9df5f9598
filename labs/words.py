"""Numbers, byte sizes, durations and counts as people read them: the one formatter of the labs and the app.

A value reads the same on a result card, in a practice prompt, in a refusal and on a plot axis:
`number(6.07e-7)` is "6.07 × 10⁻⁷" everywhere, `byte_size(4194304)` is "4.0 MiB" (IEC units: MiB is
never "MB"), `duration(125)` is "2 min 05 s", `count(2, "GPU")` is "2 GPUs". A call site that needs a
different precision passes it (`digits`, `decimals`), rather than keeping a formatter of its own.
Torch-free and stdlib-only, so the app imports it through labs.api without importing a lab.
"""

from __future__ import annotations

import math
from datetime import timedelta

# Below TINY or from HUGE a number reads as a power of ten; between, as decimals with thousands separators.
TINY = 1e-4  # 0.0001 is still read at a glance; 0.00001 makes the reader count zeros
HUGE = 1e15  # a quadrillion has fifteen digits: past that, separators no longer help
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
_BINARY_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and `noun`, the noun in the plural unless n is 1: count(1, "rank") -> "1 rank"; count(0, "GPU") ->
    "0 GPUs"; count(2, "process", "processes") -> "2 processes"."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def _strip_zeros(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def power_of_ten(v: float, digits: int = 3) -> str:
    """`v` as mantissa × 10 to a superscript power, `digits` significant digits: 6.068e-7 -> "6.07 × 10⁻⁷".
    app/content/practice/answers.py reads this form back, so a learner may type what a prompt shows."""
    mantissa, exponent = f"{v:.{max(digits - 1, 0)}e}".split("e")
    return f"{_strip_zeros(mantissa)} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def number(
    v: float,
    digits: int = 4,
    *,
    decimals: int | None = None,
    grouping: bool = True,
    tiny: float = TINY,
    huge: float = HUGE,
) -> str:
    """A number with sensible precision: 209062 -> "209,062", 724.2502 -> "724.3", 0.0123456 -> "0.01235",
    6.07e-07 -> "6.07 × 10⁻⁷", 1.2e20 -> "1.2 × 10²⁰", True -> "yes".

    Whole numbers keep every digit, others `digits` significant digits and at most `decimals` decimal places
    (a result card passes 5, so 0.000689 reads "0.00069"). Outside [tiny, huge) a power of ten with one digit
    fewer, since its exponent already says the size; a plot axis passes a narrower band so its labels stay
    short. `grouping=False` leaves out the thousands separators.
    """
    if isinstance(v, bool):
        return "yes" if v else "no"
    if not math.isfinite(v):
        return "not a number" if math.isnan(v) else ("∞" if v > 0 else "−∞")
    if v == 0:
        return "0"
    a = abs(v)
    if not tiny <= a < huge:
        return power_of_ten(v, max(digits - 1, 1))
    sep = "," if grouping else ""
    if float(v).is_integer():
        return f"{int(v):{sep}}"
    places = max(0, digits - 1 - math.floor(math.log10(a)))
    if decimals is not None:
        places = min(places, decimals)
    return _strip_zeros(f"{v:{sep}.{places}f}")


def percent(fraction: float, decimals: int | None = None) -> str:
    """A fraction as a percentage: 0.4 -> "40%", 0.0123456 -> "1.235%"; with `decimals`, at most that many
    places and none when they would be zeros: percent(0.015625, 1) -> "1.6%", percent(1.0, 1) -> "100%"."""
    pct = 100 * fraction
    if decimals is None:
        return f"{number(round(pct, 9))}%"
    return f"{_strip_zeros(f'{pct:.{decimals}f}')}%"


def whole_percent(fraction: float | None) -> str:
    """A fraction as a sentence says it, to the whole percent: 0.3083 -> "31%"; None (not measured) -> "—". A
    fraction that is not 0 or 1 never reads as one: 0.004 -> "under 1%", 0.996 -> "over 99%", so a sentence agrees
    with the table beside it that shows the decimals."""
    if fraction is None:
        return "—"
    if 0 < fraction < 0.005:
        return "under 1%"
    if 0.995 <= fraction < 1:
        return "over 99%"
    return percent(fraction, 0)


def ms(value: float | None) -> str:
    """A time in milliseconds as a sentence says it, three significant digits: 12.3456 -> "12.3 ms"; None (not
    measured) -> "—"."""
    return "—" if value is None else f"{number(value, 3)} ms"


def byte_size(n: float, decimals: int = 1) -> str:
    """A byte count in binary (IEC) units: 4194304 -> "4.0 MiB", 1536 -> "1.5 KiB", 512 -> "512 B"."""
    for unit, size in _BINARY_UNITS:
        if abs(n) >= size:
            return f"{n / size:.{decimals}f} {unit}"
    return f"{number(n)} B"


def duration(seconds: float | timedelta, *, about: bool = False) -> str:
    """A duration as people say it: "40 ms", "0.4 s", "17 s", "2 min 05 s", "1 h 03 min".

    `about=True` is an estimate, to the minute: "under a minute", "about 3 min", "about 1 h 07 min".
    """
    s = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
    if about:
        if s < 60:
            return "under a minute"
        m = round(s / 60)
        return f"about {m} min" if m < 60 else f"about {m // 60} h {m % 60:02d} min"
    if abs(s) < 0.1:
        return f"{number(s * 1000, 3)} ms"
    if s < 10:
        return f"{s:.1f} s"
    if s < 60:
        return f"{s:.0f} s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"
