"""Issue 30 §5: inputs that answered 500 (or held a CPU for seconds) now get a 4xx, or a listed problem, in words.

Each case goes through HTTP as a browser or script sends it: an answer with no real value, a digit that is not an
ASCII digit, a lesson id that is not an id, YAML aliases ("billion laughs") and an enormous format spec in a
previewed part. Each asserts the words, and that nothing was recorded or published."""

from __future__ import annotations

import re

import pytest

from app.core.models import Attempt, Grade, LabReport, LessonVersion
from app.services.grading import grades as grading
from app.services.learning import lessons as lesson_service
from tests.app.reporting import LESSON, grade_form, submit_report
from tests.conftest import default_class

HX = {"HX-Request": "true"}
NOT_REAL = "has no real value: a negative number to a fractional power"


@pytest.fixture
def learner(client):
    client.register("ann@example.org")
    return client


@pytest.fixture
def instructor(make_user, make_client):
    make_user("prof@example.org", roles=("instructor", "grader"))
    c = make_client()
    c.login("prof@example.org")
    return c


def _seed(page: str, question: str) -> str:
    """The seed of the learner's variant of `question`, as its form on the part's page carries it."""
    form = page[page.index(f'action="/lessons/{LESSON}/questions/{question}"') :]
    return re.search(r'name="seed" value="(\d+)"', form).group(1)


# ---------------------------------------------------------------- a complex result


@pytest.mark.parametrize("answer", ["(-8)^0.5", "(-8)**(1/3)", "2^(-8)^0.5"])
def test_an_answer_with_no_real_value_is_refused_in_words_and_not_counted(learner, db, answer):
    _, version, _ = lesson_service.current(db, lesson_id=LESSON)
    seed = _seed(learner.get(f"/lessons/{LESSON}/practice").text, "fp8-step-time")
    r = learner.post(
        f"/lessons/{LESSON}/questions/fp8-step-time", {"answer": answer, "version": version, "seed": seed}, headers=HX
    )
    assert r.status_code == 400 and NOT_REAL in r.text, r.text[-1500:]
    assert db.query(Attempt).count() == 0  # a malformed answer is not a try


def test_a_prediction_with_no_real_value_is_a_422_next_to_its_field(learner):
    query = {"predicts": "scale", "predict": "(-8)^0.5"}
    page = learner.get("/play/fp8-range", params=query, headers=HX)
    assert page.status_code == 422 and f"your prediction: “(-8)^0.5” {NOT_REAL}" in page.text
    api = learner.get("/api/v1/tools/fp8-range", params=query)
    assert api.status_code == 422
    assert api.json()["errors"] == [{"field": "predict", "message": f"your prediction: “(-8)^0.5” {NOT_REAL}. " + (
        "Raise a positive number, e.g. 8^0.5, or use a whole power, e.g. (-8)^3."
    )}]  # fmt: skip


# ---------------------------------------------------------------- digits that are not ASCII digits


@pytest.mark.parametrize("value", ["²", "١٢", "1.0", " 3"])
def test_a_grader_filter_that_is_not_ascii_digits_is_a_422(instructor, value):
    r = instructor.get("/classes/default/grader", params={"grader": value})
    assert r.status_code == 422
    assert "is not a grader filter; use me, none or a grader&#39;s user id (digits 0-9)" in r.text
    assert instructor.get("/classes/default/grader", params={"grader": "12"}).status_code == 200
    assert instructor.get("/classes/default/grader", params={"grader": "me"}).status_code == 200


@pytest.mark.parametrize(
    ("field", "value"), [("version", "²"), ("base_revision", "١"), ("version", "-1"), ("base_revision", "2147483648")]
)
def test_a_grade_whose_version_is_not_ascii_digits_is_a_422_and_saves_nothing(
    client, db, settings, make_user, make_client, field, value
):
    submit_report(client, db, settings)
    report = db.query(LabReport).one()
    grader = make_user("gina@example.org", roles=("grader",))
    grading.assign(db, klass=default_class(db), grader=grader, lesson_id=LESSON)
    gina = make_client()
    gina.login("gina@example.org")
    assert gina.post(f"/classes/default/grader/reports/{report.id}/claim").status_code == 200
    r = gina.post(f"/classes/default/grader/reports/{report.id}/grade", data={**grade_form(), field: value})
    assert r.status_code == 422 and "version and base_revision must be whole numbers (digits 0-9)" in r.text
    db.expire_all()
    assert db.query(Grade).count() == 0


