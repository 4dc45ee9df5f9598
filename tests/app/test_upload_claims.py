"""An upload is the learner's claim: wherever it shows (its page, the report, the grader's review, the checks, the
API) it reads as uploaded and self-reported, its label as the uploader's words, never "measured on the device",
and where its result contradicts itself the grader is told. Through HTTP, with the probe's forged bundle: a CPU
run of fp8-step whose environment was edited to say te on an H100, with a label of the uploader's choosing."""

from __future__ import annotations

import html
import io
import json
import re
import zipfile

import pytest

from app.core.models import LabReport
from tests.app import labruns
from tests.app.reporting import LESSON, claimed_by_grader

FORGED_LABEL = "Course-measured on the course's H100 cluster"


def _forged_bundle() -> bytes:
    root = labruns.bundle("fp8-step")
    entries = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    result = json.loads(entries["result.json"])
    env = result["environment"]
    env.update(backend="te", emulated=False, label=FORGED_LABEL)
    env["device"]["name"] = "NVIDIA H100 80GB HBM3"
    entries["result.json"] = json.dumps(result).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.fixture
def submitted(client, db):
    """Ann's report, submitted with the forged upload as its FP8 evidence (the other items left out): (report,
    upload id)."""
    client.register("ann@example.org")
    r = client.post(
        f"/lessons/{LESSON}/report/bundles",
        files={"bundle": ("h100.zip", _forged_bundle(), "application/zip")},
        data={"csrf_token": client.csrf(f"/lessons/{LESSON}/report")},
    )
    assert r.status_code == 200 and "and attached it to" in r.text, r.text[-1500:]
    page = client.get(f"/lessons/{LESSON}/report").text
    form: dict = {"action": "submit-incomplete", "missing-ok": []}
    for slot, value in re.findall(
        r'name="evidence-([a-z0-9-]+)">\s*<option value="">— none —</option>\s*(?:<option value="([^"]+)" selected)?',
        page,
    ):
        form[f"evidence-{slot}"] = value
        form["missing-ok"].append(f"evidence-{slot}")
    bundle_ref = next(v for v in form.values() if isinstance(v, str) and v.startswith("bundle:"))
    form["missing-ok"] += [f"answer-{q}" for q in ("numbers", "overlap", "sharding")]
    r = client.post(f"/lessons/{LESSON}/report", data=form)
    assert r.status_code == 200 and "Submitted as version" in r.text, r.text[-1500:]
    return db.query(LabReport).one(), int(bundle_ref.split(":")[1])


def _text(response) -> str:
    """The page's words as a reader sees them: tags dropped, entities decoded, runs of space made one."""
    assert response.status_code == 200, response.text[-500:]
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", response.text)))


def _text_of(fragment: str) -> str:
    return re.sub(r"<[^>]+>", "", fragment)


def test_the_bundle_page_quotes_the_label_as_the_uploaders_words(client, submitted):
    _, bundle_id = submitted
    r = client.get(f"/bundles/{bundle_id}")
    page = _text(r)
    assert f"How these numbers were made, in the uploader's words: “{FORGED_LABEL}”" in page
    assert "The course did not run or measure it; every number below is self-reported." in page
    assert "self-reported" in _text_of(r.text.split("</h1>")[0])
    assert 'class="label measured"' not in r.text


def test_the_grader_sees_a_self_reported_upload_and_its_contradictions(client, db, submitted, make_user, make_client):
    report, bundle_id = submitted
    gina = claimed_by_grader(make_user, make_client, db, report)
    page = _text(gina.get(f"/classes/default/grader/reports/{report.id}"))
    assert "measured on the device" not in page
    assert "Uploaded, so self-reported: the course did not run it." in page
    assert f"labels itself, in the uploader's words: “{FORGED_LABEL}”" in page
    assert "This upload contradicts itself:" in page
    for words in (
        "the te backend, which runs on a GPU, on a device of type 'cpu'",
        "the te backend (Transformer Engine's FP8 kernels), but fp8_numerics: emulated; source: emulation",
        "the te backend on a GPU, but CPU timings (timing kind cpu)",
        "a label `python -m labs run` does not write for the te backend on that device",
    ):
        assert words in page, words
    assert f"upload {bundle_id} (self-reported)" in page  # beside its rubric line
    assert "· uploaded, self-reported" in page  # the item's status line
    assert f"How these numbers were made, in the uploader's words: “{FORGED_LABEL}”" in page
    assert "How these numbers were made: " not in page


def test_the_learners_own_report_and_the_api_say_the_same(client, submitted):
    report, bundle_id = submitted
    page = _text(client.get(f"/lessons/{LESSON}/report?v=1"))
    assert "measured on the device" not in page and "This upload contradicts itself:" in page
    assert f"in the uploader's words: “{FORGED_LABEL}”" in page
    menu = _text(client.get(f"/lessons/{LESSON}/report"))
    assert re.search(rf"Upload {bundle_id} · h100\.zip · [^<]*te, self-reported", menu)
    body = client.get(f"/api/v1/bundles/{bundle_id}").json()
    assert body["self_reported"] is True and body["label"] == FORGED_LABEL
    assert any("fp8_numerics: emulated" in c for c in body["contradictions"])


def test_an_honest_cpu_upload_is_self_reported_but_not_flagged(client):
    client.register("ann@example.org")
    root = labruns.bundle("env-check")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in root.iterdir():
            zf.write(f, f.name)
    r = client.client.post(
        "/api/v1/bundles",
        files={"bundle": ("env.zip", buf.getvalue(), "application/zip")},
        headers={"X-CSRF-Token": client.api_token()},
    )
    assert r.status_code == 201 and r.json()["self_reported"] is True and r.json()["contradictions"] == []


def test_the_class_views_count_no_upload_as_a_run(client, submitted, make_user, make_client):
    """The class's lab statistics are the course's own runs: an upload's numbers never enter them."""
    make_user("ivy@example.org", roles=("instructor",))
    ivy = make_client()
    ivy.login("ivy@example.org")
    page = _text(ivy.get("/classes/default/labs"))
    assert "No lab has run yet." in page and "NVIDIA H100" not in page
    roster = _text(ivy.get(f"/classes/default/roster?lesson={LESSON}"))
    assert "ann@example.org" in roster and "H100" not in roster and FORGED_LABEL not in roster
