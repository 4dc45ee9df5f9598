"""A learner's uploads on /reports: what an upload kept and dropped, the storage used against the quota, and
deleting one, and an upload's own page (self-reported), at laptop and phone width. Screenshots:
test-artifacts/screenshots/uploads-*.png."""

from __future__ import annotations

import io
import zipfile

import pytest
from playwright.sync_api import expect

from tests.app import labruns
from tests.browser.conftest import screenshot
from tests.browser.pages import LESSON, overflow
from tests.browser.seed import Seeder
from tests.conftest import default_class

pytestmark = pytest.mark.browser


def _padded_bundle() -> bytes:
    """env-check's real result and artifacts, plus files its result.json does not list."""
    buf = io.BytesIO()
    folder = labruns.bundle("env-check")
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(folder).as_posix())
        for i in range(3):
            zf.writestr(f"padding/notes-{i}.txt", "x" * 50_000)
    return buf.getvalue()


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_uploads_list_what_they_keep_and_delete_frees_space(live_server, open_page, size):
    email = f"upl-{size}@example.org"
    Seeder(live_server.data).user(email, name="Ula")
    page = open_page(size, email)
    page.goto(f"{live_server.url}/lessons/{LESSON}/report")
    page.locator("#bundle-file").set_input_files(
        {"name": "env.zip", "mimeType": "application/zip", "buffer": _padded_bundle()}
    )
    page.get_by_role("button", name="Upload bundle").click()
    expect(page.locator("main")).to_contain_text("Not kept, because result.json does not list them")
    expect(page.locator("main")).to_contain_text("padding/notes-0.txt")
    screenshot(page, f"uploads-dropped-{size}", full_page=False)

    page.goto(f"{live_server.url}/reports")
    uploads = page.get_by_test_id("uploads")
    expect(uploads.locator("tbody tr")).to_have_count(1)
    expect(page.get_by_test_id("storage-usage")).to_contain_text("1 upload stored of 50 allowed")
    assert overflow(page) <= 1
    table, viewport = uploads.locator("table").bounding_box(), page.viewport_size
    assert table and viewport and table["x"] >= 0 and table["x"] + table["width"] <= viewport["width"]
    delete = uploads.get_by_role("button", name="Delete #")
    box = delete.bounding_box()
    assert box and box["x"] + box["width"] <= viewport["width"]
    screenshot(page, f"uploads-list-{size}")

    # the upload's own page: its label is the uploader's words, and every number self-reported
    uploads.get_by_role("link", name="#").first.click()
    label = page.get_by_test_id("honesty-label")
    expect(label).to_contain_text("How these numbers were made, in the uploader's words:")
    expect(label).to_contain_text("every number below is self-reported")
    expect(page.locator("h1")).to_contain_text("self-reported")
    assert overflow(page) <= 1
    screenshot(page, f"uploads-bundle-page-{size}", full_page=False)
    page.goto(f"{live_server.url}/reports")

    delete.click()
    expect(page.get_by_test_id("upload-deleted")).to_be_visible()
    expect(uploads.locator("tbody tr")).to_have_count(0)
    expect(page.get_by_test_id("storage-usage")).to_contain_text("0 uploads stored")
    screenshot(page, f"uploads-deleted-{size}")


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_a_grader_reads_an_upload_as_the_learners_claim(live_server, open_page, size):
    """The probe's upload: a CPU run edited to say te on an H100, with a label of the learner's own. The grader's
    review quotes the label as the uploader's words and lists where the result contradicts itself."""
    from app.core.models import Bundle, User
    from app.services.grading import grades as grading
    from app.services.grading import reports
    from app.services.learning import lessons as lesson_service
    from tests.app.test_upload_claims import FORGED_LABEL, _forged_bundle

    seed = Seeder(live_server.data)
    email, grader = f"claim-{size}@example.org", f"gina-{size}@example.org"
    seed.user(email, name="Cleo")
    grader_id = seed.user(grader, roles=("grader",), name="Gina")
    page = open_page(size, email)
    page.goto(f"{live_server.url}/lessons/{LESSON}/report")
    page.locator("#bundle-file").set_input_files(
        {"name": "h100.zip", "mimeType": "application/zip", "buffer": _forged_bundle()}
    )
    page.get_by_role("button", name="Upload bundle").click()
    expect(page.locator("main")).to_contain_text("and attached it to")
    with seed.sessions() as db:
        owner = db.query(User).filter_by(email=email).one()
        bundle = db.query(Bundle).filter_by(owner_id=owner.id).one()
        current = lesson_service.current(db, lesson_id=LESSON)
        report = reports.get_or_create(db, owner=owner, lesson_id=LESSON)
        slot = next(
            s.id
            for s, v in ((s, (report.draft or {}).get("evidence", {}).get(s.id)) for s in reports.slots(current.lesson))
            if v
        )
        reports.save_draft(
            db, report=report, owner=owner, lesson=current.lesson, evidence={slot: f"bundle:{bundle.id}"}, answers={}
        )
        reports.submit(db, settings=seed.settings, report=report, lesson=current.lesson, lesson_version=current.version)
        grading.assign(db, klass=default_class(db), grader=db.get(User, grader_id), lesson_id=LESSON)
        report_id = report.id
    seed.close()
    review = open_page(size, grader)
    review.goto(f"{live_server.url}/classes/default/grader/reports/{report_id}")
    item = review.locator(f"#ev-{slot}")
    expect(item).to_contain_text("uploaded, self-reported")
    expect(item).to_contain_text("Uploaded, so self-reported: the course did not run it.")
    expect(item).to_contain_text("This upload contradicts itself:")
    expect(item).not_to_contain_text("measured on the device")
    item.locator("summary", has_text="Result as the learner saw it").click()
    expect(item.get_by_test_id("honesty-label")).to_contain_text(f"in the uploader's words: “{FORGED_LABEL}”")
    assert overflow(review) <= 1
    item.scroll_into_view_if_needed()
    screenshot(review, f"uploads-grader-review-{size}", full_page=False)
