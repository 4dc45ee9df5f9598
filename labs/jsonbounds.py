"""JSON from outside the course (an uploaded result.json, a trace in an uploaded bundle), parsed within bounds
in time linear in its size, every bound checked before the parser builds anything large.

    from labs.jsonbounds import RESULT, TooMuch, loads
    data = loads(raw, what="result.json", bounds=RESULT)      # TooMuch (a ValueError) says which bound broke

Why not `json.loads` alone: it recurses once per nesting level, turns a 5,000-digit number into a ValueError
nobody expects (or, where the interpreter's digit limit is lifted, into seconds of arithmetic), and while it runs
in C it holds the GIL, so a request parsing something built to be slow stops every other request of its process.

How, in two passes over the text:
1. one scan from string to bracket to string: a search for the next quote or bracket (a window at a time), and at
   a quote an anchored match of the string's rest (the closing quote optional, the loop possessive and bounded
   by the longest string allowed), so every character is read once, a failed match is never retried from a
   later position, and no one regex call holds the GIL for long
   (the quadratic trap of stripping strings with `"[^"\\\\]*(?:\\\\.[^"\\\\]*)*"`: an unterminated run of `\\"`
   starts a new full-length attempt at each quote). It checks the nesting depth, the length of each string and
   the count of strings and containers, and refuses an unterminated string at once, naming its line. The scan
   runs in Python, so the interpreter can hand the GIL to other threads between its steps;
2. `json.loads` (linear, in C), with hooks that refuse a number longer than the bound before converting it.
   The scan bounded what C builds (containers and strings), so its GIL hold is short; numbers go through the
   Python hooks, where other threads get their turn.
The worst case per MB against a plain parse of a real result: bench/upload_parse.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from labs.words import byte_size


class TooMuch(ValueError):
    """JSON refused: not valid, or past one of its bounds; str(exc) names which, where, and the limit."""


@dataclass(frozen=True)
class Bounds:
    max_bytes: int
    max_depth: int  # nesting of objects and arrays
    max_items: int  # strings (keys included) and containers together: what the C parser allocates
    max_string: int  # characters in one string, escapes counted as written
    max_number: int  # characters in one number as written, sign and exponent included


# result.json: the largest lab result (fp8-step) is ~32 KB of ~900 strings and containers at the golden size and
# grows with steps mostly in numbers; the deepest (tp-sweep) nests 9; its longest strings are sentences.
RESULT = Bounds(max_bytes=5 * 2**20, max_depth=64, max_items=200_000, max_string=100_000, max_number=64)
# A Chrome trace: an object of ~15 strings and containers per span, keys included; the page's viewer draws at most
# 20,000 spans (app/services/jobs/timelines.py), a 64-step run of 8 ranks has ~6,000. Events nest 3 deep.
TRACE = Bounds(max_bytes=20 * 2**20, max_depth=16, max_items=500_000, max_string=100_000, max_number=64)

# Where the next string or bracket starts; searched a window at a time, so no one search holds the GIL through
# megabytes of digits or spaces (sre reads ~50 MB/s here).
_NEXT = re.compile(r'["\[\]{}]')
WINDOW = 64 * 1024


# The rest of a string after its opening quote, anchored there: at most `n` + 1 characters or escapes (possessive:
# nothing is re-read), then the closing quote if there is one. An unterminated string ends the match instead of
# failing and being retried from a later quote, and no match runs on through a huge one.
@cache
def _string_rest(n: int) -> re.Pattern[str]:
    return re.compile(r'(?:[^"\\]|\\.){0,' + str(n + 1) + r'}+"?', re.DOTALL)


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line}, column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


def scan(text: str, *, what: str, bounds: Bounds) -> None:
    """Check nesting, string lengths and the count of strings and containers in one linear pass; TooMuch otherwise.

    Brackets inside strings do not count. Text that is not JSON at all passes whatever the parser will refuse."""
    depth = items = pos = 0
    rest = _string_rest(bounds.max_string)
    end = len(text)
    while pos < end:
        m = _NEXT.search(text, pos, min(end, pos + WINDOW))
        if m is None:
            pos += WINDOW
            continue
        start = m.start()
        items += 1
        if items > bounds.max_items:
            raise TooMuch(
                f"{what} holds more than {bounds.max_items:,} strings and containers (the limit) at "
                f"{_where(text, start)}; a lab's result holds a few thousand"
            )
        c = text[start]
        if c == '"':
            body = rest.match(text, start + 1)
            assert body is not None  # it matches the empty string at worst
            token = text[start : body.end()]
            closed = len(token) >= 2 and token[-1] == '"' and not _escaped_quote(token)
            if not closed and body.end() >= end - 1:  # the end of the text, or a lone backslash before it
                raise TooMuch(f"{what} is not valid JSON: the string at {_where(text, start)} is never closed")
            if not closed or len(token) - 2 > bounds.max_string:
                raise TooMuch(
                    f"{what} has a string of more than {bounds.max_string:,} characters at {_where(text, start)} "
                    "(the limit)"
                )
            pos = body.end()
            continue
        pos = start + 1
        if c in "[{":
            depth += 1
            if depth > bounds.max_depth:
                raise TooMuch(
                    f"{what} nests objects and arrays more than {bounds.max_depth} levels deep (the nesting limit) "
                    f"at {_where(text, start)}; a lab's result nests a few"
                )
        else:
            depth -= 1


def _escaped_quote(token: str) -> bool:
    """Whether a token that ends in `\\"` ends in an escaped quote (an odd run of backslashes) rather than a closing
    one: the match then stopped at the end of the text or at the length bound, with the string still open."""
    run = len(token) - 1 - len(token[:-1].rstrip("\\"))
    return run % 2 == 1


def loads(raw: bytes | str, *, what: str, bounds: Bounds) -> Any:
    """The JSON value of `raw` (UTF-8 bytes or text), or TooMuch naming the bound it breaks or why it is not JSON."""
    if len(raw) > bounds.max_bytes:
        raise TooMuch(f"{what} is {byte_size(len(raw))}; at most {byte_size(bounds.max_bytes)}")
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TooMuch(f"{what} is not UTF-8 text") from None
    else:
        text = raw
    scan(text, what=what, bounds=bounds)

    def number(kind: type) -> Any:
        def convert(digits: str) -> Any:
            if len(digits) > bounds.max_number:
                raise TooMuch(
                    f"{what} has a number of {len(digits):,} characters ({digits[:12]}…); "
                    f"at most {bounds.max_number} are allowed"
                )
            return kind(digits)

        return convert

    try:
        return json.loads(text, parse_int=number(int), parse_float=number(float))
    except json.JSONDecodeError as exc:
        raise TooMuch(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:  # unreachable after the scan's depth bound; kept so no caller ever sees it
        raise TooMuch(f"{what} nests objects and arrays more than {bounds.max_depth} levels deep") from None
