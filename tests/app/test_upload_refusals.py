"""A refused bundle upload names only what the learner sent, never the server's data path."""

from __future__ import annotations

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
