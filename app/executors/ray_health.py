"""The Ray dispatcher's health: whether it can reach the Ray head, and the files its health check reads.

    python -m app dispatcher-health   # 0 if each dispatcher on this host completed a cycle lately (compose)

The dispatcher (app/executors/ray.py) probes RAY_ADDRESS before ray.init (`wait_for_head`: a TCP connect and an
HTTP/2 greeting answer in seconds, where ray.init waits in C++ for minutes), connects (`connect`), and records each
cycle through `Health`; `dispatcher_health_main` reads what it left. Nothing here touches the database, the
queue or Ray until `connect`, so the health check needs none of them.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from app.core.digits import whole_number

log = logging.getLogger("app.executors.ray")  # the dispatcher's logger: one name in its log lines

# Written after each cycle that completed (Ray listed, the database read and written), never before one: a
# dispatcher that runs but cannot reach its database or Ray must fail its health check, not pass it. One pair per
# dispatcher process, named by its pid: the check reads the dispatchers running now, never a previous process's
# last words (a restarted dispatcher's predecessor may have failed a minute ago).
HEALTH_DIR = Path(tempfile.gettempdir())
HEALTH_GLOB = "course-dispatcher.*.alive"
# A cycle is TICK_S (app/executors/ray.py) plus its database and Ray calls; this much without one is a dispatcher
# that is stuck or failing (compose: checked every 10 s, unhealthy after 3 misses). COURSE_DISPATCHER_ALIVE_SECONDS.
ALIVE_S = 30.0


def alive_file(pid: int) -> Path:
    return HEALTH_DIR / f"course-dispatcher.{pid}.alive"


def failing_file(pid: int) -> Path:
    return HEALTH_DIR / f"course-dispatcher.{pid}.failing"


def started_file(pid: int) -> Path:
    """Written as a dispatcher starts, so the check knows of it before its first cycle."""
    return HEALTH_DIR / f"course-dispatcher.{pid}.started"


def _is_dispatcher(pid: int) -> bool:
    """Whether `pid` is a running `python -m app dispatcher` (a pid reused by another program is not)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"dispatcher" in cmd and b"app" in cmd


def _pids_with_files() -> set[int]:
    pids = set()
    for path in HEALTH_DIR.glob("course-dispatcher.*"):
        part = path.name.split(".")[1]
        if part.isdigit():
            pids.add(int(part))
    return pids


def dispatcher_health_main(alive_s: float = ALIVE_S) -> int:
    """`python -m app dispatcher-health`: 0 if every dispatcher running on this host completed a cycle in the last
    `alive_s` seconds (it prints whether each is active or standing by) and none that was active has gone its lease
    (which it wrote beside its role) without one; otherwise 1, with that dispatcher's own last error when it left one. Then who holds the
    lease now, as the latest cycle here saw it: a dispatcher that stopped cycling (frozen, stalled) is no longer
    active, whatever it last wrote. Files left by dispatchers that are gone are removed, never read."""
    running, code = [], 0
    # ((not the holder itself, age), the holder's id, how this host knows): the holder's own word while it is within
    # its lease, else the freshest standby's
    holder: tuple[tuple[bool, float], str, str] | None = None
    for pid in sorted(_pids_with_files()):
        if not _is_dispatcher(pid):
            for path in (alive_file(pid), failing_file(pid), started_file(pid)):
                path.unlink(missing_ok=True)
            continue
        running.append(pid)
        try:
            why = "; its last error: " + failing_file(pid).read_text().strip()
        except OSError:
            why = ""
        try:
            age = time.time() - alive_file(pid).stat().st_mtime
            role, who, lease = (alive_file(pid).read_text().splitlines() + ["", "", ""])[:3]
        except OSError:
            print(f"the dispatcher has not completed a cycle yet (pid {pid}){why}", file=sys.stderr)
            code = 1
            continue
        active = role.startswith("active")
        lease_s = float(lease) if lease.replace(".", "", 1).isdigit() else alive_s
        if age > alive_s:
            print(f"the dispatcher last completed a cycle {age:.0f} s ago (pid {pid}){why}", file=sys.stderr)
            code = 1
        elif active and age > lease_s:
            print(
                f"the dispatcher last completed a cycle {age:.0f} s ago (pid {pid}), longer than its {lease_s:.0f} s "
                f"lease: it is no longer active (stopped, frozen or stalled; a standby may hold the lease){why}",
                file=sys.stderr,
            )
            code = 1
        else:
            # the role carries its own times ("active since ..."), so the cycle's age is named, not left bare
            print(f"dispatcher pid {pid}: {role or 'running'}; last cycle {age:.0f} s ago")
        seen = who.strip() if active and age <= lease_s else role.partition("active: ")[2].strip()
        if seen and seen != "None" and (holder is None or (not active, age) < holder[0]):
            how = f"pid {pid} here" if active else f"as standby pid {pid} saw it"
            holder = ((not active, age), seen, how)
    if not running:
        print(
            "no dispatcher runs on this host (`python -m app dispatcher`, or `serve` with COURSE_EXECUTOR=ray)",
            file=sys.stderr,
        )
        return 1
    if holder is not None:
        print(f"the lease is held by {holder[1]} ({holder[2]}, {holder[0][1]:.0f} s ago)")
    return code


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


