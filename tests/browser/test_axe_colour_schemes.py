"""Pages pass axe in the light and the dark colour scheme."""

from __future__ import annotations

import json
import re

import pytest

from tests.browser.conftest import login, screenshot
from tests.browser.pages import (
    LEARNER,
    LESSON,
    STAFF,
    context_at,
    rgb,
)
from tests.browser.test_lesson_quality import serious_violations

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_pages_pass_axe_in_both_colour_schemes(browser, live_server, seeded, scheme):
    jobs = seeded["jobs"]
    found = {}
    for email, paths in {
        LEARNER: [
            "/",
            f"/lessons/{LESSON}/orient",
            f"/lessons/{LESSON}/deep-dives",
            f"/lessons/{LESSON}/practice",
            "/play",
            "/labs/fp8-step",
            f"/jobs/{jobs['tp-sweep']}",
            f"/jobs/{jobs['overlap-trace']}",
            "/jobs",
            f"/lessons/{LESSON}/report",
            "/no/such/page",
        ],
        STAFF: ["/grader", f"/grader/reports/{seeded['report']}", "/instructor", "/instructor/cluster?saved=default"],
    }.items():
        ctx = context_at(browser, 1280, 900, color_scheme=scheme)
        page = ctx.new_page()
        login(page, live_server.url, email)
        for path in paths:
            page.goto(live_server.url + path)
            page.wait_for_load_state("networkidle")
            if v := serious_violations(page):
                found[path] = v
            if scheme == "dark" and path in (
                "/",
                f"/lessons/{LESSON}/practice",
                "/play",
                f"/jobs/{jobs['tp-sweep']}",
                "/grader",
            ):
                slug = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "home"
                screenshot(page, f"polish-dark-{slug}-laptop")
        if scheme == "dark":
            bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert sum(rgb(bg)) < 3 * 60, bg  # the dark scheme is in effect
        ctx.close()
    assert found == {}, json.dumps(found, indent=1)
