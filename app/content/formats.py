"""Python format specs written by authors ({{calc:x|.2f}}, {{param|,.0f}}): bounded before they reach format().

`format(1.0, "500000000")` builds a 500 MB string and `".500000000f"` as many digits, from a placeholder of a
dozen characters in a previewed part. A number on a page needs a few columns and at most 17 significant digits,
so any number in a spec above MAX_SPEC_NUMBER is refused with a sentence, before anything is built. format()
reads any Unicode decimal digit in a width ("١٠" is ten), so every kind of digit is counted here.
"""

from __future__ import annotations

import re

MAX_SPEC_NUMBER = 40  # width or precision: 17 digits are all a float has; 40 columns is a wide table cell
_NUMBERS = re.compile(r"\d+")  # Unicode digits on purpose: format() reads them too


def spec_problem(spec: str) -> str | None:
    """Why `spec` is refused, in the author's terms, or None when its width and precision are in bounds."""
    for digits in _NUMBERS.findall(spec):
        if len(digits) > 3 or int(digits) > MAX_SPEC_NUMBER:
            return (
                f"format {spec!r} asks for {digits} characters or digits; widths and precisions go up to "
                f"{MAX_SPEC_NUMBER}, e.g. .2f, ,.0f or >12"
            )
    return None
