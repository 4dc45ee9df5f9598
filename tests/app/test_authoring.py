"""Instructor authoring: live validation, preview, publish as a new version, bad input refused."""

import re

import pytest

from app.core.models import LessonVersion
from app.services.learning import lessons as lesson_service

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


@pytest.mark.both_backends
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


def test_a_browsers_crlf_line_breaks_are_stored_as_the_files_have_them(instructor, db):
    """Browsers send a textarea's line breaks as CR LF; published as-is, a one-line edit became a diff of every line
    and a zip of CRLF files to commit back to lessons/."""
    before = lesson_service.latest_row(db, lesson_id=LESSON).version
    text = _text(db, "parts/orient.yaml").replace("Orient + objectives", "Orient and objectives")
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/orient.yaml", "text": text.replace("\n", "\r\n"), "base_version": before},
    )
    assert r.status_code == 200
    assert _text(db, "parts/orient.yaml") == text
    diff = instructor.get(f"/instructor/lessons/{LESSON}/versions/{before + 1}/changes.diff").text
    assert [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        "-title: Orient + objectives",
        "+title: Orient and objectives",
    ]


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


HX = {"HX-Request": "true"}


def _preview(client, path, text):
    r = client.post(f"/instructor/lessons/{LESSON}/preview", {"path": path, "text": text}, headers=HX)
    assert r.status_code == 200
    return r.text


def _frame(html: str) -> str:
    return html[html.index('<div class="preview-frame" inert>') :]


def test_editing_lesson_yaml_previews_the_lesson_header(instructor, db):
    """lesson.yaml is the header learners see above every part: its preview is that header (the same template as
    the lesson's pages), so a new title or summary shows at once, and never "part 1"."""
    page = instructor.get(f"/instructor/lessons/{LESSON}/edit").text  # lesson.yaml is the file it opens
    version = lesson_service.latest_row(db, lesson_id=LESSON).version
    assert "Preview of the lesson's header and its “Go deeper” links" in page and "Preview of part" not in page
    frame = _frame(page)
    assert '<header class="lesson-head"' in frame and "<h1>Transformer Scaling</h1>" in frame
    assert f"<span>Version {version + 1}</span>" in frame  # the version publishing it would make
    assert 'href="/lessons/transformer-scaling/lab">Hands-on lab</a>' in frame and "Go deeper" in frame
    text = _text(db, "lesson.yaml")
    assert "\ntitle: Transformer Scaling\n" in text
    text = text.replace("\ntitle: Transformer Scaling\n", "\ntitle: Scaling a Transformer step\n", 1)
    text = text.replace("summary: >-\n", "summary: >-\n  A brand-new first sentence.\n", 1)
    html = _preview(instructor, "lesson.yaml", text)
    assert "Valid." in html and "Preview of part" not in html
    frame = _frame(html)
    assert "<h1>Scaling a Transformer step</h1>" in frame and "A brand-new first sentence." in frame


@pytest.mark.parametrize(
    "path, shows, marker",
    [("atlas.yaml", "knowledge atlas", 'id="atlas-h"'), ("lab.yaml", "hands-on lab", 'id="lab-h"')],
)
def test_atlas_and_lab_files_preview_their_own_pages(instructor, db, path, shows, marker):
    html = _preview(instructor, path, _text(db, path))
    assert f"Valid. Preview of the {shows} as learners will see it" in html and marker in _frame(html)
    assert 'id="part-orient"' not in html


def test_a_parts_file_still_previews_its_part(instructor, db):
    html = _preview(instructor, "parts/code-trace.yaml", _text(db, "parts/code-trace.yaml"))
    assert "Preview of part 4 as learners will see it" in html and 'id="part-code-trace"' in _frame(html)


def test_a_question_file_previews_the_part_that_lists_it(instructor, db):
    """A question's preview showed part 1, where the question is not: the author never saw their edit."""
    text = _text(db, "questions/fp8-step-time.yaml").replace("How long is the step?", "How long is one step?")
    html = _preview(instructor, "questions/fp8-step-time.yaml", text)
    assert "Preview of part 6 as learners will see it" in html and "How long is one step?" in _frame(html)


def test_yaml_hints_show_what_to_type_as_code(instructor, db):
    text = _text(db, "parts/orient.yaml").replace("title: Orient + objectives", "title: Orient: objectives")
    html = _preview(instructor, "parts/orient.yaml", text)
    hint = html[html.index('<span class="yaml-hint">') :]
    hint = hint[: hint.index("</span>")]
    assert "<code>&#34;...&#34;</code>" in hint and "<code>key: &gt;</code>" in hint
    assert "`" not in hint


