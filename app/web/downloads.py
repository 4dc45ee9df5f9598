"""The Content-Disposition of a download whose name carries user or authored text (RFC 6266).

A name goes into the header twice: `filename="…"` holds an ASCII stand-in that any client reads (every character
outside printable ASCII, and the quote, backslash and percent sign, become "_"), and `filename*=UTF-8''…` (RFC 8187)
the exact name percent-encoded, which current browsers prefer. Neither can carry a quote or a line break into the
header, so no name can end the header early or add another.
"""

from __future__ import annotations

from urllib.parse import quote


def attachment(filename: str) -> str:
    """`attachment; filename="grades-caf_.csv"; filename*=UTF-8''grades-caf%C3%A9.csv` for "grades-café.csv"."""
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\%' else "_" for c in filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
