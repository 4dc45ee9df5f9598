"""A new lesson made in the browser from lessons/_template: a draft only staff see until it is published (no
restart, no files), then a lesson like any other."""

from __future__ import annotations

import pytest

from app.services.learning import drafts
from app.services.learning import lessons as lesson_service


@pytest.fixture
def instructor(make_user, make_client):
    make_user("ivy@example.org", roles=("instructor",))
    c = make_client()
    c.login("ivy@example.org")
    return c


def test_a_lesson_from_the_template_is_a_draft_until_published(instructor, client, db):
    title = 'Pipelines: a "first" look'
    r = instructor.post(
        "/instructor/lessons", {"lesson_id": "my-pipelines", "title": title, "number": "42"}, follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"] == "/instructor/lessons/my-pipelines/edit?created=1#draft"
    assert lesson_service.latest_row(db, lesson_id="my-pipelines") is None  # no version: nothing a learner reads
    draft = drafts.get(db, lesson_id="my-pipelines")
    assert draft is not None and draft.base_version is None and "questions/example-choice.yaml" in draft.files
    assert (drafts.build(draft).title, drafts.build(draft).number) == (title, 42)
    editor = instructor.get(r.headers["location"]).text
    assert "Lesson created as a draft." in editor and "No learner sees this lesson until you publish it" in editor
    assert "Pipelines: a &#34;first&#34; look" in instructor.get("/instructor/lessons/my-pipelines/draft/preview").text
    assert 'data-draft="my-pipelines"' in instructor.get("/instructor").text
    # a learner: not in the list, not at its address, not in the staff preview
    client.register("lea@example.org")
    assert "my-pipelines" not in client.get("/").text
    assert client.get("/lessons/my-pipelines").status_code == 404
    assert client.get("/instructor/lessons/my-pipelines/draft/preview").status_code == 403
    # its id and number are taken while it is a draft
    again = instructor.post("/instructor/lessons", {"lesson_id": "my-pipelines", "title": "X", "number": "42"})
    assert again.status_code == 422 and "exists already" in again.text and "numbers are unique" in again.text
    # published from the editor: version 1, and the draft is gone
    published = instructor.post(
        "/instructor/lessons/my-pipelines/publish",
        {"path": "lesson.yaml", "text": draft.files["lesson.yaml"], "base_version": "0"},
        follow_redirects=False,
    )
    assert published.status_code == 303 and "published=1" in published.headers["location"]
    assert drafts.get(db, lesson_id="my-pipelines") is None
    assert lesson_service.latest_row(db, lesson_id="my-pipelines").version == 1
    page = client.get("/lessons/my-pipelines")
    assert page.status_code == 200 and "Pipelines: a &#34;first&#34; look" in page.text


def test_an_edit_saved_as_a_draft_reaches_learners_only_when_published(instructor, client, db):
    row = lesson_service.latest_row(db, lesson_id="transformer-scaling")
    text = row.files["lesson.yaml"].replace("title: Transformer Scaling", "title: Transformer Scaling, drafted")
    r = instructor.post(
        "/instructor/lessons/transformer-scaling/draft",
        {"path": "lesson.yaml", "text": text, "base_version": str(row.version)},
        follow_redirects=False,
    )
    assert r.status_code == 303 and "saved=1" in r.headers["location"]
    assert lesson_service.latest_row(db, lesson_id="transformer-scaling").version == row.version
    client.register("lea@example.org")
    assert "drafted" not in client.get("/lessons/transformer-scaling").text
    assert (
        "Transformer Scaling, drafted" in instructor.get("/instructor/lessons/transformer-scaling/draft/preview").text
    )
    editor = instructor.get("/instructor/lessons/transformer-scaling/edit").text
    assert f"Learners still see version {row.version}" in editor and "Transformer Scaling, drafted" in editor
    # a draft that does not validate is refused, and the saved draft stays as it was
    bad = instructor.post(
        "/instructor/lessons/transformer-scaling/draft",
        {"path": "lesson.yaml", "text": "title: [", "base_version": str(row.version)},
    )
    assert (
        bad.status_code == 422
        and "Transformer Scaling, drafted" in drafts.get(db, lesson_id="transformer-scaling").files["lesson.yaml"]
    )
    # discarding needs the tick, then learners' version is the editor's again
    assert instructor.post("/instructor/lessons/transformer-scaling/draft/discard", {}).status_code == 422
    gone = instructor.post(
        "/instructor/lessons/transformer-scaling/draft/discard", {"confirm": "yes"}, follow_redirects=False
    )
    assert gone.status_code == 303 and drafts.get(db, lesson_id="transformer-scaling") is None


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