def test_the_problem_count_agrees_with_its_verb(instructor, db):
    one = _text(db, "parts/orient.yaml").replace("minutes: 5", "minutes: lots")
    assert "1 problem: nothing is published until it is fixed." in _preview(instructor, "parts/orient.yaml", one)
    two = one.replace("title: Orient + objectives", "titel: Orient + objectives")
    html = _preview(instructor, "parts/orient.yaml", two)
    count = int(re.search(r"(\d+) problems: nothing is published until they are fixed\.", html).group(1))
    assert count >= 2 and "until it is fixed" not in html


def test_a_lesson_folder_that_fails_at_start_up_lists_its_problems_with_code_as_code(settings, make_user, tmp_path):
    """The instructor's index lists the lesson folders that did not publish at start-up, each problem worded as in
    the editor (one template macro): what to type shown as code, never as raw backticks."""
    import dataclasses
    import shutil

    from fastapi.testclient import TestClient

    from app.web.factory import create_app
    from tests.conftest import ROOT, Browserless

    lessons = tmp_path / "lessons"
    shutil.copytree(ROOT / "lessons", lessons)
    orient = lessons / "transformer-scaling" / "parts" / "orient.yaml"
    orient.write_text(orient.read_text().replace("title: Orient + objectives", "title: Orient: objectives"))
    make_user("ivy@example.org", roles=("instructor",))
    with TestClient(create_app(dataclasses.replace(settings, lessons_dir=lessons))) as raw:
        ivy = Browserless(raw)
        ivy.login("ivy@example.org")
        html = ivy.get("/instructor").text
    listed = html[html.index("Lesson folders with errors") :]
    listed = listed[: listed.index("</section>")]
    assert "transformer-scaling/parts/orient.yaml" in listed and "<code>key: &gt;</code>" in listed
    assert "`" not in listed


NEW_QUESTION = """kind: numeric
prompt: What is the largest finite value of FP8 E4M3?
answer: 448
tolerance: {abs: 0.5}
"""


def test_a_new_question_is_published_listed_in_a_part(instructor, db):
    """A question must be listed in a part and a part may list only questions that exist: one file at a time, the
    editor refused both orders. A new questions/NAME.yaml now goes out with its id added to a part (the last part
    that lists questions unless the author picks another), previewed in that part, in one version."""
    before = lesson_service.latest_row(db, lesson_id=LESSON)
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/preview",
        {"path": "questions/e4m3-max.yaml", "text": NEW_QUESTION},
        headers={"HX-Request": "true"},
    )
    assert "nothing is published" not in r.text, r.text
    assert "Valid. Preview of part 6 with the new question listed in it (parts/practice.yaml)" in r.text
    assert "What is the largest finite value of FP8 E4M3?" in r.text  # the part's preview shows it
    # a choice, swapped into the form above Publish (templates/instructor/_publish_options.html); the template
    assert '<div id="publish-options" hx-swap-oob="true">' in r.text and 'name="list_in"' in r.text
    assert "example-numeric.yaml" in r.text
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/preview",
        {"path": "questions/e4m3-max.yaml", "text": NEW_QUESTION, "list_in": "parts/orient.yaml"},
        headers={"HX-Request": "true"},
    )
    assert "Valid. Preview of part 1 with the new question listed in it (parts/orient.yaml)" in r.text
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "questions/e4m3-max.yaml", "text": NEW_QUESTION, "base_version": before.version, "note": "new q"},
    )
    assert r.status_code == 200 and f"Published version {before.version + 1}" in r.text
    assert "The new question is listed in" in r.text
    files = lesson_service.latest_row(db, lesson_id=LESSON).files
    assert files["questions/e4m3-max.yaml"] == NEW_QUESTION
    old, new = before.files["parts/practice.yaml"].splitlines(), files["parts/practice.yaml"].splitlines()
    changed = [(a, b) for a, b in zip(old, new, strict=True) if a != b]  # one line, the rest as it was
    assert len(changed) == 1 and changed[0][1] == changed[0][0][:-1] + ", e4m3-max]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "number: 1\nblocks:\n  - kind: questions\n    ids: [a, b]\n",
            "number: 1\nblocks:\n  - kind: questions\n    ids: [a, b, new]\n",
        ),
        (
            "blocks:\n  - kind: questions\n    ids:\n      - a\n  - kind: markdown\n    body: x\n",
            "blocks:\n  - kind: questions\n    ids:\n      - a\n      - new\n  - kind: markdown\n    body: x\n",
        ),
        (
            "number: 1\nblocks:\n- kind: markdown\n  body: x\n",
            "number: 1\nblocks:\n- kind: markdown\n  body: x\n- kind: questions\n  ids: [new]\n",
        ),
        ("blocks:\n  - kind: markdown\n    body: x\nminutes: 3\n", None),  # blocks not last: no safe place
    ],
)
def test_list_question_adds_one_id_and_keeps_every_other_line(text, expected):
    from app.content.listing import list_question

    assert list_question(text, "new") == expected


