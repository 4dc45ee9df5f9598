"""Exported CSV is safe in a spreadsheet however it splits a line: a learner's name `x;=1+1;@SUM(1)` once passed
the first-character guard, and a spreadsheet splitting on `;` saw cells starting with `=` and `@`. Through HTTP for
the roster and the grade export, and cell by cell below."""

from __future__ import annotations

import csv
import io
import re

import pytest

from app.core.models import LabReport, User
from app.services import csvcells
from app.services.grading import grades as grading
from tests.app.reporting import LESSON, grade_form, submit_report
from tests.conftest import default_class

PAYLOAD = "x;=1+1;@SUM(1)"
SPLITTERS = ",;\t|"


def _every_naive_cell(text: str) -> list[str]:
    """The cells a spreadsheet sees that splits each line on any one of SPLITTERS and ignores quotes, with the
    quotes and spaces it would strip from each."""
    out = []
    for line in text.splitlines():
        for sep in SPLITTERS:
            out += [piece.strip().strip('"').strip() for piece in line.split(sep)]
    return out


def _assert_no_formula(text: str) -> None:
    formulas = [c for c in _every_naive_cell(text) if c[:1] in ("=", "+", "-", "@")]
    assert formulas == [], formulas


@pytest.mark.parametrize(
    "value, written",
    [
        (PAYLOAD, "x;'=1+1;'@SUM(1)"),
        ("=HYPERLINK(1)", "'=HYPERLINK(1)"),
        ("a, -b", "a, '-b"),
        ("tab\t+1", "tab\t'+1"),
        ("line\n@x", "line\n'@x"),
        ("Ann O'Neil", "Ann O'Neil"),
        ("x-y=z", "x-y=z"),  # not at a cell's start
        (-1.5, -1.5),  # the course's own numbers
        (None, ""),
    ],
)
def test_a_cell_is_defused_wherever_a_spreadsheet_could_start_one(value, written):
    assert csvcells.cell(value) == written


def test_the_roster_export_survives_any_split(app, client, db, make_user, make_client):
    client.register("ann@example.org", name=PAYLOAD)
    make_user("ivy@example.org", roles=("instructor",))
    ivy = make_client()
    ivy.login("ivy@example.org")
    r = ivy.get(f"/classes/default/roster.csv?lesson={LESSON}")
    assert r.status_code == 200
    assert "\"x;'=1+1;'@SUM(1)\"" in r.text  # quoted, and defused inside
    _assert_no_formula(r.text)
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [row["name"] for row in rows if row["email"] == "ann@example.org"] == ["x;'=1+1;'@SUM(1)"]


def test_the_grade_export_survives_any_split(client, db, settings, make_user, make_client):
    submit_report(client, db, settings)
    learner = db.query(User).filter_by(email="ann@example.org").one()
    learner.display_name = PAYLOAD
    db.commit()
    report = db.query(LabReport).one()
    gina = make_user("gina@example.org", roles=("grader",))
    grading.assign(db, klass=default_class(db), grader=gina, lesson_id=LESSON)
    g = make_client()
    g.login("gina@example.org")
    g.post(f"/classes/default/grader/reports/{report.id}/claim")
    g.post(
        f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(feedback='Good;=HYPERLINK("http://evil")')
    )
    r = g.get(f"/classes/default/grader/export.csv?lesson={LESSON}")
    text = r.content.decode("utf-8-sig")
    assert r.status_code == 200 and re.search(r'"x;\'=1\+1;\'@SUM\(1\)"', text)
    _assert_no_formula(text)
    (row,) = csv.DictReader(io.StringIO(text))
    assert row["learner_name"] == "x;'=1+1;'@SUM(1)" and row["feedback"] == 'Good;\'=HYPERLINK("http://evil")'
    assert row["total"] == "16.0"
