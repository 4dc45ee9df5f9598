"""Lesson-page throughput as a ratio to a bare FastAPI endpoint, both measured in this run.

    .venv/bin/python bench/lesson_throughput.py [--requests 400] [--concurrency 8]

Starts the course server (SQLite in a temporary data dir, no lab workers) and a one-route FastAPI
app, each under uvicorn on loopback; sends the same bounded number of GET requests to each from a
thread pool; prints requests/second and the ratio. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
BARE_APP = "from fastapi import FastAPI\napp = FastAPI()\n@app.get('/ping')\ndef ping():\n    return {'ok': True}\n"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server for {url} exited")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up")


def measure(client_factory, url: str, n: int, concurrency: int) -> float:
    clients = [client_factory() for _ in range(concurrency)]
    for c in clients:  # warm-up: templates compiled, connections open
        assert c.get(url).status_code == 200

    def work(i: int) -> int:
        return clients[i % concurrency].get(url).status_code

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        codes = list(pool.map(work, range(n)))
    elapsed = time.perf_counter() - start
    bad = [c for c in codes if c != 200]
    if bad:
        raise SystemExit(f"{len(bad)} non-200 responses from {url}")
    for c in clients:
        c.close()
    return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-"))
    (tmp / "bare_app.py").write_text(BARE_APP)
    p_course, p_bare = free_port(), free_port()
    env = dict(
        os.environ, COURSE_ENV="test", COURSE_DATA_DIR=str(tmp / "data"), COURSE_WORKERS="0", COURSE_SECRET_KEY="bench"
    )
    env.pop("DATABASE_URL", None)
    course = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(p_course)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    bare = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "bare_app:app", "--port", str(p_bare), "--log-level", "warning"],
        cwd=tmp,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{p_course}"
        wait_up(base + "/login", course)
        wait_up(f"http://127.0.0.1:{p_bare}/ping", bare)
        cookies = {}
        with httpx.Client(base_url=base) as c:
            token = re.search(r'name="csrf_token" value="([^"]+)"', c.get("/register").text).group(1)
            c.post(
                "/register",
                data={
                    "email": "bench@example.org",
                    "password": "bench password",
                    "display_name": "Bench",
                    "csrf_token": token,
                },
            )
            cookies = dict(c.cookies)
        lesson_url = base + "/lessons/transformer-scaling/deep-dives"
        bare_rps = measure(lambda: httpx.Client(), f"http://127.0.0.1:{p_bare}/ping", args.requests, args.concurrency)
        lesson_rps = measure(lambda: httpx.Client(cookies=cookies), lesson_url, args.requests, args.concurrency)
        print(f"bare FastAPI endpoint : {bare_rps:8.1f} req/s")
        print(f"lesson part page      : {lesson_rps:8.1f} req/s  (logged in, deep-dives part, SQLite)")
        print(f"ratio lesson / bare   : {lesson_rps / bare_rps:8.3f}")
        print(
            f"({args.requests} requests each, concurrency {args.concurrency}, one uvicorn process each, this machine: {os.cpu_count()} cores)"
        )
    finally:
        for proc in (course, bare):
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
