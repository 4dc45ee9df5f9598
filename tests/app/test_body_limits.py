"""Request bodies are limited on the bytes actually received, per route, before any authentication work.

What this guards against: a 1 GB chunked JSON body sent anonymously to /api/v1/jobs grew the server from 373 MB to
3.4 GB before its 403, and a 300 MB multipart body to /login was spooled to disk first. These tests send
such bodies to a real server over a raw socket (Content-Length, chunked, and no length at all) and check
the answer, how much the server took in, its memory and its temporary folder.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from app.web.middleware.bodies import AUTHORING_LIMIT, DEFAULT_LIMIT, UPLOAD_LIMIT
from tests.app.live import Live, course_server

MIB = 1024 * 1024
CHUNK = 64 * 1024


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[Live]:
    """One server for the whole module (starting one checks the labs: seconds), on SQLite: the limits are the
    body middleware's, the same whichever database is behind it."""
    tmp = tmp_path_factory.mktemp("limits")
    db_url = f"sqlite:///{tmp / 'course.db'}"
    (tmp / "spool").mkdir()
    # TMPDIR: where Starlette's multipart parser would spool a file part (tempfile.SpooledTemporaryFile)
    with course_server(tmp, db_url, TMPDIR=str(tmp / "spool")) as server:
        yield server


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes, sent: int, seconds: float):
        self.status, self.headers, self.body, self.sent, self.seconds = status, headers, body, sent, seconds

    def text(self) -> str:
        return self.body.decode(errors="replace")


def raw_request(port: int, head: str, body: Iterable[bytes], timeout: float = 60.0) -> Answer:
    """Send `head` then the body pieces on one connection while reading; stop sending once the server answers.

    The reader runs alongside the sender so a server that answers early (413) is heard before it closes the
    connection on the rest of the body.
    """
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    answered = threading.Event()
    sent = 0

    def send() -> None:
        nonlocal sent
        try:
            sock.sendall(head.encode())
            for piece in body:
                if answered.is_set():
                    return
                sock.sendall(piece)
                sent += len(piece)
        except OSError:  # the server closed the connection on the rest of the body: expected after a 413
            pass

    started = time.monotonic()
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    data = b""
    try:
        while True:
            try:
                piece = sock.recv(65536)
            except ConnectionResetError:
                break
            if not piece:
                break
            data += piece
            head_end = data.find(b"\r\n\r\n")
            if head_end >= 0:
                length = re.search(rb"(?i)\r\ncontent-length: (\d+)", data[:head_end])
                if length and len(data) >= head_end + 4 + int(length.group(1)):
                    break
    finally:
        answered.set()
        seconds = time.monotonic() - started
        sock.close()
        sender.join(timeout=10)
    assert data.startswith(b"HTTP/1.1 "), f"no HTTP answer (got {data[:200]!r}) after sending {sent} bytes"
    head_end = data.find(b"\r\n\r\n")
    lines = data[:head_end].decode().split("\r\n")
    headers = {k.lower(): v for k, v in (ln.split(": ", 1) for ln in lines[1:])}
    return Answer(int(lines[0].split()[1]), headers, data[head_end + 4 :], sent, seconds)


def chunked(total: int, piece: bytes = b"x" * CHUNK) -> Iterator[bytes]:
    """`total` bytes in HTTP/1.1 chunked framing, one chunk of `piece` at a time."""
    sent = 0
    while sent < total:
        yield b"%x\r\n%s\r\n" % (len(piece), piece)
        sent += len(piece)
    yield b"0\r\n\r\n"


