"""Issue 35 point 3 in the browser: /instructor/cluster of a Ray-mode server names the active dispatcher, since
when, its last heartbeat, and the standby, at a laptop's and a phone's width, with nothing wider than the screen.
The server is `python -m app serve` with COURSE_EXECUTOR=ray; its own dispatcher finds no Ray head (it waits,
harmlessly), and the lease rows are written as two dispatchers on other hosts would write them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from app.core.db import make_engine, make_sessionmaker
from app.core.models import utcnow
from app.services import dispatch_lease
from tests.browser.conftest import SIZES, login, screenshot
from tests.conftest import ROOT, free_port

ACTIVE, STANDBY = "dispatcher:gpu-head-01:1893:5d20b7e1", "dispatcher:web-02:2211:9c1e0a4f"


@pytest.fixture(scope="module")
def ray_server(tmp_path_factory):
    data = tmp_path_factory.mktemp("ray-mode")
    env = dict(
        os.environ,
        COURSE_ENV="test",
        COURSE_DATA_DIR=str(data),
        COURSE_EXECUTOR="ray",
        RAY_ADDRESS=f"127.0.0.1:{free_port()}",  # no head: this server's own dispatcher waits for one
        TMPDIR=str(data),
    )
    env.pop("DATABASE_URL", None)
    port = free_port()
    log = open(data / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                urllib.request.urlopen(base + "/", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("server did not start:\n" + (data / "server.log").read_text()) from None
                time.sleep(0.3)
        subprocess.run(
            [sys.executable, "-m", "app", "users", "create", "--email", "ops@example.org", "--password",
             "correct horse", "--role", "instructor"],
            cwd=ROOT, env=env, check=True, capture_output=True,
        )  # fmt: skip
        engine = make_engine(f"sqlite:///{data / 'course.db'}")
        with make_sessionmaker(engine)() as db:
            now = utcnow()
            dispatch_lease.try_acquire(db, me=ACTIVE, lease_s=3600, now=now - timedelta(minutes=42))
            dispatch_lease.record(db, me=ACTIVE, role="active")
            dispatch_lease.try_acquire(db, me=ACTIVE, lease_s=3600, now=now)
            dispatch_lease.record(db, me=STANDBY, role="standby")
        engine.dispose()
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.mark.parametrize("size", list(SIZES))
def test_the_cluster_page_shows_the_active_dispatcher_and_the_standby(browser, ray_server, size):
    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        login(page, ray_server, "ops@example.org")
        page.goto(ray_server + "/instructor/cluster")
        table = page.get_by_test_id("dispatchers")
        rows = table.locator("tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.nth(0)).to_contain_text(ACTIVE)
        expect(rows.nth(0)).to_contain_text("active")
        expect(rows.nth(1)).to_contain_text(STANDBY)
        expect(rows.nth(1)).to_contain_text("standing by")
        expect(page.get_by_test_id("no-active-dispatcher")).to_have_count(0)
        # nothing wider than the screen: the page does not scroll sideways, and each id fits its cell's row
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        for i in range(2):
            cell = rows.nth(i).locator("code").bounding_box()
            assert cell is not None and cell["x"] >= 0 and cell["x"] + cell["width"] <= width, (size, i, cell)
        screenshot(page, f"ops-b-cluster-dispatchers-{size}")
    finally:
        context.close()
