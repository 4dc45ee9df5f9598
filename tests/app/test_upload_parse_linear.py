"""An uploaded result.json is parsed in time linear in its size, whatever its shape: text built to be slow (a run of
escaped quotes that never closes, numbers of thousands of digits, deep nesting, bracket floods) costs eight times
as much at eight times the size, never sixty-four. Times are this thread's CPU time (time.thread_time), the
smallest of a few tries, so other processes on a loaded machine do not count; the per-MB figures against a real
result are bench/upload_parse.py's."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.services.jobs import bundles

SMALL = 4 * 1024  # bytes of the repeated part at the small size; the large one is GROWTH times that
GROWTH = 8
# Linear time gives a ratio near 8; quadratic gives 64. The slack covers caches and timer grain on small inputs.
MAX_RATIO = 3 * GROWTH
SLACK_S = 0.02
TRIES = 3

# (before, repeated unit, after): the shapes that were slow somewhere, or could be.
SHAPES = {
    "escaped quotes, never closed": ('"', '\\"', ""),
    "escaped quotes inside an object": ('{"label": "', '\\"', ""),
    "a string never closed": ('{"label": "', "x", ""),
    "backslash pairs, never closed": ('"', "\\\\", ""),
    "quotes opening strings": ("", '"a', ""),
    "a long integer": ('{"a": ', "9", "}"),
    "a long fraction": ('{"a": 1.', "0", "}"),
    "a long exponent": ('{"a": 1e', "9", "}"),
    "deep arrays": ("", "[", ""),
    "deep objects": ("", '{"a":', ""),
    "a bracket flood": ("[", "[],", "[]]"),
    "a flood of empty strings": ("[", '"",', '""]'),
    "a flood of numbers": ("[", "1,", "1]"),
}


def _cost(text: bytes) -> float:
    best = float("inf")
    for _ in range(TRIES):
        start = time.thread_time()
        try:
            bundles.parse_result(text)
        except bundles.BundleError:
            pass
        best = min(best, time.thread_time() - start)
    return best


def _grows_linearly(before: str, unit: str, after: str) -> None:
    n = max(1, SMALL // len(unit.encode()))
    small = (before + unit * n + after).encode()
    large = (before + unit * (n * GROWTH) + after).encode()
    t_small, t_large = _cost(small), _cost(large)
    assert t_large <= MAX_RATIO * t_small + SLACK_S, (
        f"{len(large)} bytes took {t_large:.3f} s, {len(small)} bytes {t_small:.4f} s: "
        f"{t_large / max(t_small, 1e-9):.0f}x for {GROWTH}x the size"
    )


def test_every_known_slow_shape_grows_linearly():
    for name, shape in SHAPES.items():
        try:
            _grows_linearly(*shape)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


# Units drawn from what JSON's grammar turns on: quotes, escapes, brackets, digits, separators.
JSONISH = '"\\[]{},:0123456789.eE-+ antrufl'


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.sampled_from(["", '"', "[", "{", '{"a": ', '{"a": "', '["', "[1."]),
    unit=st.text(alphabet=JSONISH, min_size=1, max_size=6),
    after=st.sampled_from(["", '"', "]", "}", '"]', '"}']),
)
@example(before='"', unit='\\"', after="")
@example(before='{"a": ', unit="9", after="}")
@example(before="", unit="[", after="")
def test_any_repeated_shape_grows_linearly(before, unit, after):
    _grows_linearly(before, unit, after)