def test_a_refused_publish_keeps_the_note_as_well_as_the_text(instructor, db):
    version = lesson_service.latest_row(db, lesson_id=LESSON).version
    text = _text(db, "parts/orient.yaml").replace("minutes: 5", "minutes: ten")
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/orient.yaml", "text": text, "base_version": version, "note": "Fix the minutes"},
    )
    assert r.status_code == 422 and "minutes: ten" in r.text
    assert re.search(r'<input id="note" name="note" maxlength="500" value="Fix the minutes">', r.text)
    assert f'<li id="v{version}">' in r.text and "No version published yet" not in r.text  # the list said none


def test_publishing_redirects_so_a_reload_does_not_post_it_again(instructor, db):
    """The page after a publish was the POST's answer: reloading it sent the form again, which the version check
    refused as a conflict ("Version N was published after you started editing"). It now redirects to the editor."""
    version = lesson_service.latest_row(db, lesson_id=LESSON).version
    text = _text(db, "parts/orient.yaml").replace("Orient + objectives", "Orient and objectives")
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/orient.yaml", "text": text, "base_version": version},
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert r.headers["location"] == (
        f"/instructor/lessons/{LESSON}/edit?file=parts%2Forient.yaml&published={version + 1}#published"
    )
    page = instructor.get(r.headers["location"]).text  # what a reload shows: no conflict, the same news
    assert f"Published version {version + 1}" in page and "after you started editing" not in page
    assert f"Editing version {version + 1}" in page


def test_an_earlier_version_can_be_restored_as_a_new_version(instructor, db):
    """Going back was not offered: an instructor had to copy every file of the old zip into the editor by hand.
    Each earlier version in the list restores: its files published again as a new version, noted as such."""
    first = lesson_service.latest_row(db, lesson_id=LESSON)
    text = _text(db, "parts/orient.yaml").replace("Orient + objectives", "Orient and objectives")
    instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/orient.yaml", "text": text, "base_version": first.version},
    )
    page = instructor.get(f"/instructor/lessons/{LESSON}/edit").text
    action = f"/instructor/lessons/{LESSON}/versions/{first.version}/restore"
    assert f'action="{action}"' in page and f"restore as v{first.version + 2}" in page
    assert f"/versions/{first.version + 1}/restore" not in page  # the current one is not offered
    stale = instructor.post(action, {"base_version": first.version}, follow_redirects=False)
    assert stale.status_code == 409 and "nothing was restored" in stale.text  # the list it was clicked in was old
    # the first press asks: restoring publishes to every learner
    ask = instructor.post(action, {"base_version": first.version + 1}, follow_redirects=False)
    assert ask.status_code == 200 and "This publishes to every learner" in ask.text
    assert 'name="confirm" value="yes"' in ask.text and f"become version {first.version + 2}" in ask.text
    db.expire_all()
    assert lesson_service.latest_row(db, lesson_id=LESSON).version == first.version + 1  # nothing published yet
    r = instructor.post(action, {"base_version": first.version + 1, "confirm": "yes"}, follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"].endswith(f"published={first.version + 2}&restored={first.version}#published")
    assert f"Published version {first.version + 2}: the files of version {first.version}, restored." in (
        instructor.get(r.headers["location"]).text
    )
    db.expire_all()
    latest = lesson_service.latest_row(db, lesson_id=LESSON)
    assert latest.version == first.version + 2 and latest.files == first.files
    assert latest.note == f"Restored version {first.version}"
    assert "Restored version" in instructor.get("/instructor").text  # the overview lists it with its note


def test_the_version_list_says_which_files_each_version_changed(instructor, db):
    before = lesson_service.latest_row(db, lesson_id=LESSON).version
    text = _text(db, "parts/orient.yaml").replace("Orient + objectives", "Orient and objectives")
    instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/orient.yaml", "text": text, "base_version": before, "note": "retitle"},
    )
    page = instructor.get(f"/instructor/lessons/{LESSON}/edit").text
    item = re.search(rf'<li id="v{before + 1}">.*?</li>', page, re.S).group(0)
    assert "changed parts/orient.yaml</span>" in item
    assert "changed" not in re.search(rf'<li id="v{before}">.*?</li>', page, re.S).group(0)  # the first: no before


