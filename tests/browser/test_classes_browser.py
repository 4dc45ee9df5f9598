"""Classes in real Chromium at 1280x800 and 390x844: a site admin creates a class (a refused address is named at its
field), a learner joins it by its invite link, and its instructor, who grades in another class too, finds its
roster with that learner alone and switches to the other class's page from the class bar. Boxes are measured: no
page scrolls sideways.

Screenshots: test-artifacts/screenshots/classes-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SIZES, register, screenshot
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser

ADMIN = "ada-classes@example.org"
TEACHER = "cora-classes@example.org"  # instructor of the new class, grader of the default one


@pytest.fixture(scope="module")
def people(live_server):
    s = Seeder(live_server.data)
    s.user(ADMIN, roles=("admin",), name="Ada Admin")
    s.user(TEACHER, roles=("grader",), name="Cora Teacher")
    yield
    s.close()


def _no_sideways_scroll(page) -> None:
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths


@pytest.mark.parametrize("size", list(SIZES))
def test_admin_creates_a_class_a_learner_joins_and_its_staff_see_it_alone(
    live_server, people, open_page, browser, size
):
    slug = f"sec-{size}"
    admin = open_page(size, ADMIN)
    admin.goto(f"{live_server.url}/admin")
    form = admin.get_by_test_id("create-class")
    form.get_by_label("Title").fill(f"GPU Systems, section {size}")
    form.get_by_label("Address").fill("Not A Slug!")
    form.get_by_label("First instructor's email (optional)").fill(TEACHER)
    form.get_by_role("button", name="Create the class").click()
    alert = admin.locator("#ce-slug")
    expect(alert).to_contain_text("Address: got 'Not A Slug!'")  # named at its field, the rest kept
    expect(admin.get_by_label("Title")).to_have_value(f"GPU Systems, section {size}")
    _no_sideways_scroll(admin)
    screenshot(admin, f"classes-admin-refused-{size}")
    admin.get_by_label("Address").fill(slug)
    admin.get_by_test_id("create-class").get_by_role("button", name="Create the class").click()
    expect(admin.locator("#admin-status")).to_contain_text(f"Class GPU Systems, section {size} is made.")
    expect(admin.locator(f"tr[data-class='{slug}']")).to_contain_text("1")  # its first instructor
    _no_sideways_scroll(admin)
    screenshot(admin, f"classes-admin-{size}")

    teacher = open_page(size, TEACHER)
    teacher.goto(f"{live_server.url}/classes/{slug}")
    invite = teacher.get_by_test_id("invite-url").inner_text()
    assert invite.endswith(teacher.get_by_test_id("invite-code").inner_text())
    _no_sideways_scroll(teacher)
    screenshot(teacher, f"classes-overview-{size}")

    # a new learner opens the invite link and joins
    width, height = SIZES[size]
    ctx = browser.new_context(viewport={"width": width, "height": height})
    learner = ctx.new_page()
    learner.set_default_timeout(15_000)
    register(learner, live_server.url, f"jo-{size}@example.org", name=f"Jo Joiner {size}")
    learner.goto(invite)
    expect(learner.get_by_role("heading", level=1)).to_have_text(f"GPU Systems, section {size}")
    _no_sideways_scroll(learner)
    screenshot(learner, f"classes-invite-{size}")
    learner.get_by_test_id("join").click()
    learner.wait_for_url(f"**/classes/{slug}")
    learner.goto(f"{live_server.url}/")
    expect(learner.get_by_test_id("home-classes")).to_contain_text(f"GPU Systems, section {size}")
    ctx.close()

    # the class's roster has that learner alone; the class bar switches to the class she grades in
    teacher.goto(f"{live_server.url}/classes/{slug}/roster")
    rows = teacher.locator("table.roster tbody tr[data-learner]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(f"Jo Joiner {size}")
    bar = teacher.get_by_test_id("classbar")
    expect(bar.get_by_test_id("class-title")).to_have_text(f"GPU Systems, section {size}")
    switcher = teacher.get_by_test_id("class-switcher")
    expect(switcher.locator("a[data-class='default']")).to_contain_text("(grader)")
    _no_sideways_scroll(teacher)
    screenshot(teacher, f"classes-roster-{size}")
    switcher.locator("a[data-class='default']").click()  # a grader there: its overview, not a roster
    teacher.wait_for_url(f"{live_server.url}/classes/default")
    teacher.get_by_role("navigation", name="This class").get_by_role("link", name="Grading").click()
    expect(teacher.get_by_role("heading", level=1)).to_have_text("Grading queue")
    expect(teacher.locator("table.queue")).not_to_contain_text(f"Jo Joiner {size}")
    _no_sideways_scroll(teacher)
    screenshot(teacher, f"classes-switched-queue-{size}")
    # the people page: the learner, how she joined, and the invite link
    teacher.goto(f"{live_server.url}/classes/{slug}/people")
    expect(teacher.get_by_test_id("people")).to_contain_text("invite link")
    _no_sideways_scroll(teacher)
    screenshot(teacher, f"classes-people-{size}")
