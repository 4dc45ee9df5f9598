"""A refused bundle upload names only what the learner sent, never the server's data path."""

from __future__ import annotations

import html
import io
import zipfile

import pytest

from tests.app.reporting import LESSON


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


# Entries that pass the name rules but cannot be unpacked: a file where a folder must go, and the reverse.
CLASHES = {
    "file-then-folder": {"result.json": b"{}", "plot.svg": b"<svg/>", "plot.svg/inner.svg": b"<svg/>"},
    "folder-then-file": {"result.json": b"{}", "d/x.svg": b"<svg/>", "d": b"x"},
}


@pytest.mark.parametrize("case", sorted(CLASHES))
def test_a_refused_upload_shows_no_server_path(client, settings, case):
    client.register("ann@example.org")
    data = _zip(CLASHES[case])
    page = client.post(
        f"/lessons/{LESSON}/report/bundles",
        files={"bundle": ("my-run.zip", data, "application/zip")},
        data={"csrf_token": client.csrf(f"/lessons/{LESSON}/report")},
    )
    api = client.client.post(
        "/api/v1/bundles",
        files={"bundle": ("my-run.zip", data, "application/zip")},
        headers={"X-CSRF-Token": client.api_token()},
    )
    for r, text in ((page, page.text), (api, api.json()["detail"])):
        assert r.status_code == 422, text[-500:]
        assert "Upload refused" in text or "entry" in text
        assert str(settings.data_dir) not in text and ".upload-" not in text and "/tmp" not in text
    assert "entry 'plot.svg/inner.svg'" in api.json()["detail"] or "entry 'd" in api.json()["detail"]


# ---------------------------------------------------------------- result.json and traces built to be slow or to crash


def _stored_zip(entries: dict[str, bytes]) -> bytes:
    """Entries stored, not deflated: a repetitive payload would deflate past the bomb ratio and be refused for that."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _api_upload(client, data: bytes):
    return client.client.post(
        "/api/v1/bundles",
        files={"bundle": ("run.zip", data, "application/zip")},
        headers={"X-CSRF-Token": client.api_token()},
    )


def test_an_unterminated_run_of_escaped_quotes_is_refused_at_once_naming_where(client, db):
    """40 KB of `\\"` after one quote once took seconds of a regex that held the GIL, freezing every request."""
    from app.core.models import Bundle

    client.register("ann@example.org")
    r = _api_upload(client, _stored_zip({"result.json": b'"' + b'\\"' * 20_000}))
    assert r.status_code == 422
    assert "result.json is not valid JSON: the string at line 1, column 1 is never closed" in r.json()["detail"]
    assert db.query(Bundle).count() == 0


def test_a_five_thousand_digit_number_is_a_422_naming_the_limit(client, db):
    from app.core.models import Bundle

    client.register("ann@example.org")
    r = _api_upload(client, _stored_zip({"result.json": b'{"lab": ' + b"9" * 5000 + b"}"}))
    assert r.status_code == 422, r.text[-300:]
    assert "result.json has a number of 5,000 characters" in r.json()["detail"]
    assert "at most 64 are allowed" in r.json()["detail"]
    assert db.query(Bundle).count() == 0


def _bundle_with_trace(trace: bytes) -> bytes:
    from tests.app import labruns

    root = labruns.bundle("overlap-trace")
    entries = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    entries["trace_windowed.json"] = trace
    return _stored_zip(entries)


@pytest.mark.parametrize(
    "trace, words",
    [
        (b"[" * 5000 + b"]" * 5000, "nests objects and arrays more than 16 levels deep"),
        (b'{"traceEvents": [{"ts": ' + b"1" * 5000 + b"}]}", "has a number of 5,000 characters"),
    ],
)
def test_an_uploaded_trace_built_to_crash_the_parser_is_refused_in_words(client, trace, words):
    """The timeline viewer reads an upload's trace: nesting past Python's recursion limit, or a number past its
    digit limit, answered 500 there and at the report's checks."""
    client.register("ann@example.org")
    r = _api_upload(client, _bundle_with_trace(trace))
    assert r.status_code == 201, r.text[-500:]
    view = client.get(f"/bundles/{r.json()['id']}/artifacts/trace_windowed?as=timeline")
    assert view.status_code == 404 and words in html.unescape(view.text), view.text[-300:]
    page = client.get(f"/bundles/{r.json()['id']}")
    assert page.status_code == 200
