"""A lesson made or changed in the browser is a draft until it is published, in real Chromium at 1280x800 and
390x844: staff create one, read it in its preview, save an edit as a draft, and publish; a learner meanwhile finds
it in no list and not at its address, and sees a published lesson's next version only once it is published.

Each width makes a lesson of its own, taken away at the end. Screenshots: test-artifacts/screenshots/draft-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import made_lessons
from tests.browser.conftest import SIZES, screenshot
from tests.browser.seed import Seeder

pytestmark = pytest.mark.browser

INSTRUCTOR = "draft-author@example.org"
LEARNER = "draft-reader@example.org"
LESSONS = {"laptop": ("drafted-laptop", 85), "phone": ("drafted-phone", 86)}


@pytest.fixture(scope="module")
def people(live_server):
    s = Seeder(live_server.data)
    s.user(INSTRUCTOR, roles=("instructor",), name="Dora")
    s.user(LEARNER, name="Lee")
    yield
    made_lessons.remove(s, *(lid for lid, _ in LESSONS.values()))
    s.close()


def _retitle(pg, title: str) -> None:
    """Change lesson.yaml's title in the editor as an author does: the whole text, with the new title line."""
    text = pg.locator("#text").input_value()
    lines = [f'title: "{title}"' if line.startswith("title:") else line for line in text.split("\n")]
    pg.locator(".cm-content").click()
    pg.keyboard.press("Control+a")
    pg.keyboard.insert_text("\n".join(lines))
    expect(pg.locator("#preview p.ok")).to_contain_text("Valid.", timeout=10_000)


def _learner_cannot_see(reader, base: str, lesson_id: str, title: str) -> None:
    reader.goto(f"{base}/")
    expect(reader.locator(".lesson-card").first).to_be_visible()
    expect(reader.locator("main")).not_to_contain_text(title)
    assert reader.goto(f"{base}/lessons/{lesson_id}").status == 404
    assert reader.goto(f"{base}/instructor/lessons/{lesson_id}/draft/preview").status == 403


@pytest.mark.parametrize("size", list(SIZES))
def test_a_new_lesson_and_a_new_version_stay_with_staff_until_published(live_server, people, open_page, size):
    lesson_id, number = LESSONS[size]
    base, width = live_server.url, SIZES[size][0]
    first, second = f"Drafted on a {size}", f"Drafted on a {size}, revised"
    pg = open_page(size, INSTRUCTOR)
    reader = open_page(size, LEARNER)

    # a new lesson is a draft: the editor says so, the preview shows it, learners see nothing of it
    pg.goto(f"{base}/instructor")
    form = pg.locator("#new-lesson")
    form.get_by_label("Id").fill(lesson_id)
    form.get_by_label("Title").fill(first)
    form.get_by_label("Number").fill(str(number))
    form.get_by_role("button", name="Create and edit").click()
    banner = pg.get_by_test_id("draft-banner")
    expect(banner).to_contain_text("Lesson created as a draft.")
    expect(banner).to_contain_text("No learner sees this lesson until you publish it")
    box = banner.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    screenshot(pg, f"draft-created-{size}", full_page=False)
    _learner_cannot_see(reader, base, lesson_id, first)
    pg.get_by_test_id("draft-preview-link").click()
    expect(pg.get_by_test_id("draft-banner")).to_contain_text("Draft preview: only staff see this.")
    expect(pg.get_by_test_id("draft-preview")).to_contain_text(first)
    assert pg.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(pg, f"draft-preview-new-{size}", full_page=False)
    pg.goto(f"{base}/instructor")
    expect(pg.get_by_test_id("new-drafts")).to_contain_text(first)

    # published: version 1 reaches learners
    pg.goto(f"{base}/instructor/lessons/{lesson_id}/edit")
    pg.get_by_test_id("publish").click()
    expect(pg.locator("#published")).to_contain_text("Published version 1")
    reader.goto(f"{base}/")
    expect(reader.locator("main")).to_contain_text(first)

    # a new version saved as a draft: staff preview it, learners keep version 1 until it is published
    pg.goto(f"{base}/instructor/lessons/{lesson_id}/edit")
    _retitle(pg, second)
    pg.get_by_test_id("save-draft").click()
    banner = pg.get_by_test_id("draft-banner")
    expect(banner).to_contain_text("Draft saved.")
    expect(banner).to_contain_text("Learners still see version 1")
    screenshot(pg, f"draft-saved-{size}", full_page=False)
    reader.goto(f"{base}/lessons/{lesson_id}")
    expect(reader.locator("h1")).to_have_text(first)
    expect(reader.locator("main")).not_to_contain_text("revised")
    screenshot(reader, f"draft-learner-sees-v1-{size}", full_page=False)
    pg.goto(f"{base}/instructor/lessons/{lesson_id}/draft/preview")
    expect(pg.get_by_test_id("draft-preview").locator("h1")).to_have_text(second)
    expect(pg.get_by_test_id("draft-banner")).to_contain_text("Learners see version 1 until this draft is published.")
    screenshot(pg, f"draft-preview-v2-{size}", full_page=False)
    pg.goto(f"{base}/instructor/lessons/{lesson_id}/edit")
    pg.get_by_test_id("publish").click()
    expect(pg.locator("#published")).to_contain_text("Published version 2")
    expect(pg.get_by_test_id("draft-banner")).to_have_count(0)
    reader.goto(f"{base}/lessons/{lesson_id}")
    expect(reader.locator("h1")).to_have_text(second)
