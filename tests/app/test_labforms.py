"""Every lab's parameter form, submitted as rendered, creates a job with the lab's defaults."""

import re
from html.parser import HTMLParser

import pytest

from app.core.models import Job
from app.services.jobs import forms as labforms
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
    assert r.status_code == 422 and "steps: a whole number from 2 to 5,000, got &#39;two&#39;" in r.text
    assert db.query(Job).count() == 0


def test_a_refusal_with_a_sum_says_it_at_the_field_and_below_and_to_scripts(client, db):
    """The FLOP budget: the first clause at `steps`, the advice and the arithmetic in their own block; the API gives
    scripts the same sentence and the sum as the error's `detail`."""
    client.register("ann@example.org")
    data = dict(_as_browser_would("fp8-step"))
    data.update(steps="5000", batch="64", csrf_token=client.csrf("/labs/fp8-step"))
    page = client.post("/labs/fp8-step/jobs", data=data).text
    field = re.search(r'<p class="error" id="e-steps" data-field="steps">(.*?)</p>', page, re.S)
    assert field and field.group(1).startswith("steps: about 3.2 × 10¹² FLOPs, over the cpu backend&#39;s budget")
    assert "take fewer steps" not in field.group(1) and "parameters" not in field.group(1)
    block = re.search(r'data-testid="error-detail"(.*?)</div>', page, re.S)
    assert block and "Take fewer steps, a smaller batch, seq or model, or a GPU backend." in block.group(1)
    assert "<pre>6 × 103,424 parameters × batch 64 × seq 16 × 5,000 steps\n≈ 3.2 × 10¹² FLOPs per run" in block.group(1)
    r = client.client.post(
        "/api/v1/jobs",
        json={"lab": "fp8-step", "params": {"steps": 5000, "batch": 64}, "backend": "cpu"},
        headers={"X-CSRF-Token": client.api_token()},
    )
    (error,) = r.json()["errors"]
    assert r.status_code == 422 and error["field"] == "steps" and "take fewer steps" in error["message"]
    assert error["detail"].splitlines()[1] == "≈ 3.2 × 10¹² FLOPs per run"
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
        ({"tokens": "16,384"}, "tokens", "tokens: at most 8,192, got 16,384"),  # a thousands separator is read
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


# ---- groups: fieldsets, folded "More settings" ----------------------------------------------------------------


class _FormMap(HTMLParser):
    """The rendered #lab-form as a learner's browser holds it: for each control its group (the fieldset's legend),
    whether a "More settings" fold holds it and whether that fold is open, and what it shows."""

    def __init__(self, html: str):
        super().__init__()
        self.inside = False
        self.stack: list[str | None] = []  # one entry per open fieldset/details: its group, "" for others
        self.group: str | None = None
        self.fold: dict | None = None
        self.folds: list[dict] = []
        self.legends: list[str] = []
        self.controls: dict[str, list[dict]] = {}
        self.select: str | None = None
        self._text: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("id") == "lab-form":
            self.inside = True
        if not self.inside:
            return
        if tag == "fieldset":
            self.stack.append(a.get("data-group") if "param-group" in (a.get("class") or "") else "")
            if self.stack[-1]:
                self.group = self.stack[-1]
        elif tag == "details":
            self.fold = {"group": self.group, "open": "open" in a, "summary": ""}
            self.folds.append(self.fold)
        elif tag in ("legend", "summary"):
            self._text = []
        elif tag == "select":
            self.select = a["name"]
            self._add(a["name"], value=None)
        elif tag == "option" and self.select and "selected" in a:
            self.controls[self.select][-1]["value"] = a["value"]
        elif tag == "input" and a.get("type") != "hidden" and a.get("name") != "replace_queued":
            checkbox = a.get("type") == "checkbox"
            shown = a.get("value", "on" if checkbox else "")  # a box without a value sends "on"
            self._add(a["name"], value=shown if not checkbox or "checked" in a else None)

    def _add(self, name: str, value):
        entry = {"group": self.group, "folded": self.fold is not None, "open": bool(self.fold and self.fold["open"])}
        self.controls.setdefault(name, []).append({**entry, "value": value})

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if not self.inside:
            return
        if tag == "form":
            self.inside = False
        elif tag == "fieldset" and self.stack.pop():
            self.group = None
        elif tag == "details":
            self.fold = None
        elif tag == "select":
            self.select = None
        elif tag in ("legend", "summary") and self._text is not None:
            text = " ".join("".join(self._text).split())
            if tag == "summary" and self.fold is not None:
                self.fold["summary"] = text
            elif tag == "legend" and self.stack and self.stack[-1]:
                self.legends.append(text)
            self._text = None

    def shown(self, name: str) -> list:
        return [c["value"] for c in self.controls[name] if c["value"] is not None]