def cannot_reach(address: str, why: str, fix: str | None = None) -> str:
    """The one error an operator needs when the dispatcher has no Ray cluster to use; `fix`: what to do, when it is
    not starting the head (a token the head refused)."""
    where = head_address(address)
    port = where[1] if where else 6379
    named = f"RAY_ADDRESS={address}" if address != "auto" else "RAY_ADDRESS (unset: Ray looked for a head on this host)"
    fix = fix or (
        f"Start the head there first (`{HEAD_START.format(port=port)}`, docs/deploying.md: Bare metal with Ray) or set "
        "RAY_ADDRESS to the head's host:port"
    )
    return (
        f"the dispatcher cannot reach the Ray cluster at {named}: {why.rstrip('.')}. {fix}; "
        f"no lab job runs until the dispatcher connects"
    )


# How Ray 2.60 says it refused a token (checked against a head started with RAY_AUTH_MODE=token, see
# tests/ops/test_dispatcher_health.py): with RAY_AUTH_MODE=token and no token anywhere, ray.init raises
# ray.exceptions.AuthenticationError at once ("Token authentication is enabled but no authentication token was
# found"); with a wrong token, or without RAY_AUTH_MODE=token, ray.init retries for ~20 s and raises a bare
# ConnectionError ("Failed to connect to Ray cluster at ..."), the reason only in C++ log lines ("Unauthenticated:
# RPC error: InvalidAuthToken: Authentication token is missing or incorrect", src/ray/gcs_rpc_client), while a
# standalone GcsClient (ray._raylet, python/ray/includes/common.pxi check_status) raises AuthenticationError with
# that text in under a second. So the dispatcher asks a GcsClient first.
TOKEN_REFUSED = ("InvalidAuthToken", "Unauthenticated", "no authentication token was found")
TOKEN_FIX = (
    "Set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the token the head was started with, "
    "here and on every node (docs/deploying.md: Ray's network)"
)


def token_problem(exc: BaseException, env: Mapping[str, str]) -> str | None:
    """What was wrong with this dispatcher's Ray token, when `exc` is Ray refusing it; None for any other error."""
    text = getattr(exc, "message", None) or str(exc)
    if type(exc).__name__ != "AuthenticationError" and not any(t in text for t in TOKEN_REFUSED):
        return None
    mode = env.get("RAY_AUTH_MODE", "")
    if mode != "token":
        got = f"is {mode!r}" if mode else "is unset"
        return f"the Ray head requires token authentication and RAY_AUTH_MODE {got} here"
    if not (env.get("RAY_AUTH_TOKEN") or env.get("RAY_AUTH_TOKEN_PATH") or DEFAULT_TOKEN.is_file()):
        return "RAY_AUTH_MODE=token is set here but no token is: RAY_AUTH_TOKEN is missing"
    where = (
        "RAY_AUTH_TOKEN" if env.get("RAY_AUTH_TOKEN") else "the token file (RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)"
    )
    return f"the Ray head refused the token in {where}: it is wrong (not the token the head was started with)"


DEFAULT_TOKEN = Path.home() / ".ray" / "auth_token"  # where Ray 2.60 looks when neither variable is set


def token_missing() -> str | None:
    """Why no Ray client can start here, when RAY_AUTH_MODE=token and no token is to be found: Ray 2.60's C++ client
    then aborts the whole process at its first call (a failed check in authentication_token_loader.cc, seen with a
    GcsClient), so this is asked of Ray's own token loader, which answers without crashing, before any call."""
    from ray._raylet import (  # type: ignore[attr-defined]
        AuthenticationMode,
        AuthenticationTokenLoader,
        get_authentication_mode,
    )

    if get_authentication_mode() != AuthenticationMode.TOKEN:
        return None
    if AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True):
        return None
    return "RAY_AUTH_MODE=token is set here but no token is: RAY_AUTH_TOKEN is missing"


