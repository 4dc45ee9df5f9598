"""Admission: how many requests one web process works on at once, and what happens to the rest.

    AdmissionGate(app, lanes=[Lane("pages", 8, 512, 15.0), Lane("passwords", 1, 512, 60.0)], lane_of=...)

Each request waits in one lane. At most `concurrency` requests of a lane are inside the app at once (the
lanes' concurrencies add up to the thread pool and the database pool, see app/web/factory.py and app/core/db.py, so an
admitted request never waits for either). Up to `queue` more wait their turn in arrival order; a request
that would make the queue longer, or that waited `timeout_s` without a turn, is answered at once with 503
and a Retry-After header. Overload therefore costs a learner a short wait or a clear "try again in a few
seconds", never a 30 s hang that ends in a 500.

Why lanes: a password hash (argon2, ~35 ms of one core and 19 MiB each) is a dozen page renders of
work. A class that registers at once would otherwise fill every slot with hashing and leave page loads
queued behind it; in a lane of their own, hashes run a few at a time (bounding their memory too) while
pages keep their slots.

uvicorn's own `limit_concurrency` is no substitute: it counts open connections (idle keep-alive ones too)
and answers 503 without Retry-After (uvicorn/protocols/http/h11_impl.py, flow_control.service_unavailable,
uvicorn 0.54); the server sets it high, as a cap on connections, not as the overload policy.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)
RETRY_AFTER_S = 5  # what a refused client is told; a class's burst drains in seconds, not minutes
_LOG_EVERY_S = 10.0  # a refusal is logged at most this often (with how many were refused meanwhile)

BUSY_HTML = (
    "<!doctype html><html lang=en><meta charset=utf-8><title>Busy</title>"
    "<h1>The course is busy right now</h1>"
    "<p>Many people are using it at this moment. Nothing you sent was saved: try again in {s} seconds.</p></html>"
)


@dataclass
class Lane:
    """One queue: `concurrency` requests at once, at most `queue` waiting, each at most `timeout_s`."""

    name: str
    concurrency: int
    queue: int
    timeout_s: float
    free: int = field(init=False)
    waiters: collections.deque[asyncio.Future[None]] = field(init=False, default_factory=collections.deque)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"{self.name} lane concurrency: got {self.concurrency}, expected at least 1")
        self.free = self.concurrency

    @property
    def active(self) -> int:
        return self.concurrency - self.free

    async def acquire(self) -> str:
        """'' once a slot is ours; otherwise why not ('queue full' or 'waited too long')."""
        if self.free and not self.waiters:
            self.free -= 1
            return ""
        if len(self.waiters) >= self.queue:
            return "queue full"
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(turn)
        try:
            async with asyncio.timeout(self.timeout_s):
                await turn
            return ""
        except TimeoutError:
            if turn.done() and not turn.cancelled():
                return ""  # the slot was handed over just as the time ran out: it is ours
            self._forget(turn)
            return "waited too long"
        except BaseException:  # the client went away or the server is stopping
            if turn.done() and not turn.cancelled():
                self.release()
            else:
                self._forget(turn)
            raise

    def _forget(self, turn: asyncio.Future[None]) -> None:
        try:
            self.waiters.remove(turn)
        except ValueError:
            pass

    def release(self) -> None:
        """Hand the slot to the longest waiter still waiting, else free it."""
        while self.waiters:
            turn = self.waiters.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.free += 1


class AdmissionGate:
    """ASGI middleware: each request waits its turn in its lane (`lane_of(scope)` names it), or gets a 503."""

    def __init__(self, app: ASGIApp, *, lanes: list[Lane], lane_of: Callable[[Scope], str]):
        self.app = app
        self.lanes = {lane.name: lane for lane in lanes}
        self.lane_of = lane_of
        self.refused = 0
        self._last_log = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        lane = self.lanes[self.lane_of(scope)]
        why = await lane.acquire()
        if why:
            await self._busy(scope, send, lane, why)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            lane.release()

    async def _busy(self, scope: Scope, send: Send, lane: Lane, why: str) -> None:
        self.refused += 1
        now = time.monotonic()
        if now - self._last_log >= _LOG_EVERY_S:
            log.warning(
                "busy: %s lane, %s (%d working, %d waiting); %d request(s) answered 503 since the last report",
                lane.name,
                why,
                lane.active,
                len(lane.waiters),
                self.refused,
            )
            self._last_log, self.refused = now, 0
        path: str = scope.get("path", "")
        accept = dict(scope.get("headers") or []).get(b"accept", b"")
        if path.startswith("/api/") or b"application/json" in accept:
            detail = f"The course is busy ({why}); nothing was changed. Try again in {RETRY_AFTER_S} seconds."
            body, ctype = json.dumps({"detail": detail}).encode(), b"application/json"
        else:
            body, ctype = BUSY_HTML.format(s=RETRY_AFTER_S).encode(), b"text/html; charset=utf-8"
        headers = [
            (b"content-type", ctype),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(RETRY_AFTER_S).encode()),
            (b"cache-control", b"no-store"),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})