def test_a_question_taken_out_of_its_part_can_be_removed_with_it(instructor, db):
    """Taking a question out of a part left its file listed nowhere, an error, and the editor cannot delete a file:
    the edit could not be published. The preview now offers to remove the file in the same version."""
    before = lesson_service.latest_row(db, lesson_id=LESSON)
    text = before.files["parts/practice.yaml"].replace(", tp8-slower,", ",")
    assert text != before.files["parts/practice.yaml"]  # the part did list it
    r = _preview(instructor, "parts/practice.yaml", text)
    assert "nothing is published" in r and "a question no part lists" in r
    assert "No part lists <code>questions/tp8-slower.yaml</code> any more." in r
    assert 'id="drop_unlisted" name="drop_unlisted" value="1">' in r  # not ticked
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/preview",
        {"path": "parts/practice.yaml", "text": text, "drop_unlisted": "1"},
        headers={"HX-Request": "true"},
    ).text
    assert "Valid. Preview of part 6" in r and 'name="drop_unlisted" value="1" checked>' in r
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/practice.yaml", "text": text, "base_version": before.version, "drop_unlisted": "1"},
    )
    assert f"Published version {before.version + 1}" in r.text
    files = lesson_service.latest_row(db, lesson_id=LESSON).files
    assert "questions/tp8-slower.yaml" not in files and set(before.files) - set(files) == {"questions/tp8-slower.yaml"}
    assert "changed parts/practice.yaml, questions/tp8-slower.yaml" in r.text  # the version list says so


def test_publishing_or_restoring_nothing_new_makes_no_version(instructor, db):
    """Publish pressed to 'save' an unchanged file made a version with nothing in it (and told learners of an
    update); restoring the files the lesson already has did the same."""
    version = lesson_service.latest_row(db, lesson_id=LESSON).version
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/orient.yaml", "text": _text(db, "parts/orient.yaml"), "base_version": version},
    )
    assert r.status_code == 422 and f"Nothing changed since version {version}, so no version was published" in r.text
    text = _text(db, "parts/orient.yaml").replace("Orient + objectives", "Orient and objectives")
    instructor.post(
        f"/instructor/lessons/{LESSON}/publish", {"path": "parts/orient.yaml", "text": text, "base_version": version}
    )
    restore = f"/instructor/lessons/{LESSON}/versions/{version}/restore"
    instructor.post(restore, {"base_version": version + 1, "confirm": "yes"})
    r = instructor.post(restore, {"base_version": version + 2, "confirm": "yes"})
    assert r.status_code == 422 and "are the current ones already (version" in r.text
    db.expire_all()
    assert lesson_service.latest_row(db, lesson_id=LESSON).version == version + 2


NEW_PART = """number: 3  # between the mental model and the deep dives
title: A worked FP8 example
heading: One tensor, scaled and cast
minutes: 4
blocks:
  - kind: section
    id: worked-fp8
    title: Scale, cast, unscale
    body: A tensor's largest value sets its scale, so it lands near the top of the FP8 range.
"""


