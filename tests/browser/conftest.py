"""A real server (uvicorn + embedded worker, started the way a user starts it) and real Chromium."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port

CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "test-artifacts" / "screenshots"


@pytest.fixture(scope="session")
def live_server(tmp_path_factory):
    data = tmp_path_factory.mktemp("live-data")
    port = free_port()
    env = dict(
        os.environ,
        COURSE_ENV="test",
        COURSE_DATA_DIR=str(data),
        COURSE_WORKERS="1",
        COURSE_SECRET_KEY="browser-test-secret",
    )
    env.pop("DATABASE_URL", None)  # the README's default: SQLite under the data dir
    log = open(data / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(base + "/", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("server did not start:\n" + (data / "server.log").read_text()) from None
            time.sleep(0.3)

    def cli(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout

    server = type("LiveServer", (), {"url": base, "cli": staticmethod(cli), "data": data})()
    yield server
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `scripts/setup.sh --test` (installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    yield pg
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        SHOTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(SHOTS / f"FAILED-{request.node.name}.png"), full_page=True)
    context.close()


@pytest.fixture(scope="session")
def seeded(live_server):
    """A learner with finished runs of every lab (one failed, lost to the OOM killer) and a graded report, and a
    member of staff, planted once per session for the tests of pages a learner meets first."""
    from tests.app.reporting import CRASHED
    from tests.browser.pages import CURRENT, LEARNER, STAFF
    from tests.browser.seed import Seeder

    s = Seeder(live_server.data)
    learner = s.user(LEARNER, name="Polly")
    staff = s.user(STAFF, roles=("learner", "instructor", "grader"), name="Stella")
    ids = {lab: s.job(learner, lab) for lab in ("env-check", "tp-sweep", "overlap-trace")}
    ids["fp8-delayed"] = s.job(learner, "fp8-step")
    ids["fp8-current"] = s.job(learner, "fp8-step", CURRENT, seconds=95)
    ids["failed"] = s.failed_job(learner, "tp-sweep", CRASHED)
    s.loss(ids["failed"], "The lab process was stopped from outside its run (SIGKILL, signal 9): the host's OOM killer")
    report = s.graded_report(learner, staff)
    yield {"jobs": ids, "report": report}
    s.close()


SIZES = {"laptop": (1280, 800), "phone": (390, 844)}  # the two widths a journey is walked at


@pytest.fixture(scope="session")
def logged_in_states() -> dict[str, dict]:
    """email -> the storage state (the session cookie) of a browser context logged in as that user."""
    return {}


@pytest.fixture
def open_page(browser, live_server, logged_in_states):
    """`open_page(size, email, js=True)`: a blank page of its own browser context at SIZES[size], logged in as
    `email`, JavaScript on or off; closed after the test. The login is made once per user and its cookie reused
    (tests that log in or out as their subject call `login` themselves); a session that has ended since is
    replaced by a new login."""
    contexts = []

    def make(size: str, email: str, *, js: bool = True):
        state = logged_in_states.get(email)
        ctx = browser.new_context(
            viewport=dict(zip(("width", "height"), SIZES[size])), java_script_enabled=js, storage_state=state
        )
        contexts.append(ctx)
        pg = ctx.new_page()
        pg.set_default_timeout(15_000)
        if state is None or not ctx.request.get(live_server.url + "/api/v1/me").ok:
            login(pg, live_server.url, email)
            logged_in_states[email] = ctx.storage_state()
            pg.goto("about:blank")
        return pg

    yield make
    for ctx in contexts:
        ctx.close()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def register(page, base: str, email: str, name: str = "Ada", password: str = "correct horse") -> None:
    page.goto(base + "/register")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Display name").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Register").click()
    page.wait_for_url(base + "/")


def login(page, base: str, email: str, password: str = "correct horse") -> None:
    page.goto(base + "/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()


def screenshot(page, name: str, *, full_page: bool = True) -> Path:
    """The page under test-artifacts/screenshots/NAME.png: the whole page, or only what the screen shows (for
    what is fixed to the screen)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
