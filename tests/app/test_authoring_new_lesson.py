"""A new lesson made in the browser from lessons/_template: published as version 1 at once, no restart, no files."""

from __future__ import annotations

import pytest

from app.services.learning import lessons as lesson_service


@pytest.fixture
def instructor(make_user, make_client):
    make_user("ivy@example.org", roles=("instructor",))
    c = make_client()
    c.login("ivy@example.org")
    return c


def test_a_lesson_from_the_template_is_published_and_opens_in_the_editor(instructor, client, db):
    title = 'Pipelines: a "first" look'
    r = instructor.post(
        "/instructor/lessons", {"lesson_id": "my-pipelines", "title": title, "number": "42"}, follow_redirects=False
    )
    assert (
        r.status_code == 303 and r.headers["location"] == "/instructor/lessons/my-pipelines/edit?published=1#published"
    )
    row = lesson_service.latest_row(db, lesson_id="my-pipelines")
    assert row.version == 1 and row.source == "editor" and "questions/example-choice.yaml" in row.files
    lesson = lesson_service.current(db, lesson_id="my-pipelines").lesson
    assert (lesson.title, lesson.number) == (title, 42)
    assert "Published version 1" in instructor.get(r.headers["location"]).text
    client.register("lea@example.org")
    page = client.get("/lessons/my-pipelines")
    assert page.status_code == 200 and "Pipelines: a &#34;first&#34; look" in page.text


def test_a_refused_lesson_names_each_field_and_creates_nothing(instructor, client, db):
    taken = lesson_service.current(db, lesson_id="transformer-scaling").lesson.number
    r = instructor.post("/instructor/lessons", {"lesson_id": "Bad Id", "title": "", "number": "ten"})
    assert r.status_code == 422
    assert "is not a lesson id" in r.text and "a title of 1 to 120 characters" in r.text
    assert "a whole number from 1 to 99" in r.text and 'value="Bad Id"' in r.text
    r = instructor.post(
        "/instructor/lessons", {"lesson_id": "transformer-scaling", "title": "Again", "number": str(taken)}
    )
    assert r.status_code == 422 and "exists already" in r.text and "numbers are unique in the course" in r.text
    assert lesson_service.latest_row(db, lesson_id="bad-id") is None
    client.register("lea@example.org")
    assert client.post("/instructor/lessons", {"lesson_id": "x", "title": "X", "number": "50"}).status_code == 403
