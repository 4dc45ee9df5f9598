"""Request body limits: counted on the bytes actually received, per route, before any authentication work.

    DEFAULT_LIMIT        every form and JSON route that names no limit (each router's `max_body_size`)
    AUTHORING_LIMIT      an instructor's lesson file (200,000 characters, percent-encoded)
    UPLOAD_LIMIT         bundle uploads: the bundle limit plus the multipart envelope

FastAPI (0.165, fastapi/_body_limit.py) wraps every route with a `max_body_size` (app/web/factory.py gives
each router DEFAULT_LIMIT; routes and routers that name their own keep it) in Starlette's
RequestBodyLimitMiddleware (starlette/middleware/body_limit.py, Starlette 1.10), which counts the body as it arrives, for Content-Length, chunked and undeclared bodies alike, and raises a 413 past
the limit, so a 1 GB chunked body stops at the first megabyte instead of filling memory or a temp file.

A body counted past its limit gets this module's message (naming the limit) through app/web/factory.py's handler;
one whose Content-Length already says too much gets Starlette's plain "413 Content Too Large", which the
middleware puts in place of any response to such a request. No limit wraps the whole app: it would sit outside the
admission gate, and a 503 the gate gives an upload declared larger than DEFAULT_LIMIT would reach the client as 413.

What the middleware alone leaves open: it looks at a declared Content-Length only when the body is read or
the response starts, and a route that reads its form inside the handler (after CurrentUser) would look the
user up first. `received_within_limit`, an app-wide dependency solved before every other one, closes both:
it refuses a declared length over the route's limit at once, and reads a small body to its end (counted
by the middleware) before anything else runs. Uploads are left to stream: their parser spools to disk.
Neither waits on a slow client while holding a slot: the admission gate (admission.py) has read bodies up to
DEFAULT_LIMIT before admitting their request, and times every larger one's reads against its clock.
"""

from __future__ import annotations

from fastapi import HTTPException, Request
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
from starlette.types import Scope

from app.core.digits import ANY, whole_number
from app.services.jobs.bundles import MAX_UPLOAD_BYTES

KIB, MIB = 1024, 1024 * 1024
DEFAULT_LIMIT = 1 * MIB  # a report's answers (20,000 characters each, percent-encoded) fit with room to spare
AUTHORING_LIMIT = 2 * MIB  # a lesson file of 200,000 characters, up to 9 bytes each once percent-encoded
UPLOAD_LIMIT = MAX_UPLOAD_BYTES + 1 * MIB  # the zip plus the form's other fields and multipart boundaries
READ_FIRST_UP_TO = AUTHORING_LIMIT  # bodies allowed up to this are read before auth; larger ones stream
BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n >= MIB and n % MIB == 0 else f"{n // KIB} KiB" if n >= KIB else f"{n} bytes"


def too_large_message(scope: Scope) -> str:
    limit = scope.get(MAX_BODY_SIZE_SCOPE_KEY)
    if not isinstance(limit, int):
        return "The request body is too large; nothing was saved."
    return f"The request body is larger than this address accepts (at most {_size(limit)}); nothing was saved."


def _declared_length(request: Request) -> int | None:
    raw = request.headers.get("content-length")
    return whole_number(raw, hi=ANY) if raw is not None else None


async def received_within_limit(request: Request) -> None:
    """Solved before every other dependency (FastAPI(dependencies=...)): a body over the route's limit is a
    413 before any session, user or CSRF work; a small body is read to its end here."""
    if request.method not in BODY_METHODS:
        return
    limit = request.scope.get(MAX_BODY_SIZE_SCOPE_KEY)
    if not isinstance(limit, int):
        return
    declared = _declared_length(request)
    if declared is not None and declared > limit:
        raise HTTPException(413, too_large_message(request.scope))
    route = request.scope.get("route")
    # A route with a declared Form/JSON body had it read (and counted) before its dependencies; the others
    # read it in the handler, after authentication, unless it is read here.
    if limit <= READ_FIRST_UP_TO and getattr(route, "body_field", None) is None and declared != 0:
        await request.body()
