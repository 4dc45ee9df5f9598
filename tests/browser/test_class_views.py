"""The instructor's class views in real Chromium at 1280x800 and 390x844: the roster (sort, stuck, learner page),
question statistics with the one-click draft rule, and labs across the class. Boxes are measured: the page never
scrolls sideways, and on a phone each roster row's cells stay on screen.

Screenshots: test-artifacts/screenshots/class-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from app.core.models import PartProgress, User
from app.services.learning import answering
from app.services.learning import lessons as lesson_service
from app.services.learning import progress as learning
from tests.app.reporting import LESSON
from tests.browser.conftest import SIZES, screenshot
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser

INSTRUCTOR = "iris-class@example.org"
QID = "fp8-scale-from-amax"
PREFIX = "rosa"  # the learners this module plants share it, so a filter shows only them on the shared server


def _user(db, uid: int) -> User:
    return db.get(User, uid)


def _answer(db, uid: int, factor: float) -> None:
    user = _user(db, uid)
    current = lesson_service.current(db, lesson_id=LESSON)
    mine = answering.variant(current.lesson, user=user, question_id=QID)
    done = answering.answer_question(
        db,
        user=user,
        lesson=current.lesson,
        current_version=current.version,
        question_id=QID,
        version=current.version,
        answer=repr(mine.answer * factor),
        seed=learning.variant_seed(uid, QID),
    )
    assert done.error is None, done.error


@pytest.fixture(scope="module")
def klass(live_server):
    s = Seeder(live_server.data)
    s.user(INSTRUCTOR, roles=("instructor",), name="Iris")
    ids = {n: s.user(f"{PREFIX}-{n}@example.org", name=f"{PREFIX.title()} {n.title()}") for n in ("a", "b", "c")}
    with s.sessions() as db:
        for uid in ids.values():
            for _ in range(3):
                _answer(db, uid, 2.0)  # three wrong tries, none right: all three are stuck on it
        _answer(db, ids["a"], 1.0)
        part = lesson_service.current(db, lesson_id=LESSON).lesson.parts[0]
        learning.visit(db, user=_user(db, ids["b"]), lesson_id=LESSON, part_id=part.id)
        db.query(PartProgress).filter_by(user_id=ids["b"], part_id=part.id).update({"seconds_spent": 3 * 3600})
        db.commit()
    s.job(ids["a"], "overlap-trace")
    yield ids
    s.close()


def _no_sideways_scroll(page) -> None:
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths


@pytest.mark.parametrize("size", list(SIZES))
def test_roster_sorts_and_opens_a_learner(live_server, klass, open_page, size):
    pg = open_page(size, INSTRUCTOR)
    pg.goto(f"{live_server.url}/classes/default/roster?q={PREFIX}-")
    rows = pg.locator("table.roster tbody tr[data-learner]")
    expect(rows).to_have_count(3)
    _no_sideways_scroll(pg)
    # b and c are stuck (three wrong tries, none right), b also three hours on part 1; a got it right at last
    stuck_b = pg.locator(f"tr[data-learner='{klass['b']}'] [data-testid='stuck']")
    expect(stuck_b).to_contain_text("not finished")
    expect(stuck_b).to_contain_text("wrong tries")
    width = SIZES[size][0]
    for label in ("Parts done", "Questions right / tried", "Wrong tries", "Stuck"):
        box = pg.locator(f"tr[data-learner='{klass['b']}'] td[data-label='{label}']").bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, (label, box)
    if size == "laptop":  # by the column's header, twice to reverse
        pg.locator("a[data-sort='right']").click()
        pg.wait_for_url("**sort=right**")
        pg.locator("a[data-sort='right']").click()
    else:  # a phone's rows are blocks without a header row: the form sorts
        pg.get_by_label("Sort by").select_option("right")
        pg.get_by_label("Highest first").check()
        pg.get_by_role("button", name="Show").click()
    pg.wait_for_url("**desc=1**")
    expect(rows.first).to_have_attribute("data-learner", str(klass["a"]))
    screenshot(pg, f"class-roster-{size}")
    pg.get_by_role("link", name=f"{PREFIX.title()} A").click()
    expect(pg.get_by_role("heading", level=1)).to_contain_text(f"{PREFIX.title()} A")
    expect(pg.get_by_test_id("learner-attempts").locator("tbody tr")).to_have_count(4)
    expect(pg.get_by_test_id("learner-runs")).to_contain_text("overlap-trace")
    _no_sideways_scroll(pg)
    screenshot(pg, f"class-learner-{size}")


@pytest.mark.parametrize("size", list(SIZES))
def test_questions_draft_rule_opens_the_editor_and_labs_show_spread(live_server, klass, open_page, size):
    pg = open_page(size, INSTRUCTOR)
    pg.goto(f"{live_server.url}/classes/default/questions?lesson={LESSON}")
    row = pg.locator(f"tr[data-question='{QID}']")
    expect(row.locator("[data-testid='wrong-answers']")).to_contain_text("2× the answer")
    _no_sideways_scroll(pg)
    link = row.get_by_test_id("draft-rule").first
    box = link.bounding_box()
    assert box and box["x"] + box["width"] <= SIZES[size][0], box
    screenshot(pg, f"class-questions-{size}")
    link.click()
    pg.wait_for_url("**/edit?file=questions/**")
    assert '  - times_answer: 2\n    feedback: ""' in pg.locator("#text").input_value()
    expect(pg.get_by_test_id("drafted-rule")).to_contain_text("answers 2× the right one")
    pg.goto(f"{live_server.url}/classes/default/labs")
    lab = pg.locator("section[data-lab='overlap-trace']")
    expect(lab).to_contain_text("windowed: overlap ratio")
    _no_sideways_scroll(pg)
    screenshot(pg, f"class-labs-{size}")


@pytest.mark.parametrize("size", list(SIZES))
def test_editor_keeps_long_lines_whole_and_uses_the_width(live_server, klass, open_page, size):
    """A long YAML line wrapped into a narrow column, and End stopped at the end of the visual line: each line is
    one row that scrolls sideways, End reaches the line's last character, and on a laptop the editor takes most
    of the page."""
    pg = open_page(size, INSTRUCTOR)
    pg.goto(f"{live_server.url}/instructor/lessons/{LESSON}/edit?file=questions/{QID}.yaml")
    lines = pg.locator(".cm-host .cm-line")
    expect(lines.first).to_be_visible()
    heights = lines.evaluate_all("ls => ls.map(l => l.getBoundingClientRect().height)")
    # each line's text as drawn: a block's own box is as wide as the widest line, its text is not
    widths = lines.evaluate_all(
        "ls => ls.map(l => { const r = document.createRange(); r.selectNodeContents(l); return r.getBoundingClientRect().width })"
    )
    scroller = pg.locator(".cm-host .cm-scroller")
    client = scroller.evaluate("s => s.clientWidth")
    assert max(widths) > client, (max(widths), client)  # a line longer than the box is there to test
    assert max(heights) <= min(heights) + 1, heights  # and it is one row, not wrapped
    longest = widths.index(max(widths))
    lines.nth(longest).click(position={"x": 5, "y": 5})
    pg.keyboard.press("End")
    # the view follows the cursor to the line's end (CodeMirror scrolls in its next measure, after a frame)
    pg.wait_for_function("() => document.querySelector('.cm-host .cm-scroller').scrollLeft > 0", timeout=5000)
    col = pg.evaluate("() => { const s = getSelection(); return [s.focusNode.textContent.length, s.focusOffset] }")
    assert col[0] == col[1], col
    _no_sideways_scroll(pg)
    if size == "laptop":
        box = pg.locator(".cm-host").bounding_box()
        assert box and box["width"] >= 0.5 * SIZES[size][0], box
    screenshot(pg, f"class-editor-{size}", full_page=False)


GRADER = "gwen-class@example.org"


@pytest.fixture(scope="module")
def submitted(live_server, klass):
    from tests.browser.test_report_grading_tasks import _grader, _submitted

    s = Seeder(live_server.data)
    _grader(s, GRADER)
    report_id = _submitted(s, f"{PREFIX}-report@example.org", "Rosa Report")
    yield report_id
    s.close()


@pytest.mark.parametrize("size", list(SIZES))
def test_each_rubric_line_shows_what_it_grades_beside_it(live_server, submitted, open_page, size):
    """The written answers sat ~17,600 px down a 1280 px page and the rubric ~23,900 px down a phone's: each line
    now carries the answer and the evidence checks it grades, a few lines under its title."""
    pg = open_page(size, GRADER)
    pg.goto(f"{live_server.url}/classes/default/grader/reports/{submitted}#rubric-h")
    answer = pg.get_by_test_id("beside-answer-reasoning")
    expect(answer).to_contain_text("Gap 0.02% at step 4.")
    evidence = pg.get_by_test_id("beside-ev-numerics")
    expect(evidence.locator("li").first).to_be_visible()
    for item, beside in (("reasoning", answer), ("numerics", evidence)):
        legend = pg.locator(f"#item-{item} legend").bounding_box()
        box = beside.bounding_box()
        assert legend and box and 0 < box["y"] - legend["y"] < 250, (item, legend, box)
        assert box["x"] + box["width"] <= SIZES[size][0], (item, box)
    _no_sideways_scroll(pg)
    pg.locator("#item-reasoning").scroll_into_view_if_needed()
    screenshot(pg, f"class-review-beside-{size}", full_page=False)


@pytest.mark.parametrize("size", list(SIZES))
def test_the_queue_page_holds_and_releases_a_lessons_grades(live_server, klass, open_page, size):
    pg = open_page(size, INSTRUCTOR)
    pg.goto(f"{live_server.url}/classes/default/grader")
    row = pg.locator(f"li[data-release='{LESSON}']")
    expect(row).to_contain_text("released as saved")
    row.get_by_role("button", name="Hold grades until released").click()
    expect(pg.get_by_test_id("release-note")).to_contain_text("now holds grades")
    expect(row).to_contain_text("held, 0 grades waiting")
    for button in row.get_by_role("button").all():
        box = button.bounding_box()
        assert box and box["x"] + box["width"] <= SIZES[size][0], box
    _no_sideways_scroll(pg)
    pg.get_by_test_id("releases").scroll_into_view_if_needed()
    screenshot(pg, f"class-release-{size}", full_page=False)
    # back to releasing as saved, which the suite's other grading tests expect
    row.get_by_role("button", name="Release as saved from now on").click()
    expect(pg.get_by_test_id("release-note")).to_contain_text("releases grades as they are saved")
    expect(row).to_contain_text("released as saved")


@pytest.mark.parametrize("size", list(SIZES))
def test_a_refused_new_lesson_names_the_field_on_the_instructor_page(live_server, klass, open_page, size):
    """Creating with a taken id changes nothing on the shared server: the summary links to the field, typed text
    stays. (Creating itself is checked over HTTP in tests/app/test_authoring_new_lesson.py.)"""
    pg = open_page(size, INSTRUCTOR)
    pg.goto(f"{live_server.url}/instructor")
    form = pg.locator("#new-lesson")
    form.get_by_label("Id").fill(LESSON)
    form.get_by_label("Title").fill("Again")
    form.get_by_label("Number").fill("98")
    form.get_by_role("button", name="Create and edit").click()
    summary = pg.get_by_test_id("new-lesson-errors")
    expect(summary).to_contain_text("exists already")
    expect(form.get_by_label("Title")).to_have_value("Again")
    summary.get_by_role("link", name="Id").click()
    expect(form.get_by_label("Id")).to_be_focused()
    box = form.get_by_role("button", name="Create and edit").bounding_box()
    assert box and box["x"] + box["width"] <= SIZES[size][0], box
    _no_sideways_scroll(pg)
    screenshot(pg, f"class-new-lesson-refused-{size}", full_page=False)


def test_a_digit_picks_the_level_the_page_names_by_that_key(live_server, submitted, open_page):
    """The script picks the level whose data-key is the digit: the level's place on the shipped rubric (some levels
    are 1.5 points), its points where every level is whole (the server writes those keys: tests/app/
    test_grading_keys.py). Here the page's keys are rewritten to the points the server would write, so the same
    script is seen picking by points: 4 gives the 4-point level, and 3, which names none, picks nothing."""
    from app.services.grading import grades as grading
    from tests.browser.test_grader_audit import _focused_line

    with Seeder(live_server.data).sessions() as db:
        report = db.get(grading.LabReport, submitted)
        grader = db.query(User).filter_by(email=GRADER).one()
        if report.claimed_by_id is None:
            grading.claim(db, report=report, grader=grader)
    pg = open_page("laptop", GRADER)
    pg.goto(f"{live_server.url}/classes/default/grader/reports/{submitted}")
    expect(pg.locator("details.shortcuts")).to_have_attribute("data-keys", "order")
    pg.locator("#item-numerics").focus()
    assert _focused_line(pg) == "numerics"
    pg.keyboard.press("3")
    expect(pg.locator("#item-numerics input[value=explained]")).to_be_checked()
    pg.evaluate(
        """() => document.querySelectorAll('#item-numerics input[type=radio]').forEach(
             r => { r.dataset.key = String(Math.round(parseFloat(r.dataset.fraction) * 4)); })"""
    )
    pg.keyboard.press("0")
    expect(pg.locator("#item-numerics input[value=missing]")).to_be_checked()
    pg.keyboard.press("3")  # no level of this line is worth 3 points
    expect(pg.locator("#item-numerics input[value=missing]")).to_be_checked()
    pg.keyboard.press("2")
    expect(pg.locator("#item-numerics input[value=shown]")).to_be_checked()


@pytest.mark.parametrize("size", list(SIZES))
def test_a_reset_link_issued_from_the_roster_is_copied_with_one_click(live_server, klass, open_page, size):
    pg = open_page(size, INSTRUCTOR)
    pg.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    pg.goto(f"{live_server.url}/classes/default/learners/{klass['c']}")
    pg.get_by_role("button", name="Issue a password-reset link").click()
    link = pg.locator("#reset-link")
    expect(link).to_contain_text("/reset/")
    copy = pg.locator("button[data-copy='reset-link']")
    expect(copy).to_have_text("Copy link")
    box, width = copy.bounding_box(), SIZES[size][0]
    assert box and box["x"] + box["width"] <= width
    copy.click()
    expect(copy).to_have_text("Copied")
    assert pg.evaluate("navigator.clipboard.readText()") == link.inner_text().strip()
    _no_sideways_scroll(pg)
    screenshot(pg, f"class-reset-link-copy-{size}")
