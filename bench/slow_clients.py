"""Slow clients against the course: does a learner still log in and register while they are held?

    .venv/bin/python bench/slow_clients.py
    .venv/bin/python bench/slow_clients.py --bodies 8 --headers 300 --seconds 20

Starts `python -m app serve` (SQLite in a temporary data dir, no lab workers, shipped limits) on loopback on a
free port. First the baseline: GET /login, and a registration (GET /register, POST /register), each a few
times with nothing held. Then the attack, held for --seconds: --bodies POSTs (half to /login, half
to /logout) that declare 1,000 bytes and send 7, and --headers connections that send half a request line and
nothing more, from other loopback addresses (127.0.x.y: each a client of its own), each one opened again as
soon as the server answers or closes it, as an attacker would. Meanwhile the same GET /login and registrations
are timed again, from addresses of their own.

Prints both sets of figures and their ratio, how often the server closed a held connection (its header and
body deadlines at work) and how many it refused (the per-address cap). Targets: under the attack,
/login under 1 s and a registration under 3 s, every one answered 200/303; exits 1 if one is missed.
Everything listens and connects on loopback only, and the run stops after --seconds plus the start-up.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import secrets
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
LOGIN_TARGET_S, REGISTER_TARGET_S = 1.0, 3.0
HEADER_ADDRESSES = 2  # the held header connections come from this many addresses (below the per-address cap each)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def course_server(tmp: Path) -> Iterator[int]:
    port = free_port()
    env = dict(
        os.environ,
        COURSE_DATA_DIR=str(tmp / "data"),
        COURSE_SECRET_KEY=secrets.token_urlsafe(32),
        COURSE_LOG_LEVEL="WARNING",
        COURSE_WORKERS="0",
    )
    for name in ("COURSE_ENV", "DATABASE_URL"):
        env.pop(name, None)
    log_path = tmp / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the server did not come up:\n{log_path.read_text()[-4000:]}") from None
                time.sleep(0.3)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        tracebacks = log_path.read_text().count("Traceback")
        if tracebacks:
            print(f"server log: {tracebacks} traceback(s), in {log_path}")


class Client:
    """One browser: its own loopback address, its own cookie, a fresh connection per request."""

    def __init__(self, port: int, source: str):
        self.port, self.source, self.cookie = port, source, ""

    def request(self, method: str, path: str, form: dict[str, str] | None = None) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30, source_address=(self.source, 0))
        headers = {"Cookie": self.cookie} if self.cookie else {}
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            text = response.read().decode(errors="replace")
            if cookie := response.getheader("set-cookie"):
                self.cookie = cookie.split(";", 1)[0]
            return response.status, text
        finally:
            conn.close()


def time_login(port: int, source: str) -> tuple[float, int]:
    started = time.perf_counter()
    status, _ = Client(port, source).request("GET", "/login")
    return time.perf_counter() - started, status


def time_registration(port: int, source: str) -> tuple[float, int]:
    """The form, then the post: what a learner waits for from opening the page to being signed in."""
    client = Client(port, source)
    started = time.perf_counter()
    status, html = client.request("GET", "/register")
    token = CSRF.search(html)
    if status != 200 or token is None:
        return time.perf_counter() - started, status
    email = f"learner-{secrets.token_hex(4)}@example.org"
    form = {"email": email, "password": "correct horse battery", "display_name": "Ann", "csrf_token": token.group(1)}
    status, _ = client.request("POST", "/register", form)
    return time.perf_counter() - started, status


class Attack:
    """Holds the slow connections in one thread, opening each again as soon as the server answers or closes it."""

    def __init__(self, port: int, bodies: int, headers: int):
        self.port, self.bodies, self.headers = port, bodies, headers
        self.selector = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.seen: Counter[str] = Counter()  # what the server did to held connections: "408", "503", "closed"
        self.held = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def _open(self, kind: str, source: str, path: str) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5, source_address=(source, 0))
            if kind == "body":
                head = (
                    f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nemail=a"
                )
            else:
                head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # the headers never end
            sock.sendall(head.encode())
        except OSError as exc:
            self.seen[f"connect failed: {type(exc).__name__}"] += 1
            return
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, (kind, source, path))
        self.held += 1

    def start(self) -> None:
        for i in range(self.bodies):
            self._open("body", "127.0.8.1", "/login" if i % 2 == 0 else "/logout")
        for i in range(self.headers):
            self._open("header", f"127.0.7.{1 + i % HEADER_ADDRESSES}", "/login")
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            for key, _ in self.selector.select(timeout=0.2):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                status = data[9:12].decode(errors="replace") if data.startswith(b"HTTP/1.1 ") else "closed"
                self.seen[status] += 1
                self.selector.unregister(sock)
                sock.close()
                self.held -= 1
                self._open(*key.data)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self.selector.close()


def measure(port: int, rounds: int, first: int) -> dict[str, list[tuple[float, int]]]:
    """`rounds` of GET /login and of a registration, each from a loopback address of its own."""
    out: dict[str, list[tuple[float, int]]] = {"login": [], "registration": []}
    for i in range(rounds):
        out["login"].append(time_login(port, f"127.0.9.{first + i}"))
        out["registration"].append(time_registration(port, f"127.0.10.{first + i}"))
    return out


def summary(samples: list[tuple[float, int]]) -> tuple[float, float, Counter[int]]:
    seconds = [s for s, _ in samples]
    return statistics.median(seconds), max(seconds), Counter(status for _, status in samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bodies", type=int, default=8, help="partial bodies held (bench target: 8)")
    ap.add_argument("--headers", type=int, default=300, help="unfinished headers held (bench target: 300)")
    ap.add_argument("--rounds", type=int, default=5, help="logins and registrations timed in each phase")
    ap.add_argument("--seconds", type=float, default=20, help="how long the attack is held before the timing")
    args = ap.parse_args()
    if not 0 <= args.bodies <= 64 or not 0 <= args.headers <= 2000 or not 1 <= args.rounds <= 50:
        raise SystemExit("--bodies: 0 to 64; --headers: 0 to 2000; --rounds: 1 to 50")
    ok = True
    with tempfile.TemporaryDirectory(prefix="slow-clients-") as tmp, course_server(Path(tmp)) as port:
        time_registration(port, "127.0.10.250")  # the first argon2 hash and page render warm up the server
        baseline = measure(port, args.rounds, first=1)
        attack = Attack(port, args.bodies, args.headers)
        attack.start()
        try:
            # long enough for the deadlines to have closed (and the attacker reopened) every held connection
            time.sleep(args.seconds)
            held = attack.held
            attacked = measure(port, args.rounds, first=100)
        finally:
            attack.close()
    print(f"held: {args.bodies} partial bodies, {args.headers} unfinished headers ({held} open when timed)")
    print(f"server's answers to held connections over {args.seconds:g} s: {dict(attack.seen.most_common())}")
    print(f"{'':14}{'baseline median/max':>22}{'attacked median/max':>22}{'ratio (median)':>16}  statuses")
    targets: dict[str, float] = {"login": LOGIN_TARGET_S, "registration": REGISTER_TARGET_S}
    wanted: dict[str, Callable[[int], bool]] = {"login": lambda s: s == 200, "registration": lambda s: s == 303}
    for what, target in targets.items():
        b_med, b_max, _ = summary(baseline[what])
        a_med, a_max, statuses = summary(attacked[what])
        print(
            f"{what:14}{b_med:>10.3f} / {b_max:<9.3f}{a_med:>10.3f} / {a_max:<9.3f}{a_med / b_med:>14.1f}x"
            f"  {dict(statuses)}"
        )
        if a_max >= target or not all(wanted[what](s) for s in statuses):
            print(f"  MISSED: {what} under attack must answer in under {target:g} s, every one a success")
            ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
