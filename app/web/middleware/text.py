"""No request's text may hold a NUL character: refused at once with a 400 naming the field, before anything is read
from or written to the database.

Why here and not per field: PostgreSQL's text and JSON columns cannot hold U+0000 (psycopg raises DataError), so a
registration with `a%00b@example.org` as its email, a display name or a report answer with one in it, answered 500
on PostgreSQL while SQLite stored it. No field of the course has a use for it.

Checked: the query string, and for bodies read before authentication (app/web/middleware/bodies.py:
READ_FIRST_UP_TO, so never an upload's stream) the fields of a form and the strings of a JSON body. An upload's
zip is binary and read by its own rules (app/services/jobs/bundles.py); its form's text fields are small.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from fastapi import HTTPException, Request
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY

from app.web.middleware.bodies import BODY_METHODS, READ_FIRST_UP_TO

NUL = "\x00"


def _refusal(field: str) -> HTTPException:
    return HTTPException(
        400,
        f"{field[:80]}: holds a NUL character (U+0000, sent as %00 or \\u0000), which no text on this site may "
        "hold; remove it and send again. Nothing was saved.",
    )


def _json_field(value: Any, path: str = "body") -> str | None:
    """The path of the first string (key or value) holding a NUL in decoded JSON, without recursion."""
    stack = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if NUL in node:
                return where
        elif isinstance(node, dict):
            for k, v in node.items():
                if NUL in k:
                    return f"{where}.{k.replace(NUL, '')}"
                stack.append((v, f"{where}.{k}"))
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))
    return None


async def no_nul_characters(request: Request) -> None:
    """An app-wide dependency, after the body limit's: a 400 naming the first field that holds a NUL character."""
    query = request.scope.get("query_string", b"")
    if b"%00" in query or b"\x00" in query:
        for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if NUL in key or NUL in value:
                raise _refusal(key.replace(NUL, "") or "query")
    if request.method not in BODY_METHODS:
        return
    limit = request.scope.get(MAX_BODY_SIZE_SCOPE_KEY)
    if not isinstance(limit, int) or limit > READ_FIRST_UP_TO:
        return  # an upload: streamed, never read ahead of its route
    ctype = request.headers.get("content-type", "")
    if ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        form = await request.form()  # Starlette caches it: the route reads the same one
        for key, value in form.multi_items():
            if NUL in key or (isinstance(value, str) and NUL in value):
                raise _refusal(key.replace(NUL, "") or "form")
    elif ctype.startswith("application/json"):
        body = await request.body()  # cached too
        if b"\\u0000" in body:
            try:
                field = _json_field(json.loads(body))
            except (ValueError, RecursionError):
                return  # not JSON: the route's own parser says so
            if field is not None:
                raise _refusal(field)
