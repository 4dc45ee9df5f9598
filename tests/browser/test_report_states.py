"""Lab reports say what is true, in real Chromium at 1280x800 and 390x844: "Attach my latest runs" attaches to each
evidence item a run that can show what it asks (the numerics item: delayed scaling with a spike, which clips, not
a newer current-scaling run, under which nothing clips) and says why when none can; the grading queue counts an
optional item left empty as "optional, not attached", not as missing; a learner whose grade is held reads "graded,
to be released", not "waiting for a grader".

Screenshots: test-artifacts/screenshots/states-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from app.core.models import LabReport, User
from app.services.grading import grades as grading
from app.services.grading import release as grade_release
from app.services.grading import reports
from app.services.learning import lessons as lesson_service
from tests.app.reporting import LEVELS
from tests.browser.conftest import SIZES, screenshot
from tests.browser.pages import CURRENT, LESSON, SPIKED, STAFF
from tests.browser.seed import Seeder
from tests.conftest import default_class

pytestmark = pytest.mark.browser

URL = f"/lessons/{LESSON}/report"
GRADER = "states-grader@example.org"


@pytest.fixture(scope="module")
def runs(live_server):
    """Per width: a learner whose newest fp8-step run is current scaling (an older delayed one with a spike is the
    one the item asks for), and a learner who has only the current-scaling run."""
    s = Seeder(live_server.data)
    out = {}
    for size in SIZES:
        both = s.user(f"states-both-{size}@example.org", name="Bea")
        for lab in ("env-check", "tp-sweep", "overlap-trace"):
            s.job(both, lab)
        spiked = s.job(both, "fp8-step", SPIKED)
        newer = s.job(both, "fp8-step", CURRENT)
        only = s.user(f"states-current-{size}@example.org", name="Cai")
        current_only = s.job(only, "fp8-step", CURRENT)
        out[size] = {"spiked": spiked, "newer": newer, "current_only": current_only}
    s.user(GRADER, roles=("grader", "instructor"), name="Gil")
    yield out
    s.close()


@pytest.mark.parametrize("size", list(SIZES))
def test_attach_latest_picks_the_run_each_item_asks_for_and_says_why_not(live_server, runs, open_page, size):
    ids = runs[size]
    pg = open_page(size, f"states-both-{size}@example.org")
    pg.goto(live_server.url + URL)
    pg.get_by_role("button", name="Attach my latest runs to empty items").click()
    status = pg.locator(".banner[role=status]")
    expect(status).to_contain_text("Attached your latest runs to 4 items.")
    menu = pg.locator("#evidence-bf16-fp8-numerics")
    expect(menu).to_have_value(f"job:{ids['spiked']}")  # not the newer current-scaling run
    assert menu.evaluate("m => m.selectedOptions[0].textContent").startswith(f"✓ Job {ids['spiked']} · spike at step 2")
    expect(pg.get_by_test_id("state-bf16-fp8-numerics")).to_have_text("Present only as CPU emulation")
    pg.locator("#slot-bf16-fp8-numerics").scroll_into_view_if_needed()
    screenshot(pg, f"states-attached-{size}", full_page=False)

    other = open_page(size, f"states-current-{size}@example.org")
    other.goto(live_server.url + URL)
    other.get_by_role("button", name="Attach my latest runs to empty items").click()
    expect(other.locator(".banner[role=status]")).to_contain_text(
        "Left 1 item empty: none of your runs can show what it asks"
    )
    why = other.get_by_test_id("passed-over-bf16-fp8-numerics")
    expect(why).to_contain_text("a delayed-scaling run with an outlier step")
    expect(why).to_contain_text(f"Your one fp8-step run, job {ids['current_only']} (no spike, 4 steps, current")
    expect(other.locator("#evidence-bf16-fp8-numerics")).to_have_value("")
    expect(other.get_by_test_id("state-bf16-fp8-numerics")).to_have_text("Missing")
    box = why.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= SIZES[size][0], box
    why.scroll_into_view_if_needed()
    screenshot(other, f"states-none-fits-{size}", full_page=False)


@pytest.mark.parametrize("size", list(SIZES))
def test_the_queue_counts_an_optional_item_apart_from_a_missing_one(live_server, seeded, open_page, size):
    """The seeded report left both optional items (the fallback and the stretch) empty, and no required one."""
    pg = open_page(size, STAFF)
    pg.goto(f"{live_server.url}/classes/default/grader")
    checks = pg.locator(f"tr[data-report='{seeded['report']}'] td[data-label='Checks']")
    expect(checks).to_contain_text("2 optional, not attached")
    expect(checks).not_to_contain_text("missing")
    box = checks.bounding_box()
    assert box and box["x"] + box["width"] <= SIZES[size][0], box
    checks.scroll_into_view_if_needed()
    screenshot(pg, f"states-queue-{size}", full_page=False)


def _submitted_and_graded_while_held(s: Seeder, email: str) -> int:
    from tests.browser.test_report_grading_tasks import _submitted

    report_id = _submitted(s, email, "Hana")
    with s.sessions() as db:
        grader = db.query(User).filter_by(email=GRADER).one()
        report = db.get(LabReport, report_id)
        current = lesson_service.current(db, lesson_id=LESSON)
        grade_release.set_hold(db, klass=default_class(db), lesson_id=LESSON, hold=True, user=grader)
        version = reports.latest_version(db, report=report)
        grading.claim(db, report=report, grader=grader)
        grading.save_grade(
            db,
            report=report,
            version=version,
            grader=grader,
            base_revision=0,
            levels=LEVELS,
            feedback="Held until the lesson's release.",
            notes="",
            rubric=current.lesson.rubric,
            rubric_version=current.version,
        )
    return report_id


@pytest.mark.parametrize("size", list(SIZES))
def test_a_held_grade_reads_graded_to_be_released(live_server, runs, open_page, size):
    s = Seeder(live_server.data)
    email = f"states-held-{size}@example.org"
    try:
        _submitted_and_graded_while_held(s, email)
        pg = open_page(size, email)
        pg.goto(f"{live_server.url}/reports")
        line = pg.locator(".card", has_text="Transformer Scaling").locator("p").first
        expect(line).to_contain_text("graded, to be released")
        expect(line).not_to_contain_text("waiting for a grader")
        screenshot(pg, f"states-held-reports-{size}", full_page=False)
        pg.goto(live_server.url + URL)
        expect(pg.locator("#draft-h .status")).to_have_text("graded, to be released")
        expect(pg.get_by_test_id("not-graded")).to_contain_text("Graded, to be released")
        expect(pg.locator("main")).not_to_contain_text("16 / 20")  # the grade itself waits for the release
        pg.get_by_test_id("not-graded").scroll_into_view_if_needed()
        screenshot(pg, f"states-held-report-{size}", full_page=False)
    finally:  # the suite's other grading tests expect grades released as they are saved
        with s.sessions() as db:
            grader = db.query(User).filter_by(email=GRADER).one()
            grade_release.set_hold(db, klass=default_class(db), lesson_id=LESSON, hold=False, user=grader)
        s.close()
