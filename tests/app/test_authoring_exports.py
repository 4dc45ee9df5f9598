"""Authoring, the parts around the editor: YAML mistakes explained, one broken file reported once, the
version note in the history, and a version's files (or its diff) downloaded to commit back to lessons/."""

from __future__ import annotations

import io
import subprocess
import zipfile

import pytest

from app.services.learning import lessons as lesson_service
from tests.conftest import ROOT

LESSON = "transformer-scaling"
HX = {"HX-Request": "true"}


@pytest.fixture
def instructor(client, make_user):
    make_user("prof@example.org", roles=("instructor",))
    client.login("prof@example.org")
    return client


def _text(db, path):
    return lesson_service.latest_row(db, lesson_id=LESSON).files[path]


def _preview(client, path, text):
    r = client.post(f"/instructor/lessons/{LESSON}/preview", {"path": path, "text": text}, headers=HX)
    assert r.status_code == 200
    return r.text


def test_a_colon_in_prose_gets_a_hint_and_its_line_is_marked(instructor, db):
    text = _text(db, "parts/orient.yaml").replace("title: Orient + objectives", "title: Orient: objectives")
    html = _preview(instructor, "parts/orient.yaml", text)
    assert "mapping values are not allowed here" in html
    assert "Put the whole text in double quotes" in html
    assert 'data-error-lines="2"' in html  # the editor marks the line the parser named


def test_one_broken_part_is_one_error_not_one_per_part(instructor, db):
    text = _text(db, "parts/orient.yaml").replace("title: Orient + objectives", "title: Orient: objectives")
    html = _preview(instructor, "parts/orient.yaml", text)
    assert "1 problem:" in html
    assert "part numbers" not in html  # the other parts' numbering is not blamed for the gap


def test_a_broken_lesson_yaml_does_not_blame_every_placeholder(instructor, db):
    text = _text(db, "lesson.yaml") + "\n\tstray: tab\n"
    html = _preview(instructor, "lesson.yaml", text)
    assert "1 problem:" in html and "Indent with spaces" in html
    assert "calc:" not in html


def test_version_note_is_listed_and_versions_download_as_zip_and_diff(instructor, db):
    before = _text(db, "parts/orient.yaml")
    changed = before.replace("Orient + objectives", "Orient and objectives")
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/orient.yaml", "text": changed, "base_version": 1, "note": "Plainer part title"},
    )
    assert r.status_code == 200 and "Published version 2" in r.text
    assert "Plainer part title" in r.text  # the editor's version list
    assert "Plainer part title" in instructor.get("/instructor").text  # and the instructor's page

    z = instructor.get(f"/instructor/lessons/{LESSON}/versions/2/files.zip")
    assert z.status_code == 200 and z.headers["content-type"] == "application/zip"
    assert 'filename="transformer-scaling-v2.zip"' in z.headers["content-disposition"]
    with zipfile.ZipFile(io.BytesIO(z.content)) as zf:
        names = zf.namelist()
        assert f"lessons/{LESSON}/lesson.yaml" in names and f"lessons/{LESSON}/parts/orient.yaml" in names
        assert zf.read(f"lessons/{LESSON}/parts/orient.yaml").decode() == changed
    again = instructor.get(f"/instructor/lessons/{LESSON}/versions/2/files.zip")
    assert again.content == z.content  # the same version always zips to the same bytes

    d = instructor.get(f"/instructor/lessons/{LESSON}/versions/2/changes.diff")
    assert d.status_code == 200
    diff = d.text
    assert f"--- a/lessons/{LESSON}/parts/orient.yaml" in diff and f"+++ b/lessons/{LESSON}/parts/orient.yaml" in diff
    assert "-title: Orient + objectives" in diff and "+title: Orient and objectives" in diff
    assert diff.count("diff --git") == 1  # only the file that changed


def test_the_diff_applies_to_the_repository_with_git(instructor, db, tmp_path):
    changed = _text(db, "parts/orient.yaml").replace("minutes: 5", "minutes: 6")
    instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/orient.yaml", "text": changed, "base_version": 1},
    )
    diff = instructor.get(f"/instructor/lessons/{LESSON}/versions/2/changes.diff").content
    (tmp_path / "v2.diff").write_bytes(diff)
    check = subprocess.run(
        ["git", "apply", "--check", str(tmp_path / "v2.diff")], cwd=ROOT, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr


def test_downloads_are_for_instructors_and_name_missing_versions(instructor, client, make_client):
    assert instructor.get(f"/instructor/lessons/{LESSON}/versions/99/files.zip").status_code == 404
    learner = make_client()
    learner.register("ann@example.org")
    assert learner.get(f"/instructor/lessons/{LESSON}/versions/1/files.zip").status_code == 403
    assert learner.get(f"/instructor/lessons/{LESSON}/versions/1/changes.diff").status_code == 403