LABS_WITH_PARAMS = [lab for lab in catalog.names() if labforms.form_fields(lab)]


@pytest.mark.parametrize("lab", catalog.names())
def test_every_parameter_declares_its_group(lab):
    """A new field without `json_schema_extra={"group": ...}` in its params module fails here: the form would have
    nowhere to put it. A fold (`advanced`) only exists inside a group."""
    fields = labforms.form_fields(lab)
    assert [f.name for f in fields if not f.group] == []
    assert all(isinstance(f.advanced, bool) for f in fields)


@pytest.mark.parametrize("lab", LABS_WITH_PARAMS)
def test_every_field_is_shown_in_exactly_one_group(client, lab):
    client.register("ann@example.org")
    form = _FormMap(client.get(f"/labs/{lab}").text)
    expected = {f.name: f.group for f in labforms.form_fields(lab)}
    expected["backend"] = labforms.form_fields(lab)[0].group  # the run's own group
    assert set(form.controls) == set(expected)
    for name, group in expected.items():
        groups = {c["group"] for c in form.controls[name]}  # a multi-choice field has a box per choice
        assert groups == {group}, name
    assert len(form.legends) == len(set(form.legends))  # one fieldset per group
    assert set(form.legends) == set(expected.values())


def test_fp8_step_groups_and_what_its_folds_hold(client):
    client.register("ann@example.org")
    form = _FormMap(client.get("/labs/fp8-step").text)
    assert form.legends == ["Run", "Model and data", "FP8 recipe", "Outlier experiment"]
    visible = [n for n, cs in form.controls.items() if not cs[0]["folded"]]
    assert visible[:2] == ["steps", "backend"]  # what a first run changes comes first; backend joins Run
    folded = {n: cs[0]["group"] for n, cs in form.controls.items() if cs[0]["folded"]}
    assert folded == {
        "seed": "Model and data",
        "vocab": "Model and data",
        "lr": "Model and data",
        "margin": "FP8 recipe",
        "amax_history_len": "FP8 recipe",
        "amax_compute_algo": "FP8 recipe",
        "delayed_update": "FP8 recipe",
        "fprop_accumulation": "FP8 recipe",
    }
    # the summary names what the fold holds and how many, and every fold starts closed on a fresh form
    assert [f["summary"] for f in form.folds] == [
        "More settings: Seed, vocabulary size, learning rate — 3 settings",
        "More settings: Scale margin, amax history length, amax from the history, delayed-scaling update, "
        "forward GEMM accumulation — 5 settings",
    ]
    assert not any(f["open"] for f in form.folds)


def test_env_check_has_one_group_and_no_legend(client):
    client.register("ann@example.org")
    form = _FormMap(client.get("/labs/env-check").text)
    assert set(form.controls) == {"backend"} and form.legends == [] and form.folds == []


def _refused(client, lab: str, **typed: str) -> _FormMap:
    data = dict(_as_browser_would(lab))
    data.update(typed, csrf_token=client.csrf(f"/labs/{lab}"))
    r = client.post(f"/labs/{lab}/jobs", data=data, headers={"HX-Request": "true"})
    assert r.status_code == 422, r.text[:2000]
    return _FormMap(r.text)


