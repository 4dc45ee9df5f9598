"""In the browser: /instructor/cluster of a Ray-mode server names the active dispatcher, since
when, its last heartbeat, and the standby, at a laptop's and a phone's width, with nothing wider than the screen.
The server is `python -m app serve` with COURSE_EXECUTOR=ray; its own dispatcher finds no Ray head (it waits,
harmlessly), and the lease rows are written as two dispatchers on other hosts would write them."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from app.core.db import make_engine, make_sessionmaker
from app.core.models import utcnow
from app.services.cluster import dispatch_lease
from tests.app.live import course_server
from tests.browser.conftest import SIZES, login, screenshot
from tests.conftest import ROOT, free_port

ACTIVE, STANDBY = "dispatcher:gpu-head-01:1893:5d20b7e1", "dispatcher:web-02:2211:9c1e0a4f"


@pytest.fixture(scope="module")
def ray_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ray-mode")
    db_url = f"sqlite:///{tmp / 'course.db'}"
    env = {
        "COURSE_EXECUTOR": "ray",
        "RAY_ADDRESS": f"127.0.0.1:{free_port()}",  # no head: this server's own dispatcher waits for one
        "TMPDIR": str(tmp),
    }
    with course_server(tmp, db_url, **env) as server:
        subprocess.run(
            [sys.executable, "-m", "app", "users", "create", "--email", "ops@example.org", "--password",
             "correct horse", "--role", "admin"],
            cwd=ROOT, env={**os.environ, "COURSE_ENV": "test", "COURSE_DATA_DIR": str(tmp / "data"),
                           "DATABASE_URL": db_url}, check=True, capture_output=True,
        )  # fmt: skip
        engine = make_engine(db_url)
        with make_sessionmaker(engine)() as db:
            now = utcnow()
            dispatch_lease.try_acquire(db, me=ACTIVE, lease_s=3600, now=now - timedelta(minutes=42))
            dispatch_lease.record(db, me=ACTIVE, role="active")
            dispatch_lease.try_acquire(db, me=ACTIVE, lease_s=3600, now=now)
            dispatch_lease.record(db, me=STANDBY, role="standby")
        engine.dispose()
        yield server.base


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