def plain(total: int) -> Iterator[bytes]:
    for _ in range(total // CHUNK):
        yield b"x" * CHUNK


def _head(method: str, path: str, *headers: str) -> str:
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n"


def _spooled(live: Live) -> list[Path]:
    return [p for p in (live.log.parent / "spool").rglob("*") if p.is_file()]


def test_a_chunked_json_body_stops_at_the_limit_without_growing_the_server(live):
    """A 1 GB anonymous chunked body, cut to 256 MB: refused after about a megabyte."""
    before = live.rss_bytes()
    head = _head("POST", "/api/v1/jobs", "Content-Type: application/json", "Transfer-Encoding: chunked")
    answer = raw_request(live.port, head, chunked(256 * MIB, b'{"lab": "fp8-step", "params": {}}' * 2000))
    assert answer.status == 413, answer.text()
    detail = json.loads(answer.body)["detail"]
    assert detail == "The request body is larger than this address accepts (at most 1 MiB); nothing was saved."
    assert answer.sent < 32 * MIB, f"the client got to send {answer.sent} bytes before the 413"
    assert live.rss_bytes() - before < 48 * MIB


def test_a_declared_length_over_the_limit_is_refused_before_any_of_it_is_sent(live):
    head = _head("POST", "/api/v1/jobs", "Content-Type: application/json", f"Content-Length: {1024 * MIB}")
    answer = raw_request(live.port, head, [])
    assert answer.status == 413 and answer.text() == "Content Too Large"  # Starlette's own answer to a declared size


def test_a_multipart_body_to_login_is_neither_read_nor_spooled(live):
    """A 300 MB multipart post to /login: refused at the default limit, nothing on disk."""
    before = live.rss_bytes()
    boundary = "b0undary"
    part = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="email"\r\n\r\nann@example.org\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()

    def body() -> Iterator[bytes]:
        yield b"%x\r\n%s\r\n" % (len(part), part)
        yield from chunked(300 * MIB)

    head = _head(
        "POST", "/login", f"Content-Type: multipart/form-data; boundary={boundary}", "Transfer-Encoding: chunked"
    )
    answer = raw_request(live.port, head, body())
    assert answer.status == 413 and "at most 1 MiB" in answer.text()
    assert answer.sent < 32 * MIB
    assert _spooled(live) == []
    assert live.rss_bytes() - before < 48 * MIB


@pytest.mark.parametrize("framing", ["chunked", "length"])
def test_the_limit_comes_before_authentication(live, framing):
    """An anonymous post bigger than the limit to a page that needs a login gets the 413, not the login redirect
    (the form route reads its body in the handler, after CurrentUser: the limit is checked first)."""
    size = DEFAULT_LIMIT + MIB
    framing_header = "Transfer-Encoding: chunked" if framing == "chunked" else f"Content-Length: {size}"
    head = _head("POST", "/labs/env-check/jobs", "Content-Type: application/x-www-form-urlencoded", framing_header)
    answer = raw_request(live.port, head, chunked(size) if framing == "chunked" else plain(size))
    assert answer.status == 413, answer.text()[:300]


def test_a_post_without_any_length_is_an_empty_body_not_a_hang(live):
    """No Content-Length and no chunking: HTTP/1.1 says there is no body; the answer comes at once."""
    head = _head("POST", "/api/v1/jobs", "Content-Type: application/json")
    answer = raw_request(live.port, head, [b"trailing bytes the server must not wait for"], timeout=10)
    assert answer.status in (400, 401, 403, 422) and answer.seconds < 5


def test_routes_within_their_own_limits_still_work(live):
    """A small form works; the upload route takes a body over the default limit (then judges the zip); an
    instructor's lesson file may be bigger than a form, and the response says the upload limit in MB."""
    assert DEFAULT_LIMIT < AUTHORING_LIMIT < UPLOAD_LIMIT
    import httpx2

    with httpx2.Client(base_url=live.base, trust_env=False, timeout=30) as c:
        token = re.search(r'name="csrf_token" value="([^"]+)"', c.get("/register").text).group(1)
        form = {
            "email": f"ann-{live.port}@example.org",
            "password": "correct horse",
            "display_name": "Ann",
            "csrf_token": token,
        }
        assert c.post("/register", data=form).status_code == 303
        csrf = c.get("/api/v1/me").json()["csrf_token"]
        big = b"PK" + b"\0" * (3 * MIB)  # over the default limit, under the bundle limit: read, then judged
        r = c.post(
            "/api/v1/bundles", files={"bundle": ("run.zip", big, "application/zip")}, headers={"X-CSRF-Token": csrf}
        )
        assert r.status_code == 422 and r.json()["detail"].startswith("Upload refused:"), r.text
        over = b"PK" + b"\0" * (UPLOAD_LIMIT + MIB)
        r = c.post(
            "/api/v1/bundles", files={"bundle": ("run.zip", over, "application/zip")}, headers={"X-CSRF-Token": csrf}
        )
        assert r.status_code == 413