# ---------------------------------------------------------------- the export's lesson id and file name


@pytest.mark.parametrize("lesson", ["é", 'a"b', "a\r\nSet-Cookie: x=1", "a\nb", "x" * 65, "UPPER", "-lead"])
def test_an_export_for_a_lesson_id_that_is_not_an_id_is_a_422(instructor, lesson):
    r = instructor.get("/classes/default/grader/export.csv", params={"lesson": lesson})
    assert r.status_code == 422 and "content-disposition" not in r.headers
    assert "is not a lesson id; an id is lowercase letters, digits and dashes (at most 64 characters)" in r.text
    assert "set-cookie: x=1" not in {k.lower() + ": " + v for k, v in r.headers.items()}


def test_the_export_names_its_file_per_rfc_6266(instructor):
    r = instructor.get("/classes/default/grader/export.csv", params={"lesson": LESSON})
    assert r.status_code == 200
    assert r.headers["content-disposition"] == (
        f"attachment; filename=\"grades-default-{LESSON}.csv\"; filename*=UTF-8''grades-default-{LESSON}.csv"
    )
    whole = instructor.get("/classes/default/grader/export.csv")
    assert whole.headers["content-disposition"].startswith('attachment; filename="grades-default-all.csv";')


# ---------------------------------------------------------------- authored YAML and format specs


def _laughs(levels: int) -> str:
    """The "billion laughs": each level an alias list of five of the level before, 5**levels strings in all."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_yaml_aliases_in_a_previewed_part_are_refused_at_once_and_never_published(instructor, db):
    row = lesson_service.latest_row(db, lesson_id=LESSON)
    text = _laughs(9) + row.files["parts/orient.yaml"]  # 280 bytes that expand to 5**9 strings
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/preview", {"path": "parts/orient.yaml", "text": text}, headers=HX
    )
    assert r.status_code == 200 and "nothing is published until it is fixed" in r.text
    assert "found an alias (*a0); aliases and anchors (&amp;name) are not allowed in lesson files" in r.text
    assert "parts/orient.yaml:2" in r.text  # the line of the first alias
    versions = db.query(LessonVersion).count()
    published = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/orient.yaml", "text": text, "base_version": row.version},
    )
    assert published.status_code == 422 and "aliases and anchors" in published.text
    db.expire_all()
    assert db.query(LessonVersion).count() == versions


@pytest.mark.parametrize("spec", ["500000000", ".500000000f", ">١٠٠٠٠٠٠٠٠٠", ".99sci"])
def test_an_enormous_format_spec_is_a_problem_in_words(instructor, db, spec):
    row = lesson_service.latest_row(db, lesson_id=LESSON)
    text = row.files["parts/orient.yaml"].replace(
        "title: Orient + objectives", f"title: Orient + objectives {{{{calc:worked-scale.scale|{spec}}}}}", 1
    )
    assert text != row.files["parts/orient.yaml"]
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/preview", {"path": "parts/orient.yaml", "text": text}, headers=HX
    )
    assert r.status_code == 200 and len(r.content) < 500_000
    assert "widths and precisions go up to 40, e.g. .2f, ,.0f or &gt;12" in r.text
    assert (
        "Orient + objectives 1.87"
        in instructor.post(
            f"/instructor/lessons/{LESSON}/preview",
            {"path": "parts/orient.yaml", "text": text.replace(spec, ".2f")},
            headers=HX,
        ).text
    )


# ---------------------------------------------------------------- an instructor's job limits


@pytest.mark.parametrize("value", ["²", "١٢", "1.5"])
def test_a_job_limit_that_is_not_ascii_digits_is_refused_in_words(instructor, db, value):
    data = {"email": "", "max_in_flight": value, "max_per_hour": "", "max_gpu_seconds_per_day": ""}
    r = instructor.post("/instructor/cluster/limits", data=data, follow_redirects=False)
    assert r.status_code == 422
    assert "jobs in flight: got" in r.text and "expected a whole number from 1 to 1000" in r.text