def token_refused(address: str) -> str | None:
    """Ask the head's GCS for its cluster id with this process's token (a GcsClient, under a second); the problem
    with the token when the head refuses it, else None (any other failure is left to ray.init to report)."""
    missing = token_missing()
    if missing is not None:
        return missing
    if head_address(address) is None:
        return None
    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        GcsClient(address=address)
    except Exception as exc:
        return token_problem(exc, os.environ)
    return None


class Health:
    """What one dispatcher process leaves for `dispatcher_health_main`: its alive file, rewritten after each completed
    cycle with its role (active, or standing by for whom), and its failing file saying why its last cycle or
    connect failed (removed by the next good cycle). Both are removed when it stops."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid or os.getpid()
        self.alive, self.failing = alive_file(self.pid), failing_file(self.pid)
        self._failing = False

    def starting(self) -> None:
        self.alive.unlink(missing_ok=True)  # a pid's earlier process says nothing about this one
        self.failing.unlink(missing_ok=True)
        try:
            started_file(self.pid).write_text(f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC\n")
        except OSError:
            log.debug("could not write %s", started_file(self.pid), exc_info=True)

    def completed(self, role: str = "", who: str = "", lease_s: float | None = None) -> None:
        """`role` in words; `who`: this dispatcher's id, named as the lease's holder while it is active, for at most
        `lease_s` (COURSE_DISPATCHER_LEASE_SECONDS) after this cycle."""
        try:
            self.alive.write_text(f"{role}\n{who}\n{lease_s or ''}\n")
        except OSError:
            log.debug("could not write %s", self.alive, exc_info=True)
        if self._failing:
            self.failing.unlink(missing_ok=True)
            self._failing = False

    def failed(self, why: str) -> None:
        try:
            self.failing.write_text(f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC: {why}\n")
            self._failing = True
        except OSError:  # the health check then says less, which is no reason to stop dispatching
            log.debug("could not write %s", self.failing, exc_info=True)

    def stopped(self) -> None:
        for path in (self.alive, self.failing, started_file(self.pid)):
            path.unlink(missing_ok=True)


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


# Ray's errors for the whole cluster ("Raylet is terminated ...", "The node ... has been marked dead"), which the GCS
# publishes to every driver: Ray 2.60's driver prints each to stdout through `print_to_stdstream` from its
# `listen_error_messages` thread (python/ray/_private/worker.py; started for any script driver, whatever
# log_to_driver says), and a dead raylet's message carries the last 20 lines of its log with its whole state dump
# (python/ray/_private/process_watcher.py `report_raylet_error_logs`): dozens of "[state-dump]" lines in the serve
# log per dead node. The dispatcher logs one line per message instead; the dump stays in the node's raylet.out.
RAY_DUMP_START = re.compile(r"\s*Last \d+ lines of the Raylet logs:.*", re.DOTALL)


def ray_error_to_log(data: dict, ignore_prefix: bool = False) -> None:
    """Stands in for ray._private.worker.print_to_stdstream in the dispatcher: one log line per Ray error message,
    without the raylet's log tail."""
    for message in data.get("lines") or []:
        text = RAY_DUMP_START.sub("", str(message))
        cut = text != str(message)
        line = " ".join(text.split())[:600]
        if cut:
            line += " (the raylet's last log lines are in raylet.out in that node's Ray session logs)"
        log.warning("Ray (%s): %s", data.get("pid") or "cluster", line)


def connect(address: str, who: str, health: Health) -> bool:
    """ray.init; False (with the error logged once, no traceback, and left for the health check) if it fails."""
    import ray
    import ray._private.worker

    ray._private.worker.print_to_stdstream = ray_error_to_log  # see RAY_DUMP_START
    refused = token_refused(address)
    if refused is not None:
        message = cannot_reach(address, refused, TOKEN_FIX)
        health.failed(message)
        log.error("%s", message)
        return False
    try:
        ray.init(
            address=address,
            namespace="course",
            log_to_driver=False,  # lab output comes back through the stream, not the driver's stdout
            logging_level=logging.WARNING,
        )
    except Exception as exc:  # the head answered the probe but is no Ray head, or refused us (RAY_AUTH_TOKEN)
        token = token_problem(exc, os.environ)
        message = (
            cannot_reach(address, token, TOKEN_FIX) if token else cannot_reach(address, f"{type(exc).__name__}: {exc}")
        )
        health.failed(message)
        log.error("%s", message)
        return False
    log.info("dispatcher %s connected to Ray %s at %s", who, ray.__version__, address)
    return True