def _open_folds(form: _FormMap) -> set:
    return {f["group"] for f in form.folds if f["open"]}


def test_a_fold_opens_for_an_error_inside_it(client, db):
    client.register("ann@example.org")
    form = _refused(client, "fp8-step", lr="0.5")  # lr sits in Model and data's fold
    assert _open_folds(form) == {"Model and data"}
    assert form.controls["lr"][0]["open"] and form.shown("lr") == ["0.5"]
    form = _refused(client, "fp8-step", steps="1")  # an error outside any fold opens none
    assert _open_folds(form) == set()
    assert db.query(Job).count() == 0


def test_a_fold_opens_for_a_value_other_than_its_default(client):
    """A refused run keeps what the learner set in a fold in view, beside the error that refused it."""
    client.register("ann@example.org")
    form = _refused(client, "fp8-step", steps="1", delayed_update="unfused")
    assert _open_folds(form) == {"FP8 recipe"} and form.shown("delayed_update") == ["unfused"]
    # the same value written another way ("3e-3" for 0.003, "1,2,4" for "1, 2, 4") is still the default
    form = _refused(client, "fp8-step", steps="1", lr="3e-3", margin="0")
    assert _open_folds(form) == set()
    form = _refused(client, "tp-sweep", steps="0", seed="7")  # a folded int field, in the run's own group
    assert _open_folds(form) == {"Run"}
    form = _refused(client, "tp-sweep", steps="0", sequence_parallel="on")  # a folded checkbox
    assert _open_folds(form) == {"FP8 and the te backend"}


def _alternative(f: labforms.FormField) -> str | list[str]:
    """A value for `f` that is not its default (what a learner might type)."""
    if f.kind == "choice":
        return next(str(c) for c in f.choices if str(c) != f.default_text)
    if f.kind == "multi_choice":
        return [str(f.choices[-1])]
    if f.kind == "int_list":
        return "1, 2"
    if f.kind == "bool":
        return "" if f.default else "on"
    if f.kind == "float":
        return str(f.minimum + 1.5 if f.minimum is not None else 0.5)
    lo = int(f.minimum or 0)
    return str(lo + 1 if str(lo + 1) != f.default_text else lo + 2)


@pytest.mark.parametrize("lab", LABS_WITH_PARAMS)
def test_a_refused_form_keeps_every_typed_value_in_view(client, db, lab):
    """Every field changed from its default and one that cannot be read: the form comes back refused with each
    value as typed, and every fold holding one open."""
    client.register("ann@example.org")
    fields = labforms.form_fields(lab)
    typed: dict[str, str | list[str]] = {f.name: _alternative(f) for f in fields}
    broken = next(f.name for f in fields if f.kind == "int")
    typed[broken] = "lots"
    data = [(k, v) for k, v in _as_browser_would(lab) if k not in typed]
    for f in fields:
        value = typed[f.name]
        if f.kind == "multi_choice":
            data += [(f"{f.name}__present", "1")] + [(f.name, v) for v in value]
        elif value != "":
            data.append((f.name, str(value)))
    body: dict[str, list[str]] = {}
    for k, v in data + [("csrf_token", client.csrf(f"/labs/{lab}"))]:
        body.setdefault(k, []).append(v)
    r = client.client.post(f"/labs/{lab}/jobs", data=body, headers={"HX-Request": "true"})
    assert r.status_code == 422
    form = _FormMap(r.text)
    for f in fields:
        want = typed[f.name]
        if f.kind == "bool":
            assert form.shown(f.name) == (["on"] if want else []), f.name
        else:
            assert form.shown(f.name) == (want if isinstance(want, list) else [want]), f.name
    assert form.folds and all(f["open"] for f in form.folds)
    assert f'data-field="{broken}"' in r.text
    assert db.query(Job).count() == 0


