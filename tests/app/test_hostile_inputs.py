"""Inputs that could answer 500 (or hold a CPU for seconds) get a 4xx, or a listed problem, in words.

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


# ---------------------------------------------------------------- parameters that read as numbers


@pytest.mark.parametrize("steps, read_as", [("5", 5), (4.0, 4), (5, 5)])
def test_fp8_steps_given_as_text_or_a_float_read_as_the_number_without_a_500(learner, db, steps, read_as):
    """ "5" and 4.0 passed the field as 5 and 4 but not the rule that drops the default spike (step 20) from a
    shorter run: the stored params then failed their own validation, a 500. Now they run as 5 and 4 do."""
    from app.core.models import Job

    r = learner.post(
        "/api/v1/jobs",
        json={"lab": "fp8-step", "params": {"steps": steps}, "backend": "cpu"},
        headers={"X-CSRF-Token": learner.api_token()},
    )
    assert r.status_code == 201, r.text
    job = db.get(Job, r.json()["id"])
    assert job.params["steps"] == read_as and job.params["outlier_step"] is None


def test_fp8_steps_that_are_not_a_number_are_a_422_naming_the_field(learner, db):
    from app.core.models import Job

    r = learner.post(
        "/api/v1/jobs",
        json={"lab": "fp8-step", "params": {"steps": "five"}, "backend": "cpu"},
        headers={"X-CSRF-Token": learner.api_token()},
    )
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "steps", r.text
    assert db.query(Job).count() == 0


# ---------------------------------------------------------------- deep nesting in a previewed or published part


@pytest.mark.parametrize(
    "nested",
    [
        "deep: " + "[" * 600 + "\n",  # unclosed: libyaml refuses it, and the pure-Python parser recursed
        "deep: " + "[" * 600 + "]" * 600 + "\n",
        "deep:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(100)),  # block mappings, by indentation
    ],
    ids=["unclosed-brackets", "closed-brackets", "indented"],
)
def test_yaml_nested_past_the_limit_is_refused_in_words_and_never_published(instructor, db, nested):
    """600 nested brackets made the pure-Python parser (used when libyaml refuses a text) recurse past Python's
    limit: a RecursionError, a 500, on preview and on publish."""
    row = lesson_service.latest_row(db, lesson_id=LESSON)
    text = row.files["parts/orient.yaml"] + nested
    r = instructor.post(
        f"/instructor/lessons/{LESSON}/preview", {"path": "parts/orient.yaml", "text": text}, headers=HX
    )
    assert r.status_code == 200 and "nothing is published until it is fixed" in r.text, r.text[-800:]
    assert "nested more than 64 levels deep (the nesting limit)" in r.text
    versions = db.query(LessonVersion).count()
    published = instructor.post(
        f"/instructor/lessons/{LESSON}/publish",
        {"path": "parts/orient.yaml", "text": text, "base_version": row.version},
    )
    assert published.status_code == 422 and "(the nesting limit)" in published.text
    db.expire_all()
    assert db.query(LessonVersion).count() == versions


# ---------------------------------------------------------------- NUL characters, and names that hide or turn text


@pytest.mark.both_backends
def test_a_nul_character_anywhere_is_a_400_naming_the_field_and_saves_nothing(client, db):
    """PostgreSQL's text and JSON columns cannot hold U+0000: a registration whose email held %00 answered 500
    there (psycopg DataError) while SQLite stored it."""
    from app.core.models import Job, User

    def says(r, field: str) -> None:
        text = r.text if r.headers.get("content-type", "").startswith("text/html") else r.json()["detail"]
        assert r.status_code == 400 and f"{field}: holds a NUL character (U+0000" in text, r.text[-500:]

    says(client.register("a\x00b@example.org"), "email")
    assert db.query(User).count() == 0
    client.register("ann@example.org")
    says(client.post("/account/name", {"display_name": "A\x00B"}), "display_name")
    says(
        client.post(f"/lessons/{LESSON}/report", data={"action": "save", "answer-numbers": "x\x00y"}), "answer-numbers"
    )
    r = client.client.post(
        "/api/v1/jobs", json={"lab": "env-check", "params": {"x\x00": 1}}, headers={"X-CSRF-Token": client.api_token()}
    )
    says(r, "body.params.x")
    says(client.get("/api/v1/tools/fp8-range", params={"predict": "1\x00"}), "predict")
    db.expire_all()
    assert db.query(User).one().display_name == "Ann" and db.query(Job).count() == 0
    assert db.query(LabReport).count() == 0 or not (db.query(LabReport).one().draft or {}).get("answers")


@pytest.mark.parametrize("name", ["Ann\u202eoB", "Bob\u200b", "Tab\there", "Eve\u2066x"])
def test_a_display_name_that_hides_or_turns_text_is_refused_in_words(learner, db, name):
    from app.core.models import User

    r = learner.post("/account/name", {"display_name": name})
    assert r.status_code == 400 and "control and invisible or direction-changing characters (U+" in r.text
    db.expire_all()
    assert db.query(User).one().display_name == "Ann"
