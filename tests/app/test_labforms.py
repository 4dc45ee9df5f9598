"""Every lab's parameter form, submitted as rendered, creates a job with the lab's defaults."""

import re

import pytest

from app.models import Job
from app.services import labforms
from labs import catalog


def _as_browser_would(lab: str) -> list[tuple[str, str]]:
    data = []
    for f in labforms.form_fields(lab):
        if f.kind == "multi_choice":
            data.append((f"{f.name}__present", "1"))
            data += [(f.name, c) for c in (f.default or [])]
        elif f.kind == "bool":
            if f.default:
                data.append((f.name, "on"))
        else:
            data.append((f.name, f.default_text))
    return data


@pytest.mark.parametrize("lab", catalog.names())
def test_default_form_submits_defaults(client, db, lab):
    client.register("ann@example.org")
    page = client.get(f"/labs/{lab}").text
    for f in labforms.form_fields(lab):
        assert f'name="{f.name}"' in page
    data: dict[str, list[str]] = {}
    for key, value in _as_browser_would(lab) + [("csrf_token", client.csrf(f"/labs/{lab}"))]:
        data.setdefault(key, []).append(value)
    r = client.client.post(f"/labs/{lab}/jobs", data=data, follow_redirects=False)
    assert r.status_code == 303, r.text[:3000]
    job = db.query(Job).one()
    assert job.params == catalog.get(lab).params().model_dump(mode="json")


def test_bad_value_is_shown_next_to_its_field(client, db):
    client.register("ann@example.org")
    data = dict(_as_browser_would("fp8-step"))
    data.update(steps="1", csrf_token=client.csrf("/labs/fp8-step"))
    r = client.post("/labs/fp8-step/jobs", data=data, headers={"HX-Request": "true"})
    assert r.status_code == 422 and r.headers["HX-Retarget"] == "#lab-form-wrap"
    assert 'data-field="steps"' in r.text and "steps: at least 2, got 1" in r.text
    data.update(steps="two")
    r = client.post("/labs/fp8-step/jobs", data=data)
    assert r.status_code == 422 and "steps: a whole number from 2 to 5000, got &#39;two&#39;" in r.text
    assert db.query(Job).count() == 0


def test_every_invalid_field_is_reported_at_once_in_the_learners_terms(client, db):
    client.register("ann@example.org")
    data = dict(_as_browser_would("tp-sweep"))
    data.update(steps="abc", warmup="99", tokens="1", degrees="1, 2, 9", csrf_token=client.csrf("/labs/tp-sweep"))
    r = client.post("/labs/tp-sweep/jobs", data=data, headers={"HX-Request": "true"})
    assert r.status_code == 422
    shown = dict(re.findall(r'data-field="([a-z_]+)">([^<]*)<', r.text))
    assert shown == {
        "steps": "steps: a whole number from 1 to 50, got &#39;abc&#39;",
        "warmup": "warmup: at most 10, got 99",
        "tokens": "tokens: at least 8, got 1",
        "degrees": "degrees: each at most 8, got 9",
    }
    assert "4 fields below" in r.text and "expected" not in r.text  # no validator wording
    assert db.query(Job).count() == 0


def test_degrees_that_do_not_split_ffn_are_refused_at_submit_with_the_reason(client, db):
    client.register("ann@example.org")
    data = dict(_as_browser_would("tp-sweep"))
    data.update(degrees="1,3", csrf_token=client.csrf("/labs/tp-sweep"))
    r = client.post("/labs/tp-sweep/jobs", data=data, headers={"HX-Request": "true"})
    assert r.status_code == 422
    message = re.search(r'data-field="degrees">([^<]*)<', r.text).group(1)
    assert "ffn(2048) % degree(3) = 2" in message  # the arithmetic that rules it out
    assert db.query(Job).count() == 0  # refused before anything is queued, not by the job seconds later


@pytest.mark.parametrize(
    "typed, parsed",
    [("1, 2, 4", [1, 2, 4]), ("1 2 4", [1, 2, 4]), ("1;2;4", [1, 2, 4]), ("4", [4])],
)
def test_degrees_are_read_as_people_type_them(typed, parsed):
    params, errors = labforms.parse_form("tp-sweep", {"degrees": typed})
    assert errors == {} and params["degrees"] == parsed


@pytest.mark.parametrize(
    "form, field, message",
    [
        ({"degrees": "1,,2"}, "degrees", "degrees: whole numbers separated by commas, e.g. 1, 2, 4, got '1,,2'"),
        ({"degrees": "1,2,3,4,8"}, "degrees", "degrees: at most 4 values, got 5"),
        ({"tokens": "16,384"}, "tokens", "tokens: at most 8192, got 16384"),  # a thousands separator is read
        ({"predict_node": "B200"}, "predict_node", "predict_node: one of H200 or H100-SXM, got B200"),
    ],
)
def test_field_messages(form, field, message):
    _, errors = labforms.parse_form("tp-sweep", form)
    assert errors[field] == message


