"""axe-core over the other pages people use: home, play, account, labs, report, instructor and grader pages."""

import json

import pytest

from tests.browser.conftest import login
from tests.browser.test_lesson_quality import serious_violations

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it


def test_staff_and_learner_pages_have_no_serious_violations(page, live_server):
    live_server.cli(
        "users",
        "create",
        "--email",
        "a11y@example.org",
        "--password",
        "correct horse",
        "--role",
        "admin",
        "--role",
        "author",
        "--role",
        "instructor",
        "--class",
        "default",
    )
    login(page, live_server.url, "a11y@example.org")
    found = {}
    for path in [
        "/",
        "/play",
        "/account",
        "/labs",
        "/labs/fp8-step",
        "/labs/tp-sweep",
        "/jobs",
        "/reports",
        "/lessons/transformer-scaling/report",
        "/instructor",
        "/instructor/lessons/transformer-scaling/edit?file=parts/orient.yaml",
        "/classes/default/grader",
        "/classes",
        "/classes/default",
        "/classes/default/roster",
        "/classes/default/people",
        "/classes/default/lti",
        "/admin",
        "/lti",
        "/lessons/precision-by-numbers",
    ]:
        page.goto(live_server.url + path)
        if v := serious_violations(page):
            found[path] = v
    assert found == {}, json.dumps(found, indent=1)
