"""Instructor authoring: live validation, preview, publish as a new version, bad input refused."""

import pytest

from app.models import LessonVersion
from app.services import lessons as lesson_service

LESSON = "transformer-scaling"


@pytest.fixture
def instructor(client, make_user):
    make_user("prof@example.org", roles=("instructor",))
    client.login("prof@example.org")
    return client


def _text(db, path):
    return lesson_service.latest_row(db, lesson_id=LESSON).files[path]


def test_learner_cannot_edit(client):
    client.register("ann@example.org")
    assert client.get(f"/instructor/lessons/{LESSON}/edit").status_code == 403
    assert (
        client.post(
            f"/instructor/lessons/{LESSON}/publish", {"path": "lesson.yaml", "text": "", "base_version": 1}
        ).status_code
        == 403
    )


def test_preview_shows_errors_with_file_and_field(instructor, db):
    broken = _text(db, "parts/orient.yaml").replace("minutes: 5", "minutes: lots")
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/preview",
        {"path": "parts/orient.yaml", "text": broken},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 200 and "<html" not in r.text
    assert "transformer-scaling/parts/orient.yaml" in r.text and "minutes" in r.text
    good = _text(db, "parts/orient.yaml").replace("Orient + objectives", "Orient and objectives")
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/preview",
        {"path": "parts/orient.yaml", "text": good},
        headers={"HX-Request": "true"},
    )
    assert "Valid." in r.text and "Orient and objectives" in r.text


def test_publish_new_version_without_restart(instructor, db, make_client):
    before = lesson_service.latest_row(db, lesson_id=LESSON).version
    text = _text(db, "parts/orient.yaml").replace("Orient + objectives", "Orient and objectives")
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/orient.yaml", "text": text, "base_version": before, "note": "retitle"},
    )
    assert r.status_code == 200 and f"Published version {before + 1}" in r.text
    learner = make_client()
    learner.register("ann@example.org")
    assert "Orient and objectives" in learner.get(f"/lessons/{LESSON}/orient").text
    assert "Orient + objectives" in learner.get(f"/lessons/{LESSON}/orient?v={before}").text
    row = lesson_service.latest_row(db, lesson_id=LESSON)
    assert row.source == "editor" and row.note == "retitle"


def test_invalid_publish_changes_nothing(instructor, db):
    count = db.query(LessonVersion).count()
    version = lesson_service.latest_row(db, lesson_id=LESSON).version
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "lesson.yaml", "text": "title: [unclosed", "base_version": version},
    )
    assert r.status_code == 422 and "nothing is published" in r.text
    assert "title: [unclosed" in r.text  # the author's text is handed back
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish", {"path": "../../etc/passwd", "text": "x", "base_version": version}
    )
    assert r.status_code == 422 and "is not a lesson file" in r.text
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "lesson.yaml", "text": _text(db, "lesson.yaml"), "base_version": version - 1},
    )
    assert r.status_code == 409 and "after you started editing" in r.text
    db.expire_all()
    assert db.query(LessonVersion).count() == count


def test_script_in_authored_markdown_is_sanitized(instructor, db):
    import re

    version = lesson_service.latest_row(db, lesson_id=LESSON).version
    evil = "intro: 'Hi <script>alert(1)</script> [x](javascript:alert(2)) <img src=x onerror=alert(3)>'\n"
    text = re.sub(r"^intro:.*?(?=^\w)", evil, _text(db, "parts/orient.yaml"), count=1, flags=re.S | re.M)
    assert "<script>" in text
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish", {"path": "parts/orient.yaml", "text": text, "base_version": version}
    )
    assert r.status_code == 200, r.text[:2000]
    page = instructor.get(f"/lessons/{LESSON}/orient").text
    assert "<script>alert" not in page
    assert 'href="javascript' not in page
    assert not re.search(r"<img[^>]*onerror", page)
    assert "&lt;script&gt;alert(1)" in page  # shown as text, harmlessly
