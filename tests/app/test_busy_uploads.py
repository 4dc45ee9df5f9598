"""A body larger than the default limit that the admission gate refuses for overload is answered 503 with
Retry-After, not "413 Content Too Large": a learner whose upload met a busy server must be told to retry, not that
the file is too big. The refusal is counted in /metrics.

A server with two page slots and no queue: one stalled upload holds the one slot large bodies may take, so the next
one has nowhere to wait.
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator

import pytest

from tests.app.live import Live, course_server
from tests.app.test_metrics import samples, value
from tests.app.test_slow_clients import read_to_end, status_of

TOKEN = "busy-metrics-token-0123456789"
PREVIEW = "/instructor/lessons/l06/preview"
DECLARED = 1_500_000  # over the 1 MiB default, within the authoring route's 2 MiB


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("busy")
    env = {
        "COURSE_WEB_CONCURRENCY": "2",
        "COURSE_WEB_QUEUE": "0",
        "COURSE_WEB_BODY_TIMEOUT": "20",
        "COURSE_METRICS_TOKEN": TOKEN,
    }
    with course_server(tmp, f"sqlite:///{tmp / 'course.db'}", **env) as server:
        yield server


def _post_head(live: Live, source: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", live.port), timeout=30, source_address=(source, 0))
    sock.sendall(
        (
            f"POST {PREVIEW} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {DECLARED}\r\nConnection: close\r\n\r\n"
        ).encode()
        + b"text=a"
    )
    return sock


def test_an_upload_refused_for_overload_is_a_503_with_retry_after(live):
    held = _post_head(live, "127.0.6.1")  # streams in the large-body slot, and stalls
    try:
        # the held upload is in its slot once a second one finds no room; poll for that rather than sleep
        for _ in range(50):
            sock = _post_head(live, "127.0.6.2")
            answer = read_to_end(sock)
            sock.close()
            if status_of(answer) != 408:
                break
        assert status_of(answer) == 503, answer[:300]
        assert b"retry-after: 5" in answer.lower()
        assert b"Content Too Large" not in answer
        # and the refusal is counted for the operator's dashboard (app/web/metrics.py)
        req = urllib.request.Request(live.base + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            found = samples(r.read().decode())
        refused = value(found, "course_admission_refused_total", lane="pages (large bodies)", reason="queue full")
        assert refused >= 1
    finally:
        held.close()
