"""Uploads keep only what result.json lists, count against a per-learner storage quota an instructor sets, and a
result.json nested past the limit is refused before it is parsed: each through HTTP, nothing stored on refusal."""

from __future__ import annotations

import html
import io
import json
import os
import zipfile

import pytest

from app.core.models import Bundle, LabReport, ReportVersion
from app.services.jobs import bundles
from tests.app import labruns
from tests.app.reporting import LESSON

PADDING_FILES = 197  # a hostile upload: a valid bundle plus 197 unlisted files


def _zip(entries: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _real(lab: str = "fp8-step") -> dict[str, bytes]:
    root = labruns.bundle(lab)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _with_big_plot(kib: int) -> bytes:
    """The fp8-step bundle whose listed loss.svg holds `kib` KiB that barely compress (so it is kept in full)."""
    entries = _real()
    entries["loss.svg"] = b"<svg><!--" + os.urandom(kib * 512).hex().encode() + b"--></svg>"
    return _zip(entries)


@pytest.fixture
def prof(make_client, make_user):
    make_user("prof@example.org", roles=("instructor",))
    c = make_client()
    assert c.login("prof@example.org").status_code == 303
    return c


def _set_limits(prof, email="", **values):
    data = {name: "" for name in ("max_in_flight", "max_per_hour", "max_gpu_seconds_per_day")}
    data |= {"email": email, "max_stored_mib": "", "max_stored_bundles": ""}
    data.update({k: str(v) for k, v in values.items()})
    return prof.post("/instructor/cluster/limits", data=data, follow_redirects=False)


def _api_upload(c, data: bytes, name: str = "run.zip"):
    return c.client.post(
        "/api/v1/bundles", files={"bundle": (name, data, "application/zip")}, headers={"X-CSRF-Token": c.api_token()}
    )


def _page_upload(c, data: bytes, name: str = "run.zip"):
    return c.post(
        f"/lessons/{LESSON}/report/bundles",
        files={"bundle": (name, data, "application/zip")},
        data={"csrf_token": c.csrf(f"/lessons/{LESSON}/report")},
    )


def _stored_dirs(settings) -> list[str]:
    root = bundles.bundles_dir(settings)
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_unlisted_files_are_never_stored_and_the_answer_names_them(client, db, settings):
    """A zip of a valid result.json and 197 compressible padding files (each under the bomb ratio)."""
    pad = os.urandom(2800) + b"0" * 237_200  # 240 kB that deflate ~80x, under the 100x bomb rule
    entries = _real() | {f"pad/{i:03d}.txt": pad for i in range(PADDING_FILES)}
    data = _zip(entries)
    client.register("ann@example.org")
    r = _api_upload(client, data)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["dropped"] == [f"pad/{i:03d}.txt" for i in range(PADDING_FILES)]
    bundle = db.get(Bundle, body["id"])
    folder = settings.data_dir / bundle.bundle_dir
    kept = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert kept == ["amax_scale.svg", "loss.svg", "result.json"]
    on_disk = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert bundle.stored_bytes == on_disk < 200_000  # the padding was 47 MB expanded
    assert sum(len(v) for v in entries.values()) > 40_000_000
    # the report page says the same, in words
    page = _page_upload(client, data)
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert "Not kept, because result.json does not list them: pad/000.txt, pad/001.txt" in text
    assert "and 187 more (197 files)" in text


def test_the_storage_quota_refuses_with_its_numbers_and_deleting_frees_it(client, prof, db, settings):
    assert _set_limits(prof, max_stored_mib=1).status_code == 303
    client.register("ann@example.org")
    first = _api_upload(client, _with_big_plot(700))
    assert first.status_code == 201, first.text
    second = _api_upload(client, _with_big_plot(700))
    assert second.status_code == 413
    detail = second.json()["detail"]
    assert second.json()["quota"] == "storage"
    assert "your storage quota of 1.0 MiB" in detail and "already take 7" in detail
    assert "delete uploads you no longer need" in detail and "/reports" in detail
    assert db.query(Bundle).count() == 1 and _stored_dirs(settings) == [str(first.json()["id"])]
    page = _page_upload(client, _with_big_plot(700))
    assert page.status_code == 413 and "your storage quota of 1.0 MiB" in html.unescape(page.text)
    assert db.query(Bundle).count() == 1
    # the learner finds the upload on My lab reports and deletes it there (CSRF, as every POST)
    reports = client.get("/reports").text
    assert 'data-testid="storage-usage">1 upload stored of 50 allowed' not in reports  # blank count: no limit
    assert "1 upload stored" in reports and "of your 1.0 MiB quota" in reports
    bundle_id = first.json()["id"]
    assert client.client.post(f"/bundles/{bundle_id}/delete").status_code == 403
    gone = client.post(f"/bundles/{bundle_id}/delete", follow_redirects=False)
    assert gone.status_code == 303 and gone.headers["location"] == f"/reports?deleted={bundle_id}"
    assert f"Deleted upload {bundle_id}" in client.get(gone.headers["location"]).text
    assert db.query(Bundle).count() == 0 and _stored_dirs(settings) == []
    assert _api_upload(client, _with_big_plot(700)).status_code == 201


def test_a_learners_own_count_quota_is_a_409_on_the_page_and_the_api(client, prof, db, settings):
    client.register("ann@example.org")
    assert _set_limits(prof, email="ann@example.org", max_stored_bundles=1, max_stored_mib=100).status_code == 303
    assert _api_upload(client, _zip(_real("env-check"))).status_code == 201
    again = _api_upload(client, _zip(_real("env-check")))
    assert again.status_code == 409 and again.json()["quota"] == "stored uploads"
    assert "you have 1 upload stored, your quota of stored uploads (1)" in again.json()["detail"]
    page = _page_upload(client, _zip(_real("env-check")))
    assert page.status_code == 409 and "your quota of stored uploads (1)" in html.unescape(page.text)
    assert db.query(Bundle).count() == 1 and len(_stored_dirs(settings)) == 1
    # the instructor sees her own quota listed with the other limits
    assert "1 uploads in 100 MiB" in prof.get("/instructor/cluster").text


def test_the_instructor_form_has_the_quota_and_names_a_bad_field(prof, db):
    page = prof.get("/instructor/cluster").text
    assert 'name="max_stored_mib"' in page and 'name="max_stored_bundles"' in page
    assert "MiB of stored uploads (course default: 200)" in page and "Stored uploads (course default: 50)" in page
    bad = _set_limits(prof, max_stored_mib="1e9")
    text = html.unescape(bad.text)
    assert bad.status_code == 422 and "MiB of stored uploads: got '1e9', expected a whole number from 0" in text


def test_an_upload_a_submitted_report_cites_is_kept(client, db, settings):
    client.register("ann@example.org")
    r = _api_upload(client, _zip(_real("env-check")))
    bundle = db.get(Bundle, r.json()["id"])
    report = LabReport(owner_id=bundle.owner_id, lesson_id=LESSON, status="submitted", draft={})
    db.add(report)
    db.flush()
    db.add(
        ReportVersion(
            report_id=report.id, number=1, lesson_version=1, evidence={"env": {"bundle": bundle.id}}, answers={}
        )
    )
    db.commit()
    refused = client.post(f"/bundles/{bundle.id}/delete")
    assert refused.status_code == 409 and "evidence in your submitted report (version 1)" in refused.text
    api = client.client.delete(f"/api/v1/bundles/{bundle.id}", headers={"X-CSRF-Token": client.api_token()})
    assert api.status_code == 409
    db.expire_all()
    assert db.get(Bundle, bundle.id) is not None and (settings.data_dir / bundle.bundle_dir / "result.json").is_file()


def test_someone_elses_upload_cannot_be_deleted(client, make_client, db):
    client.register("ann@example.org")
    bundle_id = _api_upload(client, _zip(_real("env-check"))).json()["id"]
    eve = make_client()
    eve.register("eve@example.org")
    assert eve.post(f"/bundles/{bundle_id}/delete").status_code == 404
    assert (
        eve.client.delete(f"/api/v1/bundles/{bundle_id}", headers={"X-CSRF-Token": eve.api_token()}).status_code == 404
    )
    assert db.query(Bundle).count() == 1


@pytest.mark.parametrize("depth", [200_000, bundles.MAX_DEPTH + 1])
def test_a_result_nested_past_the_limit_is_a_422_naming_it(client, db, settings, depth):
    client.register("ann@example.org")
    nested = b"[" * depth + b"]" * depth  # stored, not deflated: it would compress past the bomb ratio
    r = _api_upload(client, _zip({"result.json": nested}, zipfile.ZIP_STORED))
    assert r.status_code == 422
    assert f"more than {bundles.MAX_DEPTH} levels deep (the nesting limit)" in r.json()["detail"]
    assert db.query(Bundle).count() == 0 and _stored_dirs(settings) == []


def test_nesting_at_the_limit_and_brackets_inside_strings_are_not_refused_for_depth(client):
    client.register("ann@example.org")
    at_limit = b"[" * bundles.MAX_DEPTH + b"]" * bundles.MAX_DEPTH
    r = _api_upload(client, _zip({"result.json": at_limit}))
    assert r.status_code == 422 and "must hold a JSON object" in r.json()["detail"]
    result = json.loads(_real("env-check")["result.json"])
    result["params"] = {}
    result["environment"]["label"] = "[" * 500 + '\\"{' * 100
    r = _api_upload(client, _zip({"result.json": json.dumps(result).encode()}))
    assert r.status_code == 201, r.text
