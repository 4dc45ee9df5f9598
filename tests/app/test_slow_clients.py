"""Slow and stalled clients cannot take the site from everyone else.

Reproduced before the fix: eight POSTs declaring 1,000 bytes and sending 7 made every other request answer
503; one such POST /login blocked every login; connections that never finished their headers stayed open for
ever. These tests hold such connections against a real server (`python -m app serve`, raw sockets, several
loopback source addresses standing for several clients) and check what everyone else gets, and that the
stalled connections are answered and closed.
"""

from __future__ import annotations

import http.cookiejar
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from app.cli.connections import address_key
from tests.app.live import Live, course_server

DEADLINE_S = 2  # the header and body deadlines of the server under test (COURSE_WEB_HEADER/BODY_TIMEOUT)
CAP = 4  # COURSE_WEB_CONNECTIONS_PER_ADDRESS
SLACK_S = 8.0  # how much later than its deadline a stalled connection may be closed on a busy test machine
TRUSTED = "127.0.0.40"  # a "proxy" named in COURSE_FORWARDED_ALLOW_IPS: its connections are not capped


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[Live]:
    """One server for the module, on SQLite (the limits are the HTTP layer's, the same for either database):
    two page slots, so a handful of held requests would fill them, and short deadlines (the queue's wait is
    longer than them, so a request queued behind a stalled one gets its turn rather than a 503)."""
    tmp = tmp_path_factory.mktemp("slow")
    env = {
        "COURSE_WEB_CONCURRENCY": "2",
        "COURSE_WEB_QUEUE_TIMEOUT": "5",
        "COURSE_WEB_HEADER_TIMEOUT": str(DEADLINE_S),
        "COURSE_WEB_BODY_TIMEOUT": str(DEADLINE_S),
        "COURSE_WEB_CONNECTIONS_PER_ADDRESS": str(CAP),
        "COURSE_FORWARDED_ALLOW_IPS": f"127.0.0.1,{TRUSTED}",
    }
    with course_server(tmp, f"sqlite:///{tmp / 'course.db'}", **env) as server:
        yield server


def connect(live: Live, source: str, timeout: float = DEADLINE_S + SLACK_S) -> socket.socket:
    """A connection from `source`, a loopback address of its own (all of 127/8 reaches this host)."""
    return socket.create_connection(("127.0.0.1", live.port), timeout=timeout, source_address=(source, 0))


def read_to_end(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection; socket.timeout if it never does."""
    data = b""
    while True:
        try:
            piece = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not piece:
            return data
        data += piece


def partial_post(live: Live, source: str, path: str, declared: int = 1000) -> socket.socket:
    sock = connect(live, source)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {declared}\r\n\r\n"
    )
    sock.sendall(head.encode() + b"email=a")  # 7 bytes of the body, and nothing more
    return sock


def status_of(answer: bytes) -> int:
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", answer)
    assert match, answer[:200]
    return int(match.group(1))


def get(live: Live, path: str) -> int:
    try:
        with urllib.request.urlopen(live.base + path, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def login_attempt(live: Live) -> int:
    """A whole login form (a wrong password) with its cookie and CSRF token: the status it is answered with."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    html = opener.open(live.base + "/login", timeout=30).read().decode()
    token = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert token, html[:500]
    form = {"email": "nobody@example.org", "password": "wrong password", "csrf_token": token.group(1)}
    try:
        with opener.open(live.base + "/login", urllib.parse.urlencode(form).encode(), timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_partial_bodies_hold_no_slot_and_are_answered_408_then_closed(live):
    # eight posts to pages and eight to /login, each from its own address (the cap is per address), all stalled
    held = [partial_post(live, f"127.0.1.{i}", "/logout") for i in range(8)]
    held += [partial_post(live, f"127.0.2.{i}", "/login") for i in range(8)]
    try:
        assert get(live, "/login") == 200  # 503 after the 5 s queue wait while the posts held both page slots
        assert get(live, "/static/app.css") == 200
        login = login_attempt(live)
        assert login not in (408, 503) and login < 500, login  # the password lane was free to check it
        for sock in held:
            answer = read_to_end(sock)  # socket.timeout here: the stalled post was never answered nor closed
            assert status_of(answer) == 408, answer[:300]
            assert b"did not arrive in time" in answer and b"connection: close" in answer.lower()
    finally:
        for sock in held:
            sock.close()
    assert "Traceback" not in live.log.read_text()


def test_a_large_body_streams_in_its_slot_on_a_clock_and_leaves_half_the_slots_to_pages(live):
    """Bodies too large to read first (a lesson file over 1 MiB) take at most half a lane's slots (here one);
    stalled, each is answered 408 and closed, the ones queued behind it once their turn comes."""
    preview = "/instructor/lessons/l06/preview"
    held = [partial_post(live, f"127.0.3.{i}", preview, declared=1_500_000) for i in range(3)]
    try:
        assert get(live, "/login") == 200
        answers = sorted(status_of(read_to_end(sock)) for sock in held)
    finally:
        for sock in held:
            sock.close()
    assert answers == [408, 408, 408]


def test_a_connection_stalled_on_its_headers_is_answered_408_and_closed_within_the_deadline(live):
    sock = connect(live, "127.0.4.1")
    sock.sendall(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the blank line that ends the headers never comes
    started = time.monotonic()
    answer = read_to_end(sock)
    sock.close()
    assert status_of(answer) == 408 and b"headers did not arrive in time" in answer
    assert time.monotonic() - started < DEADLINE_S + SLACK_S


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(live):
    sock = connect(live, "127.0.4.2")
    assert read_to_end(sock) == b""
    sock.close()


def test_a_kept_alive_connection_gets_the_same_header_deadline_for_its_next_request(live):
    sock = connect(live, "127.0.4.3")
    sock.sendall(b"GET /static/favicon.svg HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    first = b""
    while b"</svg>" not in first:
        first += sock.recv(65536)
    assert status_of(first) == 200
    sock.sendall(b"GET /login HTTP/1.1\r\n")  # the next request stalls part way through its headers
    answer = read_to_end(sock)
    sock.close()
    assert status_of(answer) == 408


def test_the_per_address_cap_refuses_the_next_connection_with_503_and_retry_after(live):
    held = [connect(live, "127.0.5.1") for _ in range(CAP)]
    try:
        extra = connect(live, "127.0.5.1")
        answer = read_to_end(extra)
        extra.close()
        assert status_of(answer) == 503 and b"retry-after: 5" in answer.lower(), answer
        assert b"Too many open connections from your address" in answer
        other = connect(live, "127.0.5.2")  # another address is not affected
        other.sendall(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert status_of(read_to_end(other)) == 200
        other.close()
    finally:
        for sock in held:
            sock.close()


def test_a_trusted_proxy_is_not_capped(live):
    """Behind a proxy every learner arrives from its address: capping it would cap the class."""
    held = [connect(live, TRUSTED) for _ in range(CAP + 2)]
    try:
        last = held[-1]
        last.sendall(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert status_of(read_to_end(last)) == 200
    finally:
        for sock in held:
            sock.close()


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),  # the same host's prefix: one address
        ("::ffff:203.0.113.7", "203.0.113.7"),  # an IPv4 client on a dual-stack socket
    ],
)
def test_the_cap_counts_an_ipv6_prefix_as_one_address(host, key):
    assert address_key(host) == key