@pytest.mark.parametrize(
    "lab, name, values, changed",
    [
        ("fp8-step", "lr", {}, False),  # a fresh form
        ("fp8-step", "lr", {"lr": "0.003"}, False),
        ("fp8-step", "lr", {"lr": " 3e-3 "}, False),
        ("fp8-step", "lr", {"lr": "0.01"}, True),
        ("fp8-step", "lr", {"lr": "fast"}, True),
        ("fp8-step", "outlier_step", {"outlier_step": "20"}, False),  # the default spike step
        ("fp8-step", "outlier_step", {"outlier_step": ""}, True),  # emptied: a run without a spike
        ("fp8-step", "outlier_step", {"outlier_step": "0"}, True),
        ("fp8-step", "outlier_step", {"outlier_step": None}, True),  # a prefilled run's params: no spike
        ("fp8-step", "margin", {"steps": "4"}, False),  # not sent: shown at its default
        ("fp8-step", "delayed_update", {"delayed_update": "unfused"}, True),
        ("tp-sweep", "degrees", {"degrees": "1,2,4"}, False),
        ("tp-sweep", "degrees", {"degrees": [1, 2, 4]}, False),
        ("tp-sweep", "degrees", {"degrees": [1, 2]}, True),
        ("tp-sweep", "fp8", {"steps": "5"}, False),  # an unticked box is not sent
        ("tp-sweep", "fp8", {"fp8": "on"}, True),
        ("tp-sweep", "fp8", {"fp8": True}, True),
        ("tp-sweep", "warmup", {"warmup": "1,000"}, True),
        ("overlap-trace", "schedules", {"schedules": ["immediate", "windowed", "dependent"]}, False),
        ("overlap-trace", "schedules", {"schedules": "windowed"}, True),
    ],
)
def test_a_field_knows_when_it_shows_something_other_than_its_default(lab, name, values, changed):
    f = next(f for f in labforms.form_fields(lab) if f.name == name)
    assert f.changed(values) is changed


def test_every_preset_prefills_the_whole_form_with_values_the_form_accepts():
    """A preset's values (what ?preset=KEY prefills) parse back through the form into the preset's params."""
    for lab, spec in catalog.LABS.items():
        for preset in spec.presets:
            values = labforms.preset_values(lab, preset.key)
            form = {k: ("on" if v else None) if isinstance(v, bool) else v for k, v in values.items()}
            form = {k: v for k, v in form.items() if v is not None}
            for f in labforms.form_fields(lab):
                if f.kind == "multi_choice":
                    form[f"{f.name}__present"] = "1"
            params, errors = labforms.parse_form(lab, _MultiDict(form))
            assert errors == {}, (lab, preset.key, errors)
            want = spec.params.model_validate(dict(preset.params)).model_dump()
            assert spec.params.model_validate(params).model_dump() == want, (lab, preset.key)
            changed = {f.name for f in labforms.form_fields(lab) if f.changed(values)}
            assert changed == {k for k, v in preset.params.items() if v != spec.params.model_fields[k].default}


def test_preset_links_point_at_the_prefilled_form_and_unknown_keys_name_the_known_ones():
    links = labforms.preset_links("fp8-step", "delayed-vs-current")
    assert [link.name for link in links][:2] == ["Spike at step 20", "Delayed vs current"]
    assert links[1].href == "/labs/fp8-step?preset=delayed-vs-current#lab-form" and links[1].active
    with pytest.raises(KeyError, match="presets: spike-at-step-20, delayed-vs-current"):
        labforms.preset_values("fp8-step", "nope")


def test_the_form_says_how_long_a_run_takes_in_round_words():
    assert labforms.duration_text(38.2, "cpu", "x") == "A run takes about 40 s on this server's CPU (x)."
    assert labforms.duration_text(3.1, "cpu", "x") == "A run takes about 10 s on this server's CPU (x)."
    assert labforms.duration_text(754, "te", "x") == "A run takes about 13 min 00 s on this server's GPU (te) (x)."
    assert labforms.duration_text(None, "cpu", "x") == ""


class _MultiDict(dict):
    def getlist(self, key):
        v = self.get(key)
        return v if isinstance(v, list) else [] if v is None else [v]
