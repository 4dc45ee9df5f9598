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

Bodies first: a slot is worth holding only for a request that can run. A body of up to the app-wide limit
(bodies.DEFAULT_LIMIT) is read to its end *before* its request queues for a slot, so a client that declares
1,000 bytes and sends 7 holds a connection, not a slot (eight such posts held in slots freeze every page, one
freezes every login). Larger bodies (lesson files, bundle uploads) cannot be read here: the app-wide limit,
counted outside this gate, would refuse them before their route raises it. They stream inside their slot,
and at most half of a lane's slots may be held by such bodies at once.

Every body runs on a clock (Apache's mod_reqtimeout rule): `body_timeout_s` to arrive, plus one second per
BODY_MIN_RATE bytes received. A body that falls behind is answered 408 and its connection closed; one still
waiting for a slot never took one. Headers have their own deadline, in the HTTP protocol (app/cli/connections.py).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.web.metrics import ADMISSION_ACTIVE, ADMISSION_REFUSED, ADMISSION_WAITING
from app.web.middleware.bodies import DEFAULT_LIMIT, MIB

log = logging.getLogger(__name__)
QUEUE_FULL, WAITED_TOO_LONG = "queue full", "waited too long"  # why a request is refused: the metric's reason label
REFUSALS = (QUEUE_FULL, WAITED_TOO_LONG)
RETRY_AFTER_S = 5  # what a refused client is told; a class's burst drains in seconds, not minutes
_LOG_EVERY_S = 10.0  # a refusal is logged at most this often (with how many were refused meanwhile)
BODY_TIMEOUT_S = 10.0  # COURSE_WEB_BODY_TIMEOUT's default, for an app built without settings
BODY_MIN_RATE = 64 * 1024  # bytes/s: 512 kbit/s, a poor mobile link; 64 KiB per second of slot held is not free
READ_FIRST_UP_TO = DEFAULT_LIMIT  # bodies up to the app-wide limit are read before a slot (see above)
READ_FIRST_BUDGET = (
    64 * MIB
)  # bytes all requests of a process may declare while read before a slot; past it, they stream

SLOW_HTML = (
    "<!doctype html><html lang=en><meta charset=utf-8><title>Too slow</title>"
    "<h1>Your request did not arrive in time</h1>"
    "<p>It stopped arriving part way. Nothing you sent was saved: check your connection and send it again.</p></html>"
)
SLOW_DETAIL = "The request body did not arrive in time; nothing was saved. Send it again."
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
        self._waiting_gauge = ADMISSION_WAITING.labels(lane=self.name)
        self._active_gauge = ADMISSION_ACTIVE.labels(lane=self.name)
        for why in REFUSALS:  # exported at 0 from the start: a dashboard's rate() reads 0, not "no data"
            ADMISSION_REFUSED.labels(lane=self.name, reason=why)
        self._report()

    def _report(self) -> None:
        """The lane's figures for Prometheus (app/web/metrics.py), after every change."""
        self._waiting_gauge.set(len(self.waiters))
        self._active_gauge.set(self.active)

    @property
    def active(self) -> int:
        return self.concurrency - self.free

    async def acquire(self) -> str:
        """'' once a slot is ours; otherwise why not ('queue full' or 'waited too long')."""
        if self.free and not self.waiters:
            self.free -= 1
            self._report()
            return ""
        if len(self.waiters) >= self.queue:
            return QUEUE_FULL
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(turn)
        self._report()
        try:
            async with asyncio.timeout(self.timeout_s):
                await turn
            return ""
        except TimeoutError:
            if turn.done() and not turn.cancelled():
                return ""  # the slot was handed over just as the time ran out: it is ours
            self._forget(turn)
            return WAITED_TOO_LONG
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
        self._report()

    def release(self) -> None:
        """Hand the slot to the longest waiter still waiting, else free it."""
        try:
            while self.waiters:
                turn = self.waiters.popleft()
                if not turn.done():
                    turn.set_result(None)
                    return
            self.free += 1
        finally:
            self._report()


class BodyTimeout(ClientDisconnect):
    """The body fell behind its clock: to the code reading it, as good as a client that went away."""


class BodyClock:
    """When the rest of a body must have arrived by: `timeout_s` from the start, one second later per
    BODY_MIN_RATE bytes received. Only reads of the body itself are timed, not later waits for a disconnect."""

    def __init__(self, timeout_s: float):
        self.deadline = asyncio.get_running_loop().time() + timeout_s
        self.expired = False
        self.done = False

    async def receive(self, receive: Receive) -> Message:
        if self.done:
            return await receive()
        try:
            async with asyncio.timeout_at(self.deadline):
                message = await receive()
        except TimeoutError:
            self.expired = True
            raise BodyTimeout from None
        body = message.get("body", b"")
        self.deadline += len(body) / BODY_MIN_RATE
        self.done = message["type"] != "http.request" or not message.get("more_body", False)
        return message

    def timed(self, receive: Receive) -> Receive:
        async def timed_receive() -> Message:
            return await self.receive(receive)

        return timed_receive


def declared_body(scope: Scope) -> int | None:
    """The body's declared length; 0 for none; None for a chunked body, whose length is known at its end."""
    length, chunked = 0, False
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            length = int(value) if value.strip().isdigit() else 0  # uvicorn (h11) refused a malformed one
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
    return None if chunked else length


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body read before admission, as one message; after it, the connection's own (a disconnect)."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _wants_json(scope: Scope) -> bool:
    accept = dict(scope.get("headers") or []).get(b"accept", b"")
    return str(scope.get("path", "")).startswith("/api/") or b"application/json" in accept


async def _answer(scope: Scope, send: Send, status: int, html: str, detail: str, *extra: tuple[bytes, bytes]) -> None:
    if _wants_json(scope):
        body, ctype = json.dumps({"detail": detail}).encode(), b"application/json"
    else:
        body, ctype = html.encode(), b"text/html; charset=utf-8"
    headers = [
        (b"content-type", ctype),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class AdmissionGate:
    """ASGI middleware: each request's body is read (or put on its clock), then the request waits its turn in
    its lane (`lane_of(scope)` names it), or gets a 503."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        lanes: list[Lane],
        lane_of: Callable[[Scope], str],
        body_timeout_s: float | None = None,
    ):
        self.app = app
        self.lanes = {lane.name: lane for lane in lanes}
        # Bodies too large to read first stream inside a slot: half of a lane's slots at most, so uploads that
        # trickle in at the minimum rate never hold every page's slot.
        self.streaming = {
            lane.name: Lane(f"{lane.name} (large bodies)", max(1, lane.concurrency // 2), lane.queue, lane.timeout_s)
            for lane in lanes
        }
        self.lane_of = lane_of
        # None: COURSE_WEB_BODY_TIMEOUT from the app's settings (Starlette puts the app in the scope)
        self.body_timeout_s = body_timeout_s
        self.reading_first = 0  # bytes declared by the bodies being read before admission
        self.refused = 0
        self._last_log = 0.0

    def _body_timeout(self, scope: Scope) -> float:
        if self.body_timeout_s is None:
            settings = getattr(getattr(scope.get("app"), "state", None), "settings", None)
            self.body_timeout_s = float(getattr(settings, "web_body_timeout_s", BODY_TIMEOUT_S))
        return self.body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        lane = self.lanes[self.lane_of(scope)]
        length = declared_body(scope)
        if length == 0:
            await self._admitted(scope, receive, send, lane, None)
            return
        clock = BodyClock(self._body_timeout(scope))
        if length is not None and length <= READ_FIRST_UP_TO and self.reading_first + length <= READ_FIRST_BUDGET:
            self.reading_first += length
            try:
                body = await self._read_first(clock, receive)
            except BodyTimeout:
                await self._too_slow(scope, send)
                return
            finally:
                self.reading_first -= length
            if body is not None:  # None: the client went away; nobody is left to answer
                await self._admitted(scope, _replay(body, receive), send, lane, None)
            return
        streaming = self.streaming[lane.name]
        why = await streaming.acquire()
        if why:
            await self._busy(scope, send, streaming, why)
            return
        try:
            await self._admitted(scope, clock.timed(receive), send, lane, clock)
        finally:
            streaming.release()

    @staticmethod
    async def _read_first(clock: BodyClock, receive: Receive) -> bytes | None:
        pieces = []
        while True:
            message = await clock.receive(receive)
            if message["type"] != "http.request":
                return None
            pieces.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(pieces)

    async def _admitted(self, scope: Scope, receive: Receive, send: Send, lane: Lane, clock: BodyClock | None) -> None:
        why = await lane.acquire()
        if why:
            await self._busy(scope, send, lane, why)
            return
        started = False

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if clock is not None and clock.expired:  # whatever the app made of the missing body, the answer is 408
                if not started:
                    started = True
                    await self._too_slow(scope, send)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, guarded_send)
        except Exception:
            if clock is None or not clock.expired:
                raise
            if not started:
                await self._too_slow(scope, send)
        finally:
            lane.release()

    async def _too_slow(self, scope: Scope, send: Send) -> None:
        """408, and the connection closed: the rest of the body, if it ever comes, is not read."""
        await _answer(scope, send, 408, SLOW_HTML, SLOW_DETAIL, (b"connection", b"close"))

    async def _busy(self, scope: Scope, send: Send, lane: Lane, why: str) -> None:
        self.refused += 1
        ADMISSION_REFUSED.labels(lane=lane.name, reason=why).inc()
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
        detail = f"The course is busy ({why}); nothing was changed. Try again in {RETRY_AFTER_S} seconds."
        html = BUSY_HTML.format(s=RETRY_AFTER_S)
        await _answer(scope, send, 503, html, detail, (b"retry-after", str(RETRY_AFTER_S).encode()))
