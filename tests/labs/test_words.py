"""labs/words.py: one way to write numbers, byte sizes, durations and counts, for the labs and the app."""

from datetime import timedelta

import pytest

from labs.words import byte_size, count, duration, number, percent, whole_percent


def test_count_uses_the_singular_only_for_one():
    assert [count(n, "GPU") for n in (0, 1, 2)] == ["0 GPUs", "1 GPU", "2 GPUs"]
    assert count(3, "process", "processes") == "3 processes" and count(1, "process", "processes") == "1 process"


def test_templates_have_count():
    from app.web.templates import templates

    page = templates.env.from_string("{{ count(1, 'question') }} / {{ count(4, 'job') }} still open")
    assert page.render() == "1 question / 4 jobs still open"


@pytest.mark.parametrize(
    "value, options, text",
    [
        (209062, {}, "209,062"),
        (724.2502930002956, {}, "724.3"),
        (0.0123456, {}, "0.01235"),
        (0.0006895065307617188, {}, "0.0006895"),
        (0.0006895065307617188, {"decimals": 5}, "0.00069"),  # a result card's precision
        (6.068043643311656e-07, {}, "6.07 × 10⁻⁷"),
        (1.2e20, {}, "1.2 × 10²⁰"),  # huge reads as a power of ten too, not 21 digits
        (10**18, {}, "1 × 10¹⁸"),
        (999_999_999_999_999, {}, "999,999,999,999,999"),
        (-2.5e-9, {}, "-2.5 × 10⁻⁹"),
        (999.96, {}, "1,000"),
        (12345.678, {"grouping": False}, "12346"),
        (2.5e5, {"digits": 3, "huge": 1e5}, "2.5 × 10⁵"),  # a plot axis's narrower band
        (0.0, {}, "0"),
        (True, {}, "yes"),
        (float("nan"), {}, "not a number"),
        (float("-inf"), {}, "−∞"),
    ],
)
def test_number(value, options, text):
    assert number(value, **options) == text


def test_percent_byte_size_and_duration():
    assert [percent(0.4), percent(0.0123456), percent(0.015625, 1), percent(1.0, 1)] == [
        "40%",
        "1.235%",
        "1.6%",
        "100%",
    ]
    # a sentence's percent never rounds a small or near-whole fraction to 0% or 100% beside a table that shows it
    assert [whole_percent(f) for f in (0.0, 0.004, 0.3083, 0.996, 1.0, None)] == [
        "0%",
        "under 1%",
        "31%",
        "over 99%",
        "100%",
        "—",
    ]
    assert [byte_size(512), byte_size(1536), byte_size(4194304), byte_size(20 * 2**20)] == [
        "512 B",
        "1.5 KiB",
        "4.0 MiB",
        "20.0 MiB",  # IEC: 2**20 bytes is a MiB, never "MB"
    ]
    assert byte_size(3 * 2**40) == "3.0 TiB" and byte_size(448 * 2**20, decimals=0) == "448 MiB"
    spoken = [duration(s) for s in (0.04, 0.4, 17, 125, 3780)]
    assert spoken == ["40 ms", "0.4 s", "17 s", "2 min 05 s", "1 h 03 min"]
    assert duration(timedelta(seconds=125)) == "2 min 05 s"
    estimates = [duration(s, about=True) for s in (12, 200, 4000)]
    assert estimates == ["under a minute", "about 3 min", "about 1 h 07 min"]
