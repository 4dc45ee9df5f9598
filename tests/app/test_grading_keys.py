"""Number keys on the review page: a rubric whose levels are all whole points names each level by its points
(0-9); one with a fractional level counts levels in order, and the page says which rule holds."""

from __future__ import annotations

import re

from app.core.models import LabReport
from app.services.grading import grades as grading
from app.services.learning import lessons as lesson_service
from app.services.learning import publishing
from tests.app.reporting import LESSON, claimed_by_grader, submit_report


def _keys(html: str, item: str) -> list[tuple[str, str]]:
    block = re.search(rf'id="item-{item}".*?</fieldset>', html, re.S).group(0)
    return re.findall(r'value="([a-z-]+)" data-fraction="[^"]+" data-key="(\d)"', block)


def test_keys_name_points_only_when_every_level_is_whole_points(client, db, settings, make_user, make_client):
    submit_report(client, db, settings)
    report = db.query(LabReport).one()
    gina = claimed_by_grader(make_user, make_client, db, report)
    shipped = gina.get(f"/classes/default/grader/reports/{report.id}").text
    # the shipped rubric has 1.5-point levels (tp-mapping, stretch): keys count levels
    assert 'data-keys="order"' in shipped and "levels in order" in shipped
    assert _keys(shipped, "numerics") == [("missing", "1"), ("shown", "2"), ("explained", "3")]

    row = lesson_service.latest_row(db, lesson_id=LESSON)
    files = dict(row.files)
    # every line whole: tp-mapping and stretch worth 2 points (0, 1, 2)
    rubric = files["rubric.yaml"]
    for item in ("tp-mapping", "stretch"):
        rubric = re.sub(rf"(- id: {item}\n(?:    .*\n)*?    points: )3", r"\g<1>2", rubric)
    assert rubric != files["rubric.yaml"]
    files["rubric.yaml"] = rubric
    version, errors = publishing.publish(db, lesson_id=LESSON, files=files, source="editor")
    assert version and not errors, errors
    page = gina.get(f"/classes/default/grader/reports/{report.id}").text
    assert 'data-keys="points"' in page and "the level worth that many points" in page
    assert _keys(page, "numerics") == [("missing", "0"), ("shown", "2"), ("explained", "4")]
    assert _keys(page, "reasoning") == [("none", "0"), ("thin", "1"), ("sound", "3"), ("excellent", "4")]
    assert "<kbd>4</kbd> Explained · 4" in page
    by_points, keys = grading.level_keys(lesson_service.current(db, lesson_id=LESSON).lesson.rubric)
    assert by_points and keys["tp-mapping"] == ["0", "1", "2"]
