"""A learner's answer (up to 20,000 characters) is read in time linear in its length: 20,000 digits once took
112 s in the power-of-ten pattern, holding the GIL. Eight times the text costs about eight times as much, never
sixty-four; times are this thread's CPU time, the smallest of a few tries."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.content.practice.answers import parse_number

SMALL = 1024
GROWTH = 8
MAX_RATIO = 3 * GROWTH  # linear gives ~8, quadratic 64; the slack covers caches and timer grain
SLACK_S = 0.02
TRIES = 3

SHAPES = {
    "digits": ("", "1", ""),
    "digits with commas": ("", "1,", ""),
    "digits with points": ("", "1.", ""),
    "digit groups": ("", "1 ", "× 10⁹"),
    "a mantissa before ×": ("", "1", " × 10⁹"),
    "a mantissa before ·10^": ("", "9", "·10^3"),
    "exponents": ("", "1e", ""),
    "a calculation": ("", "1+", "1 ms"),
    "parentheses": ("", "(", "1"),
    "powers of ten": ("", "10⁹", ""),
    "a unit after spaces": ("1", " ", "ms"),
}


def _cost(text: str) -> float:
    best = float("inf")
    for _ in range(TRIES):
        start = time.thread_time()
        try:
            parse_number(text)
        except (ValueError, ArithmeticError):
            pass
        best = min(best, time.thread_time() - start)
    return best


def _grows_linearly(before: str, unit: str, after: str) -> None:
    n = max(1, SMALL // len(unit))
    small, large = before + unit * n + after, before + unit * (n * GROWTH) + after
    t_small, t_large = _cost(small), _cost(large)
    assert t_large <= MAX_RATIO * t_small + SLACK_S, (
        f"{len(large)} characters took {t_large:.3f} s, {len(small)} took {t_small:.4f} s"
    )


def test_every_known_slow_shape_grows_linearly():
    for name, shape in SHAPES.items():
        try:
            _grows_linearly(*shape)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=st.text(alphabet="0123456789.,eE+-*/^()×x· ⁻⁹%ms", min_size=1, max_size=5))
@example(unit="1")
@example(unit="1,")
def test_any_repeated_answer_grows_linearly(unit):
    _grows_linearly("", unit, "")
