"""The Ray dispatcher's health: whether it can reach the Ray head, and the files its health check reads.

    python -m app dispatcher-health   # 0 if this host's dispatcher completed a cycle lately (compose health check)

The dispatcher (app/executors/ray.py) probes RAY_ADDRESS before ray.init (`wait_for_head`: a TCP connect and an
HTTP/2 greeting answer in seconds, where ray.init waits in C++ for minutes), connects (`connect`), and records each
cycle through `Health`; `dispatcher_health_main` reads what it left. Nothing here touches the database, the
queue or Ray until `connect`, so the health check needs none of them.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from app.core.digits import whole_number

log = logging.getLogger("app.executors.ray")  # the dispatcher's logger: one name in its log lines

# Touched after each cycle that completed (Ray listed, the database read and written), never before one: a
# dispatcher that runs but cannot reach its database or Ray must fail its health check, not pass it.
ALIVE_FILE = Path(tempfile.gettempdir()) / "course-dispatcher.alive"
FAILING_FILE = ALIVE_FILE.with_suffix(".failing")  # why the last cycle or connect failed; removed by a good cycle
# A cycle is TICK_S (app/executors/ray.py) plus its database and Ray calls; this much without one is a dispatcher
# that is stuck or failing (compose: checked every 10 s, unhealthy after 3 misses).
ALIVE_S = 30.0


def dispatcher_health_main() -> int:
    """`python -m app dispatcher-health`: 0 if this container's dispatcher completed a cycle in the last ALIVE_S
    seconds; otherwise 1, with the dispatcher's last error when it left one."""
    try:
        why = "; its last error: " + FAILING_FILE.read_text().strip()
    except OSError:
        why = ""
    try:
        age = time.time() - ALIVE_FILE.stat().st_mtime
    except OSError:
        print(f"the dispatcher has not completed a cycle yet{why}", file=sys.stderr)
        return 1
    if age > ALIVE_S:
        print(f"the dispatcher last completed a cycle {age:.0f} s ago{why}", file=sys.stderr)
        return 1
    return 0


# Reaching the head. ray.init is not the probe: against an address where nothing listens, Ray 2.60 makes 20
# GcsClient attempts of ~40 s each (RAY_NUM_REDIS_GET_RETRIES; ray/_private/node.py `_init_gcs_client`) inside C++,
# where no signal handler runs, logging only its own "Failed to connect to GCS" lines; a server being stopped then
# waits out its 15 s for the dispatcher. A plain TCP connect with a timeout answers in seconds and can be stopped.
CONNECT_PROBE_S = 2.0  # a head that has not accepted a TCP connection in this long is taken as not there
CONNECT_RETRY_S = 5.0
CONNECT_REMIND_S = 60.0  # the error is logged again this often while the head stays away
HEAD_START = "ray start --head --port={port} --num-cpus=0 --num-gpus=0"  # docs/deploying.md, Bare metal with Ray


def head_address(address: str) -> tuple[str, int] | None:
    """(host, port) of a `host:port` RAY_ADDRESS; None for `auto` or a `ray://` client address, which Ray
    resolves itself (and fails fast on)."""
    host, sep, port = address.rpartition(":")
    number = whole_number(port, hi=65535)
    if not sep or "://" in address or number is None:
        return None
    return host.strip("[]"), number


# The client's opening of an HTTP/2 connection (RFC 9113 §3.4): the preface, then an empty SETTINGS frame. A gRPC
# server, the Ray head's GCS among them, answers with a SETTINGS frame of its own (checked against a Ray 2.60 head).
H2_GREETING = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
H2_SETTINGS = 4  # the frame type, byte 3 of a frame's 9-byte header