def test_lab_page_links_back_to_its_lesson(client):
    client.register("ann@example.org")
    page = client.get("/labs/tp-sweep").text
    assert 'href="/lessons/transformer-scaling/lab"' in page


def test_form_labels_are_words_and_name_the_parameter_messages_use(client):
    """Pydantic's own titles ("D Model", "Ffn", "Lr") meant nothing to a learner: every parameter whose name
    is not already a plain word carries an explicit title, and the form shows the name beside it, as errors,
    job cards and the command line use it."""
    untitled = [
        f"{lab}.{name}"
        for lab in catalog.names()
        for name, info in catalog.get(lab).params.model_fields.items()
        if info.title is None and name not in {"seed"}
    ]
    assert untitled == []
    client.register("ann@example.org")
    page = client.get("/labs/fp8-step").text
    assert '<label for="p-d_model">Model width <code class="param-name">d_model</code></label>' in page
    assert '<label for="p-seed">Seed</label>' in page  # the name in words already


@pytest.mark.parametrize(
    "form, field, message",
    [
        (
            {"d_model": "18", "n_heads": "4"},
            "n_heads",
            "n_heads: a divisor of d_model=18 (d_model % n_heads = 2: heads must split the width evenly), got 4",
        ),
        (
            {"steps": "4", "outlier_step": "10"},
            "outlier_step",
            "outlier_step: a step below steps=4 (the spike must happen during the run), got 10",
        ),
    ],
)
def test_fields_that_do_not_fit_together_say_the_labs_rule_not_a_range(form, field, message):
    """4 heads and step 10 are inside their fields' ranges: the form said "a whole number from 1 to 128, got 4"
    and threw away the params model's own message about the other field."""
    _, errors = labforms.parse_form("fp8-step", form)
    assert errors == {field: message}


def test_a_cross_field_error_is_shown_next_to_its_field(client, db):
    client.register("ann@example.org")
    data = dict(_as_browser_would("fp8-step"))
    data.update(d_model="18", n_heads="4", csrf_token=client.csrf("/labs/fp8-step"))
    r = client.post("/labs/fp8-step/jobs", data=data, headers={"HX-Request": "true"})
    assert r.status_code == 422
    shown = dict(re.findall(r'data-field="([a-z_]+)">([^<]*)<', r.text))
    assert shown == {
        "n_heads": "n_heads: a divisor of d_model=18 (d_model % n_heads = 2: heads must split the width evenly), got 4"
    }
    assert db.query(Job).count() == 0


def test_every_labs_own_validator_words_reach_the_form():
    """Any lab's params model may check a rule in a validator (a custom error, a ValueError, a model validator):
    the form words it with the model's message, not as the field's range."""
    from pydantic import Field, ValidationError, field_validator, model_validator

    from labs.params import LabParams

    class P(LabParams):
        ranks: int = Field(2, ge=1, le=8)
        ffn: int = Field(64, ge=8, le=4096)

        @field_validator("ffn")
        @classmethod
        def _splits(cls, v: int, info):
            if v % info.data["ranks"]:
                raise ValueError(f"a multiple of ranks={info.data['ranks']}")
            return v

        @model_validator(mode="after")
        def _small(self):
            if self.ffn > 1000:
                raise ValueError("ffn must stay small")
            return self

    fields = {
        f.name: f
        for f in [
            labforms.FormField("ranks", "Ranks", "int", 2, "", 1, 8),
            labforms.FormField("ffn", "ffn", "int", 64, "", 8, 4096),
        ]
    }
    with pytest.raises(ValidationError) as exc:
        P(ranks=3, ffn=64)
    assert labforms.field_errors(exc.value, fields) == {"ffn": "ffn: a multiple of ranks=3, got 64"}
    with pytest.raises(ValidationError) as exc:
        P(ranks=1, ffn=2000)
    assert labforms.field_errors(exc.value, fields) == {"params": "params: ffn must stay small"}


def test_overlap_trace_ffn_that_ranks_do_not_split_names_the_rule(client, db):
    """overlap-trace's rule across fields lives in its limits(): the form shows it by the field, with the arithmetic."""
    client.register("ann@example.org")
    data = dict(_as_browser_would("overlap-trace"))
    data.update(ranks="3", ffn="2048", csrf_token=client.csrf("/labs/overlap-trace"))
    r = client.post("/labs/overlap-trace/jobs", data=data, headers={"HX-Request": "true"})
    assert r.status_code == 422
    shown = dict(re.findall(r'data-field="([a-z_]+)">([^<]*)<', r.text))
    assert shown == {"ffn": "ffn: ffn(2048) % ranks(3) = 2, must be 0"}
    assert db.query(Job).count() == 0