def test_a_new_part_in_the_middle_can_move_the_later_parts_up(instructor, db):
    """Part numbers run 1..N each once and the editor changes one file at a time, so a part could only be added at
    the end: one in the middle was refused, and so was each later part's renumbering. The new part's publish now
    offers to move the parts from its number on one up, in the same version, changing only their number lines."""
    before = lesson_service.latest_row(db, lesson_id=LESSON)
    numbers = {p: re.search(r"^number: (\d+)", t, re.M).group(1) for p, t in before.files.items() if "parts/" in p}
    assert numbers["parts/deep-dives.yaml"] == "3"  # the new part's number is taken
    r = _preview(instructor, "parts/worked-fp8.yaml", NEW_PART)
    assert "nothing is published" in r and "part numbers 1..7, each once" in r
    assert "Number 3 is taken by <code>parts/deep-dives.yaml</code>" in r
    assert "Make room: renumber parts 3–6 to 4–7 in this version" in r
    assert 'id="make_room" name="make_room" value="1">' in r  # offered, not ticked
    assert "no other text in this version names a part from 3 on by its number" in r  # "Part 01" is a panel
    form = {"path": "parts/worked-fp8.yaml", "text": NEW_PART, "make_room": "1"}
    r = instructor.post(f"/instructor/lessons/{LESSON}/preview", form, headers=HX).text
    assert "Valid. Preview of part 3" in r and 'name="make_room" value="1" checked>' in r
    r = instructor.post(f"/instructor/lessons/{LESSON}/publish", form | {"base_version": before.version})
    assert f"Published version {before.version + 1}" in r.text
    after = lesson_service.latest_row(db, lesson_id=LESSON).files
    for path, n in numbers.items():
        moved = int(n) + 1 if int(n) >= 3 else int(n)
        assert after[path] == before.files[path].replace(f"number: {n}\n", f"number: {moved}\n", 1), path
    lesson = lesson_service.build(lesson_service.latest_row(db, lesson_id=LESSON))
    assert [p.id for p in lesson.parts][2:4] == ["worked-fp8", "deep-dives"]


def test_make_room_is_offered_only_for_a_new_part_whose_number_is_taken(instructor, db):
    assert "make_room" not in _preview(instructor, "parts/worked-fp8.yaml", NEW_PART.replace("number: 3", "number: 7"))
    moved = _text(db, "parts/history.yaml").replace("number: 5", "number: 4")  # an existing part: a clash, no offer
    r = _preview(instructor, "parts/history.yaml", moved)
    assert "part numbers 1..6, each once" in r and "make_room" not in r


def test_making_room_rewrites_only_the_top_level_number_digits():
    from types import SimpleNamespace

    from app.content import listing

    later = "number: 2   # keep me\ntitle: B\nblocks:\n  - kind: pause\n    number: 2\n"
    row = SimpleNamespace(files={"parts/a.yaml": "number: 1\n", "parts/b.yaml": later})
    edit = listing.edited_files(row, "parts/new.yaml", "number: 2\ntitle: N\n", "", False, make_room=True)
    assert edit.crowded == [("parts/b.yaml", 2)]
    assert edit.files["parts/b.yaml"] == later.replace("number: 2   #", "number: 3   #")  # the block's key kept
    assert edit.files["parts/a.yaml"] == "number: 1\n"


def test_make_room_lists_the_lines_that_name_a_moved_part_by_number():
    """Making room renumbers parts, not the prose that names them: the option lists each such line to check."""
    from app.content import listing

    files = {
        "lesson.yaml": "title: L\nsummary: Parts 1 and 2 set up; part 3 measures.\n  # Part 3 · an author's note\n",
        "parts/a.yaml": "number: 1\nbody: as part 2 shows, and Part 01 of the figure\n",
        "parts/b.yaml": "number: 2\n",
        "parts/c.yaml": "number: 3\nbody: " + "x" * 60 + " (see part 2) " + "y" * 60 + "\n",
        "parts/new.yaml": "number: 2\nbody: see part 3\n",  # the edited file: written against the new numbers
    }
    assert listing.part_mentions(files, "parts/new.yaml", 2) == [
        ("lesson.yaml", 2, "summary: Parts 1 and 2 set up; part 3 measures."),
        ("parts/a.yaml", 2, "body: as part 2 shows, and Part 01 of the figure"),
        ("parts/c.yaml", 2, "…" + "x" * 34 + " (see part 2) " + "y" * 38 + "…"),  # 40 characters either side
    ]
    assert listing.part_mentions(files, "parts/new.yaml", 4) == []


def test_the_make_room_option_shows_the_lines_to_check(instructor, db):
    before = lesson_service.latest_row(db, lesson_id=LESSON)
    history = _text(db, "parts/history.yaml").replace("title: History + ecosystem", "title: History (after part 4)")
    form = {"path": "parts/history.yaml", "text": history, "base_version": before.version}
    assert "Published version" in instructor.post(f"/instructor/lessons/{LESSON}/publish", form).text
    r = _preview(instructor, "parts/worked-fp8.yaml", NEW_PART)
    assert "This line names a part from 3 on by its number and stays as written; check it:" in r
    assert "<li><code>parts/history.yaml</code> line 2: title: History (after part 4)</li>" in r