def not_a_ray_head(where: tuple[str, int]) -> str | None:
    """Why what listens at `where` cannot be a Ray head, or None when it may be one; OSError when nothing accepts a
    TCP connection. ray.init against another kind of server (an HTTP server, Redis on the old default port) waits
    in C++ for minutes as it does against nothing; a server that does not answer HTTP/2 is no GCS. A cluster with
    RAY_USE_TLS speaks TLS first, so only the TCP connection is checked there."""
    with socket.create_connection(where, timeout=CONNECT_PROBE_S) as conn:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return None
        conn.sendall(H2_GREETING)
        got = b""
        try:
            while len(got) < 9 and (chunk := conn.recv(9 - len(got))):
                got += chunk
        except OSError:  # a timeout, or the server hung up on the greeting
            pass
    if len(got) == 9 and got[3] == H2_SETTINGS:
        return None
    reply = f"its reply began {got[:12]!r}" if got else f"it said nothing in {CONNECT_PROBE_S:.0f} s"
    return f"something answers at {where[0]}:{where[1]} but it is no Ray head (not gRPC: {reply})"


def cannot_reach(address: str, why: str) -> str:
    """The one error an operator needs when the dispatcher has no Ray cluster to use."""
    where = head_address(address)
    port = where[1] if where else 6379
    named = f"RAY_ADDRESS={address}" if address != "auto" else "RAY_ADDRESS (unset: Ray looked for a head on this host)"
    return (
        f"the dispatcher cannot reach the Ray cluster at {named}: {why.rstrip('.')}. Start the head there first "
        f"(`{HEAD_START.format(port=port)}`, docs/deploying.md: Bare metal with Ray) or set RAY_ADDRESS to the head's host:port; "
        f"no lab job runs until the dispatcher connects"
    )


class Health:
    """What the dispatcher leaves for `dispatcher_health_main`: ALIVE_FILE touched after each completed cycle, and
    FAILING_FILE saying why the last cycle or connect failed (removed by the next good cycle)."""

    def __init__(self) -> None:
        self._failing = FAILING_FILE.exists()

    def starting(self) -> None:
        ALIVE_FILE.unlink(missing_ok=True)  # a previous run's last cycle says nothing about this one

    def completed(self) -> None:
        ALIVE_FILE.touch()
        if self._failing:
            FAILING_FILE.unlink(missing_ok=True)
            self._failing = False

    def failed(self, why: str) -> None:
        try:
            FAILING_FILE.write_text(f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC: {why}\n")
            self._failing = True
        except OSError:  # the health check then says less, which is no reason to stop dispatching
            log.debug("could not write %s", FAILING_FILE, exc_info=True)


def wait_for_head(address: str, stopping: threading.Event, health: Health) -> bool:
    """Until a server that may be a Ray head answers at `address` (True: `not_a_ray_head`) or `stopping` is set
    (False); the reason is logged once a minute and left for the health check meanwhile."""
    where = head_address(address)
    if where is None:
        return not stopping.is_set()
    logged_at: float | None = None
    while not stopping.is_set():
        try:
            why = not_a_ray_head(where)
            if why is None:
                if logged_at is not None:
                    log.info("the Ray head at RAY_ADDRESS=%s answers now; connecting", address)
                return True
        except OSError as exc:
            why = f"nothing answers at {where[0]}:{where[1]} ({exc.strerror or exc})"
        if logged_at is None or time.monotonic() - logged_at >= CONNECT_REMIND_S:
            log.error("%s; trying again every %.0f s", cannot_reach(address, why), CONNECT_RETRY_S)
            logged_at = time.monotonic()
        health.failed(cannot_reach(address, why))
        stopping.wait(CONNECT_RETRY_S)
    return False


def connect(address: str, who: str, health: Health) -> bool:
    """ray.init; False (with the error logged once, no traceback, and left for the health check) if it fails."""
    import ray

    try:
        ray.init(
            address=address,
            namespace="course",
            log_to_driver=False,  # lab output comes back through the stream, not the driver's stdout
            logging_level=logging.WARNING,
        )
    except Exception as exc:  # the head answered the probe but is no Ray head, or refused us (RAY_AUTH_TOKEN)
        message = cannot_reach(address, f"{type(exc).__name__}: {exc}")
        health.failed(message)
        log.error("%s", message)
        return False
    log.info("dispatcher %s connected to Ray %s at %s", who, ray.__version__, address)
    return True
