"""Connections: how long one may take to send its request's headers, and how many one address may hold open.

    uvicorn.run(app, http=connections.protocol(settings), ...)        (app/cli/serve.py)

uvicorn 0.55's h11 protocol (uvicorn/protocols/http/h11_impl.py) has a keep-alive timer between requests and
nothing else: a connection that sends half a request line, or nothing at all, is kept for ever, and its
`limit_concurrency` counts such connections without closing any (4,150 of them make every request
a 503). `GuardedH11Protocol` adds two things to it and changes nothing else:

- a header deadline: from the moment the server waits for a request (connection made, or the previous
  response sent) until h11 has that request's headers. A connection that sent part of its headers by then
  is answered 408 and closed; one that sent nothing is closed without a word (a browser's idle preconnect).
  The body has its own clock, in the admission gate (app/web/middleware/admission.py).
- a cap on the connections one client address holds open in this web process (an IPv6 /64 counts as one
  address: one host is handed the whole prefix). The next one gets a 503 with Retry-After and is closed.
  The proxies named in uvicorn's `FORWARDED_ALLOW_IPS` (the same ones whose X-Forwarded-For is believed)
  are not capped: every learner behind them arrives from their address.

Both act before the request reaches the app, so neither costs an admission slot, a thread or a database
connection.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import ipaddress
import weakref
from typing import Any, cast

import h11
from uvicorn.config import Config
from uvicorn.middleware.proxy_headers import _TrustedHosts
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from app.core.config import Settings

LINGER_S = 2.0  # a refused connection stays open this long for its answer to be read, then it is closed
RETRY_AFTER_S = 5


def _answer(status: str, text: str, *extra: str) -> bytes:
    body = text.encode()
    head = [f"HTTP/1.1 {status}", "content-type: text/plain; charset=utf-8", f"content-length: {len(body)}"]
    head += [*extra, "connection: close", "", ""]
    return "\r\n".join(head).encode() + body


TOO_SLOW = _answer(
    "408 Request Timeout", "The request's headers did not arrive in time; nothing was done. Send it again.\n"
)
TOO_MANY = _answer(
    "503 Service Unavailable",
    f"Too many open connections from your address; nothing was done. Try again in {RETRY_AFTER_S} seconds.\n",
    f"retry-after: {RETRY_AFTER_S}",
)

# Open connections per client address, per server (one per web process; tests may run several in one process).
_open: weakref.WeakKeyDictionary[ServerState, collections.Counter[str]] = weakref.WeakKeyDictionary()
_trusted: dict[str, _TrustedHosts] = {}


def address_key(host: str) -> str:
    """What the cap counts: the address, or an IPv6 address's /64 (a host may use any address in its prefix)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host  # a Unix socket path or a name: counted as written
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:  # ::ffff:a.b.c.d on a dual-stack socket is the IPv4 client
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class GuardedH11Protocol(H11Protocol):
    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        header_timeout_s: float,
        per_address: int,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.header_timeout_s = header_timeout_s
        self.per_address = per_address
        self.header_timer: asyncio.TimerHandle | None = None
        self.heard = False  # any byte of the request being waited for
        self.counted: str | None = None  # the address key this connection is counted under
        self.refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        host = self.client[0] if self.client else ""
        forwarded = cast(str, self.config.forwarded_allow_ips) if self.config.proxy_headers else ""
        trusted = _trusted.get(forwarded) or _trusted.setdefault(forwarded, _TrustedHosts(forwarded))
        if host and not (forwarded and host in trusted):
            counts = _open.setdefault(self.server_state, collections.Counter())
            key = address_key(host)
            if counts[key] >= self.per_address:
                self._refuse()
                return
            counts[key] += 1
            self.counted = key
        self._await_headers()

    def _refuse(self) -> None:
        """Answer at once and stop sending; read and drop whatever the client still sends until it hangs up or
        LINGER_S passes, so closing does not reset the connection before the answer is read."""
        self.refused = True
        self.transport.write(TOO_MANY)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)

    def _await_headers(self) -> None:
        self.heard = False
        self._stop_header_timer()
        self.header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _stop_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _headers_too_slow(self) -> None:
        self.header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.heard:
            self.transport.write(TOO_SLOW)
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        self.heard = True
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # h11 has the request's headers (or gave up on them: a 400)
            self._stop_header_timer()

    def eof_received(self) -> None:
        if self.refused:
            self.transport.close()
        super().eof_received()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # A kept-alive connection waits for its next request's headers: the same deadline, from now. (A pipelined
        # request already read leaves h11 out of IDLE, and nothing is armed.)
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        if self.counted is not None:
            counts = _open.get(self.server_state)
            if counts is not None:
                counts[self.counted] -= 1
                if counts[self.counted] <= 0:
                    del counts[self.counted]
            self.counted = None
        super().connection_lost(exc)


def protocol(settings: Settings) -> type[H11Protocol]:
    """The protocol class uvicorn builds each connection with, carrying this server's limits. A partial of a
    module-level class, so uvicorn can hand it to the web processes it spawns (it pickles its config)."""
    made = functools.partial(
        GuardedH11Protocol,
        header_timeout_s=settings.web_header_timeout_s,
        per_address=settings.web_connections_per_address,
    )
    return cast(type[H11Protocol], made)
