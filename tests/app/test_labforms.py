"""Every lab's parameter form, submitted as rendered, creates a job with the lab's defaults."""

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
    assert 'data-field="steps"' in r.text and "steps: got 1" in r.text
    data.update(steps="two")
    r = client.post("/labs/fp8-step/jobs", data=data)
    assert r.status_code == 422 and "steps: got &#39;two&#39;" in r.text
    assert db.query(Job).count() == 0


def test_lab_page_links_back_to_its_lesson(client):
    client.register("ann@example.org")
    page = client.get("/labs/tp-sweep").text
    assert 'href="/lessons/transformer-scaling/lab"' in page
