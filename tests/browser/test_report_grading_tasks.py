"""The report-and-grading loop walked as a newcomer, as both people, at 1280x800 and 390x844: the friction
found there and fixed, each checked in real Chromium against a real server (seeded users, real lab runs).

Screenshots: test-artifacts/screenshots/loop-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SIZES, login, screenshot
from tests.browser.pages import SPIKED
from tests.browser.seed import Seeder
from tests.conftest import default_class

pytestmark = pytest.mark.browser  # drives Chromium against a live server: `-m "not browser"` skips it

LESSON = "transformer-scaling"


@pytest.fixture(scope="module")
def seeder(live_server):
    s = Seeder(live_server.data)
    yield s
    s.close()


def _submitted(seeder: Seeder, email: str, name: str) -> int:
    """A learner with a finished run of every lab, attached and submitted (unclaimed, ungraded); the report id."""
    from app.core.models import User
    from app.services.grading import reports
    from app.services.learning import lessons as lesson_service

    owner_id = seeder.user(email, name=name)
    for lab in ("env-check", "tp-sweep", "overlap-trace"):
        seeder.job(owner_id, lab)
    seeder.job(owner_id, "fp8-step", SPIKED)  # the run the numerics item asks for
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
    from app.core.models import User
    from app.services.grading import grades as grading

    uid = seeder.user(email, roles=("grader",))
    with seeder.sessions() as db:
        grader = db.get(User, uid)
        assert grader is not None
        grading.assign(db, klass=default_class(db), grader=grader, lesson_id=LESSON)


def test_leaving_a_grade_with_unsaved_changes_asks_first(browser, live_server, seeder):
    """Picks and feedback typed but not saved were lost to a stray click on "Grading queue"; now the browser asks
    before leaving, and saving (Ctrl+Enter) leaves without asking."""
    base = live_server.url
    report_id = _submitted(seeder, "una@example.org", "Una")
    _grader(seeder, "gwen@example.org")
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    g = ctx.new_page()
    login(g, base, "gwen@example.org")
    g.goto(f"{base}/classes/default/grader/reports/{report_id}")
    g.get_by_role("button", name="Claim this report").click()
    expect(g.locator(".banner[role=status]")).to_contain_text("Claimed")
    asked: list[str] = []

    def stay(dialog) -> None:
        asked.append(dialog.type)
        dialog.dismiss()  # "stay on this page"

    g.on("dialog", stay)
    # nothing changed yet: leaving and coming back is free
    g.get_by_role("link", name="Grading queue").click()
    g.wait_for_url(f"{base}/classes/default/grader")
    assert asked == []
    g.go_back()
    expect(g.locator("#grade-form")).to_be_visible()
    g.locator("#item-environment label.level").nth(2).click()  # the mouse for one line
    g.keyboard.press("f")
    g.keyboard.type("Good numbers.")
    with g.expect_event("dialog"):  # the question comes asynchronously
        g.get_by_role("link", name="Grading queue").click()
    assert asked == ["beforeunload"]
    assert f"/classes/default/grader/reports/{report_id}" in g.url  # still on the review page
    expect(g.locator("#feedback")).to_have_value("Good numbers.")
    screenshot(g, "loop-grader-unsaved-kept", full_page=False)
    # the keyboard for the rest, then save: no question on the way out
    g.keyboard.press("Escape")
    for key in ("j", "3", "j", "2", "j", "3", "j", "3", "j", "2"):
        g.keyboard.press(key)
    g.keyboard.press("Control+Enter")
    expect(g.locator(".banner[role=status]")).to_contain_text("Grade saved")
    assert asked == ["beforeunload"]
    # the address is the review page's again, not the post's: a reload reads the saved grade, sends nothing
    assert g.url == f"{base}/classes/default/grader/reports/{report_id}?v=1", g.url
    g.reload()
    expect(g.locator("#grade-total")).to_have_text("16")
    expect(g.get_by_test_id("grading-error")).to_have_count(0)
    expect(g.locator("#feedback")).to_have_value("Good numbers.")
    g.get_by_role("link", name="Grading queue").click()
    g.wait_for_url(f"{base}/classes/default/grader")
    assert asked == ["beforeunload"]
    ctx.close()


def _zip(files: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize("size", SIZES)
def test_typed_answers_survive_uploads_and_attach_latest(browser, live_server, seeder, size):
    """An answer typed and then a bundle uploaded (or "Attach my latest runs" pressed) was thrown away: those were
    separate forms. Now they send the report form, so the draft is saved with them, a refused upload included."""
    from tests.app import labruns

    base = live_server.url
    email = f"tess-{size}@example.org"
    owner_id = seeder.user(email, name="Tess")
    seeder.job(owner_id, "fp8-step", SPIKED)
    ctx = browser.new_context(viewport=dict(zip(("width", "height"), SIZES[size])))
    pg = ctx.new_page()
    login(pg, base, email)
    pg.goto(f"{base}/lessons/{LESSON}/report")
    error = pg.get_by_test_id("upload-error")

    def upload(name: str | None, data: bytes = b"") -> None:
        if name:
            pg.locator("#bundle-file").set_input_files({"name": name, "mimeType": "application/zip", "buffer": data})
        pg.get_by_role("button", name="Upload bundle").click()
        pg.wait_for_load_state()

    pg.locator("#answer-numbers").fill("Gap 0.02% at step 4; the scale halved after the clip.")
    upload("notes.zip", b"just some text, renamed")
    expect(error).to_contain_text("not a zip archive")
    expect(error.locator("code").first).to_have_text("zip -r bundle.zip .")  # the command as code, not in backticks
    expect(error).not_to_contain_text("`")
    expect(error).to_contain_text("Your draft, answers included, is saved.")
    expect(error).to_be_in_viewport()
    expect(pg.locator("#answer-numbers")).to_have_value("Gap 0.02% at step 4; the scale halved after the clip.")
    screenshot(pg, f"loop-upload-refused-{size}", full_page=False)
    pg.locator("#answer-overlap").fill("Windowed: about 60% on both ranks.")
    upload("noresult.zip", _zip({"notes.txt": b"hello"}))
    expect(error).to_contain_text("no result.json")
    expect(pg.locator("#answer-overlap")).to_have_value("Windowed: about 60% on both ranks.")
    upload(None)  # the button with no file chosen
    expect(error).to_contain_text("choose a .zip file to upload first")
    pg.locator("#answer-sharding").fill("At TP=2 the all-reduce outgrew the GEMM.")
    pg.get_by_role("button", name="Attach my latest runs to empty items").click()
    expect(pg.locator(".banner[role=status]")).to_contain_text("Attached your latest runs to 1 item.")
    expect(pg.locator("#answer-sharding")).to_have_value("At TP=2 the all-reduce outgrew the GEMM.")
    pg.locator("#answer-sharding").fill("At TP=2, on gloo.")
    upload("b1.zip", _zip({p.name: p.read_bytes() for p in labruns.bundle("env-check").iterdir() if p.is_file()}))
    expect(pg.locator(".banner[role=status]")).to_contain_text("attached it to “Environment capability”")
    for qid, text in (
        ("numbers", "Gap 0.02% at step 4; the scale halved after the clip."),
        ("overlap", "Windowed: about 60% on both ranks."),
        ("sharding", "At TP=2, on gloo."),
    ):
        expect(pg.locator(f"#answer-{qid}")).to_have_value(text)
    expect(pg.get_by_test_id("state-env-capability")).to_contain_text("Present")
    expect(pg.get_by_test_id("state-bf16-fp8-numerics")).to_contain_text("Present")
    # and it is the stored draft, not only what the page shows
    pg.goto(f"{base}/lessons/{LESSON}/report")
    expect(pg.locator("#answer-sharding")).to_have_value("At TP=2, on gloo.")
    screenshot(pg, f"loop-upload-kept-{size}", full_page=False)
    ctx.close()


def test_reloading_after_submit_does_not_hand_the_report_in_again(browser, live_server, seeder):
    """ "Submitted as version 1" was the answer to the POST itself: reloading it (and saying yes to the browser's
    "resubmit the form?") handed in version 2, the same as version 1, for the grader to find."""
    from app.core.models import LabReport, ReportVersion

    base = live_server.url
    owner_id = seeder.user("rhea@example.org", name="Rhea")
    for lab in ("env-check", "tp-sweep", "overlap-trace"):
        seeder.job(owner_id, lab)
    seeder.job(owner_id, "fp8-step", SPIKED)
    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    pg = ctx.new_page()
    pg.on("dialog", lambda d: d.accept())  # a "send the form again?" question would be answered yes
    login(pg, base, "rhea@example.org")
    pg.goto(f"{base}/lessons/{LESSON}/report")
    pg.get_by_role("button", name="Attach my latest runs to empty items").click()
    for qid in ("numbers", "overlap", "sharding"):
        pg.locator(f"#answer-{qid}").fill(f"My {qid} answer.")
    pg.get_by_role("button", name="Submit report").click()
    status = pg.locator("main").get_by_role("status")
    expect(status).to_contain_text("Submitted as version 1. The automatic checks ran")
    pg.reload()
    expect(status).to_contain_text("Submitted as version 1.")
    with seeder.sessions() as db:
        report = db.query(LabReport).filter_by(owner_id=owner_id).one()
        assert db.query(ReportVersion).filter_by(report_id=report.id).count() == 1
    expect(pg.get_by_test_id("versions")).to_have_count(0)  # one version: no list of every version
    screenshot(pg, "loop-submitted-reloaded-phone", full_page=False)
    ctx.close()
