"""Where a lesson page's server time goes, step by step, in one process (no sockets, no HTTP server).

    .venv/bin/python bench/page_breakdown.py [--rounds 5] [--calls 400]

Builds the app as a serving process does (`create_app(settle=True)`, SQLite in a temporary data dir),
registers a learner and saves answers to every question of the practice part and every pause of the
deep-dives part (as bench/lesson_throughput.py does), then calls the ASGI app directly, one request at a
time, for each row below. The probe rows are routes added to this process's app only, placed first in the
route list as the lesson routes are, each one step more of what a part page does:

    floor     an `async def` route with no dependencies: our middleware and the routing
    deps      + the part page's dependencies (database session, Viewer, the path and `v` parameters)
    login     + `await viewer.required()`: the learner's session, user and roles (the ORM lookup)
    home, practice, part   the real pages

and prints the fastest round's milliseconds per request and each row's increment over the one above
(`part` and `practice` over `login`). Under wrk (bench/lesson_throughput.py) each request also costs the
HTTP server's parsing and socket writes, and the client shares the machine. Nothing here asserts a time.
Needs only what `make run` installs: no HTTP client, the requests go straight into the app.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
from collections.abc import MutableMapping
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fastapi import Request  # noqa: E402
from fastapi.responses import PlainTextResponse  # noqa: E402
from lesson_throughput import LESSON, Learner, answer_everything  # noqa: E402

from app.web.deps import DbInt, SessionDep, ViewerDep  # noqa: E402


async def asgi_call(app: Any, method: str, path: str, cookie: str, body: bytes = b"") -> tuple[int, list, bytes]:
    """One request straight into the ASGI app: (status, headers, body)."""
    headers = [(b"host", b"127.0.0.1"), (b"user-agent", b"bench"), (b"cookie", cookie.encode())]
    if body:
        headers += [(b"content-type", b"application/x-www-form-urlencoded"), (b"content-length", b"%d" % len(body))]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    answer: dict[str, Any] = {"status": 0, "headers": [], "body": b""}

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"], answer["headers"] = message["status"], message.get("headers", [])
        else:
            answer["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return answer["status"], answer["headers"], answer["body"]


class InProcessLearner(Learner):
    """bench/lesson_throughput.py's learner, calling the ASGI app directly: no socket, no HTTP client."""

    def __init__(self, app: Any, loop: asyncio.AbstractEventLoop):
        self.app, self.loop = app, loop
        self.cookies: dict[str, str] = {}

    def _request(self, method: str, path: str, body: bytes = b"") -> tuple[int, str]:
        status, headers, content = self.loop.run_until_complete(asgi_call(self.app, method, path, self.cookie(), body))
        for name, value in headers:
            if name.lower() == b"set-cookie":
                for key, morsel in SimpleCookie(value.decode()).items():
                    self.cookies[key] = morsel.value
        return status, content.decode()

    def get(self, path: str) -> str:
        return self._request("GET", path)[1]

    def post(self, path: str, data: dict) -> int:
        return self._request("POST", path, urllib.parse.urlencode(data).encode())[0]

    def cookie(self) -> str:
        return "; ".join(f"{name}={value}" for name, value in self.cookies.items())


async def _floor() -> PlainTextResponse:
    return PlainTextResponse("ok")


async def _deps(
    request: Request, lesson_id: str, part_id: str, viewer: ViewerDep, db: SessionDep, v: DbInt | None = None
) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def _login(
    request: Request, lesson_id: str, part_id: str, viewer: ViewerDep, db: SessionDep, v: DbInt | None = None
) -> PlainTextResponse:
    await viewer.required()
    return PlainTextResponse("ok")


ROWS = [
    ("floor", "/_probe/floor", None),
    ("deps", f"/_probe/deps/{LESSON}/deep-dives", "floor"),
    ("login", f"/_probe/login/{LESSON}/deep-dives", "deps"),
    ("home", "/", "login"),
    ("practice", f"/lessons/{LESSON}/practice", "login"),
    ("part", f"/lessons/{LESSON}/deep-dives", "login"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=400)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-breakdown-")
    os.environ.update(COURSE_ENV="test", COURSE_DATA_DIR=tmp, COURSE_WORKERS="0", COURSE_SECRET_KEY="bench-secret")
    os.environ.pop("DATABASE_URL", None)
    from app.web.factory import create_app

    app = create_app(settle=True)
    app.add_api_route("/_probe/floor", _floor)
    app.add_api_route("/_probe/deps/{lesson_id}/{part_id}", _deps)
    app.add_api_route("/_probe/login/{lesson_id}/{part_id}", _login)
    for _ in range(3):  # first in the route list, as the lesson routes are (app/web/factory.py PAGE_ROUTERS)
        app.router.routes.insert(0, app.router.routes.pop())

    loop = asyncio.new_event_loop()
    lifespan = app.router.lifespan_context(app)  # migrations, lessons published, start-up objects frozen
    loop.run_until_complete(lifespan.__aenter__())
    learner = InProcessLearner(app, loop)
    token = learner.csrf(learner.get("/register"))
    form = {"email": "bench@example.org", "password": "bench password", "display_name": "Bench"}
    learner.post("/register", {**form, "csrf_token": token})
    saved = answer_everything(learner, "practice") + answer_everything(learner, "deep-dives")
    cookie = learner.cookie()

    async def call(path: str) -> int:
        return (await asgi_call(app, "GET", path, cookie))[0]

    async def measure() -> dict[str, float]:
        best = {name: float("inf") for name, _, _ in ROWS}
        for _name, path, _ in ROWS:  # warm-up: caches filled, and every row answers 200
            for _ in range(50):
                status = await call(path)
            if status != 200:
                raise SystemExit(f"{path} answered {status}; a breakdown of errors means nothing")
        for _ in range(args.rounds):  # rows interleaved per round, so a busy moment slows all of them alike
            for name, path, _ in ROWS:
                start = time.perf_counter()
                for _ in range(args.calls):
                    await call(path)
                best[name] = min(best[name], (time.perf_counter() - start) / args.calls * 1e3)
        return best

    try:
        best = loop.run_until_complete(measure())
    finally:
        loop.run_until_complete(lifespan.__aexit__(None, None, None))
        loop.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"in-process ASGI calls, one at a time; fastest of {args.rounds} rounds x {args.calls} calls; SQLite; "
        f"learner with {saved} saved answers"
    )
    print(f"{'step':<10} {'ms':>7} {'+ ms':>7}  over   path")
    for name, path, over in ROWS:
        extra = f"{best[name] - best[over]:7.3f}  {over:<6}" if over else f"{'':7}  {'':<6}"
        print(f"{name:<10} {best[name]:7.3f} {extra} {path}")


if __name__ == "__main__":
    main()
