"""The report-and-grading loop walked as a newcomer, as both people, at 1280x800 and 390x844: the friction
found there and fixed, each checked in real Chromium against a real server (seeded users, real lab runs).

Screenshots: test-artifacts/screenshots/loop-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

LESSON = "transformer-scaling"
SIZES = {"laptop": (1280, 800), "phone": (390, 844)}


@pytest.fixture(scope="module")
def seeder(live_server):
    s = Seeder(live_server.data)
    yield s
    s.close()


def _submitted(seeder: Seeder, email: str, name: str) -> int:
    """A learner with a finished run of every lab, attached and submitted (unclaimed, ungraded); the report id."""
    from app.models import User
    from app.services import lessons as lesson_service
    from app.services import reports

    owner_id = seeder.user(email, name=name)
    for lab in ("env-check", "fp8-step", "tp-sweep", "overlap-trace"):
        seeder.job(owner_id, lab)
    with seeder.sessions() as db:
        owner, current = db.get(User, owner_id), lesson_service.current(db, lesson_id=LESSON)
        assert owner is not None and current is not None
        report = reports.get_or_create(db, owner=owner, lesson_id=LESSON)
        reports.attach_latest(db, report=report, owner=owner, lesson=current.lesson)
        report.draft = {**(report.draft or {}), "answers": {"numbers": "Gap 0.02% at step 4.", "overlap": "Windowed."}}
        db.commit()
        reports.submit(
            db, settings=seeder.settings, report=report, lesson=current.lesson, lesson_version=current.version
        )
        return report.id


def _grader(seeder: Seeder, email: str) -> None:
    from app.models import User
    from app.services import grading

    uid = seeder.user(email, roles=("grader",))
    with seeder.sessions() as db:
        grader = db.get(User, uid)
        assert grader is not None
        grading.assign(db, grader=grader, lesson_id=LESSON)


def test_leaving_a_grade_with_unsaved_changes_asks_first(browser, live_server, seeder):
    """Picks and feedback typed but not saved were lost to a stray click on "Grading queue"; now the browser asks
    before leaving, and saving (Ctrl+Enter) leaves without asking."""
    base = live_server.url
    report_id = _submitted(seeder, "una@example.org", "Una")
    _grader(seeder, "gwen@example.org")
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    g = ctx.new_page()
    login(g, base, "gwen@example.org")
    g.goto(f"{base}/grader/reports/{report_id}")
    g.get_by_role("button", name="Claim this report").click()
    expect(g.locator(".banner[role=status]")).to_contain_text("Claimed")
    asked: list[str] = []

    def stay(dialog) -> None:
        asked.append(dialog.type)
        dialog.dismiss()  # "stay on this page"

    g.on("dialog", stay)
    # nothing changed yet: leaving and coming back is free
    g.get_by_role("link", name="Grading queue").click()
    g.wait_for_url(f"{base}/grader")
    assert asked == []
    g.go_back()
    g.locator("#item-environment label.level").nth(2).click()  # the mouse for one line
    g.keyboard.press("f")
    g.keyboard.type("Good numbers.")
    g.get_by_role("link", name="Grading queue").click()
    g.wait_for_timeout(500)
    assert asked == ["beforeunload"]
    assert f"/grader/reports/{report_id}" in g.url  # still on the review page
    expect(g.locator("#feedback")).to_have_value("Good numbers.")
    screenshot(g, "loop-grader-unsaved-kept", full_page=False)
    # the keyboard for the rest, then save: no question on the way out
    g.keyboard.press("Escape")
    for key in ("j", "3", "j", "2", "j", "3", "j", "3", "j", "2"):
        g.keyboard.press(key)
    g.keyboard.press("Control+Enter")
    expect(g.locator(".banner[role=status]")).to_contain_text("Grade saved")
    assert asked == ["beforeunload"]
    g.get_by_role("link", name="Grading queue").click()
    g.wait_for_url(f"{base}/grader")
    assert asked == ["beforeunload"]
    ctx.close()
