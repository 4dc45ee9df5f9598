"""Uploaded bundles: a real lab bundle is accepted; every trick and malformed archive is refused with
its exact reason, and nothing is stored (no row, no files)."""

from __future__ import annotations

import io
import json
import warnings
import zipfile

import pytest

from app.core.models import Bundle
from app.services.jobs import bundles
from tests.app import labruns
from tests.app.reporting import LESSON


def _zip(entries: dict[str, bytes], *, symlink: str | None = None, compression=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are the point of one case
        for name, data in entries.items() if isinstance(entries, dict) else entries:
            zf.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, "/etc/passwd")
    return buf.getvalue()


def _real(lab: str = "fp8-step", prefix: str = "") -> dict[str, bytes]:
    root = labruns.bundle(lab)
    return {prefix + p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _nothing_stored(db, settings):
    assert db.query(Bundle).count() == 0
    folder = bundles.bundles_dir(settings)
    assert not folder.exists() or list(folder.iterdir()) == []


@pytest.fixture
def owner(make_user):
    return make_user("ann@example.org")


@pytest.mark.parametrize("prefix", ["", "fp8/"])
def test_real_bundle_is_stored_and_served_safely(db, settings, owner, prefix, make_client):
    data = _zip(_real(prefix=prefix))
    bundle = bundles.ingest(db, settings=settings, owner=owner, filename="fp8.zip", data=data)
    assert bundle.lab == "fp8-step" and bundle.result["environment"]["emulated"] is True
    stored = settings.data_dir / bundle.bundle_dir
    assert (stored / "result.json").is_file() and (stored / "loss.svg").is_file()
    assert [p.name for p in bundles.bundles_dir(settings).iterdir()] == [str(bundle.id)]  # no temp folder left
    c = make_client()
    c.login("ann@example.org")
    svg = c.get(f"/bundles/{bundle.id}/artifacts/loss_curves")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert (
        svg.headers["content-security-policy"].startswith("default-src 'none'")
        and svg.headers["x-content-type-options"] == "nosniff"
    )
    page = c.get(f"/bundles/{bundle.id}").text
    assert "CPU emulation" in page and f"/bundles/{bundle.id}/artifacts/loss_curves" in page
    assert c.get(f"/bundles/{bundle.id}/artifacts/..%2F..%2Fcourse.db").status_code == 404


def _without_artifact() -> dict[str, bytes]:
    entries = _real()
    del entries["loss.svg"]
    return entries


def _bad_schema() -> dict[str, bytes]:
    entries = _real()
    result = json.loads(entries["result.json"])
    del result["environment"]
    result["lab"] = "mystery"
    entries["result.json"] = json.dumps(result).encode()
    return entries


def _lying_size() -> bytes:
    """A listed artifact whose directory entries claim 10 bytes while its data expands to 1 MB (an unlisted
    one is never unpacked, so the lie must be in a file the bundle keeps)."""
    entries = _real()
    entries["loss.svg"] = b"<svg>" + b"0" * 1_000_000 + b"</svg>"
    name = b"loss.svg"
    data = bytearray(_zip(entries))
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo(name.decode())
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # local header and central directory size fields
        pos = data.find(sig, info.header_offset if sig == b"PK\x03\x04" else 0)
        while sig == b"PK\x01\x02" and data[pos + 46 : pos + 46 + len(name)] != name:
            pos = data.find(sig, pos + 1)
        data[pos + off : pos + off + 4] = (10).to_bytes(4, "little")
    return bytes(data)


CASES = {
    "not-a-zip": (lambda: b"this is plainly text, not an archive" * 10, "not a zip archive"),
    "empty": (lambda: b"", "the file is empty"),
    "zip-slip": (lambda: _zip({"result.json": b"{}", "../../evil.json": b"{}"}), "'..'"),
    "absolute": (lambda: _zip({"/etc/evil.json": b"{}"}), "absolute paths are not allowed"),
    "backslash": (lambda: _zip({"..\\evil.json": b"{}"}), "backslashes"),
    "symlink": (lambda: _zip({"result.json": b"{}"}, symlink="link.json"), "symbolic links are not allowed"),
    "bomb": (lambda: _zip({"result.json": b"{}", "zeros.json": b"\0" * 20_000_000}), "possible zip bomb"),
    "lying-size": (_lying_size, "the zip could not be read"),
    "too-many": (
        lambda: _zip({f"f{i}.txt": b"x" for i in range(bundles.MAX_ENTRIES + 1)}),
        f"at most {bundles.MAX_ENTRIES}",
    ),
    "duplicate": (lambda: _zip([("result.json", b"{}"), ("Result.JSON", b"{}")]), "appears twice"),
    "executable": (lambda: _zip({"result.json": b"{}", "run.sh": b"rm -rf /"}), "'.sh' are not allowed"),
    "html": (lambda: _zip({"result.json": b"{}", "page.html": b"<script>"}), "'.html' are not allowed"),
    "no-result": (lambda: _zip({"loss.svg": b"<svg/>"}), "no result.json"),
    "bad-json": (lambda: _zip({"result.json": b"{not json"}), "not valid JSON"),
    "bad-schema": (lambda: _zip(_bad_schema()), "does not match the result schema"),
    "missing-artifact": (
        lambda: _zip(_without_artifact()),
        "'loss_curves' is listed in result.json at 'loss.svg' but is not in the zip",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_uploads_are_refused_with_the_reason_and_nothing_is_stored(db, settings, owner, case):
    make, reason = CASES[case]
    with pytest.raises(bundles.BundleError) as exc:
        bundles.ingest(db, settings=settings, owner=owner, filename=f"{case}.zip", data=make())
    assert reason in str(exc.value), str(exc.value)
    _nothing_stored(db, settings)


def test_oversized_upload_is_refused_before_it_is_opened(db, settings, owner):
    with pytest.raises(bundles.BundleError, match="at most 20.0 MiB compressed") as exc:
        bundles.ingest(
            db, settings=settings, owner=owner, filename="big.zip", data=b"\0" * (bundles.MAX_UPLOAD_BYTES + 1)
        )
    assert " MB" not in str(exc.value)  # 2**20 bytes is a MiB; a MB is 10**6
    _nothing_stored(db, settings)


def test_upload_through_the_report_page_and_the_api(client, db, settings):
    client.register("ann@example.org")
    bad = _zip({"result.json": b"{}", "../x.json": b"{}"})
    r = client.post(
        f"/lessons/{LESSON}/report/bundles",
        files={"bundle": ("evil.zip", bad, "application/zip")},
        data={"csrf_token": client.csrf(f"/lessons/{LESSON}/report")},
    )
    assert r.status_code == 422 and "Upload refused: entry" in r.text and "could escape the bundle" in r.text
    _nothing_stored(db, settings)
    good = _zip(_real("tp-sweep"))
    r = client.post(
        f"/lessons/{LESSON}/report/bundles",
        files={"bundle": ("tp.zip", good, "application/zip")},
        data={"csrf_token": client.csrf(f"/lessons/{LESSON}/report")},
    )
    assert r.status_code == 200 and "attached it to “TP rank mapping”" in r.text
    assert 'data-testid="state-tp-rank-mapping">Present only as CPU emulation' in r.text

    r = client.client.post("/api/v1/bundles", files={"bundle": ("x.zip", b"nope", "application/zip")})
    assert r.status_code == 403  # no CSRF token
    headers = {"X-CSRF-Token": client.api_token()}
    r = client.client.post("/api/v1/bundles", files={"bundle": ("x.zip", b"nope", "application/zip")}, headers=headers)
    assert r.status_code == 422 and "not a zip archive" in r.json()["detail"]
    r = client.client.post(
        "/api/v1/bundles", files={"bundle": ("env.zip", _zip(_real("env-check")), "application/zip")}, headers=headers
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["lab"] == "env-check" and body["emulated"] is True
    assert client.get(f"/api/v1/bundles/{body['id']}").json()["id"] == body["id"]


def test_someone_elses_bundle_is_invisible(client, make_client, db, settings, owner):
    bundle = bundles.ingest(db, settings=settings, owner=owner, filename="fp8.zip", data=_zip(_real()))
    client.register("eve@example.org")
    assert client.get(f"/bundles/{bundle.id}").status_code == 404
    assert client.get(f"/bundles/{bundle.id}/artifacts/result.json").status_code == 404
    assert client.get(f"/api/v1/bundles/{bundle.id}").status_code == 404
