"""Personal API tokens: a script submits a job and reads its result with no cookie and no CSRF dance."""

import re

from fastapi.testclient import TestClient


def _token(client, name="script") -> str:
    r = client.post("/account/tokens", {"name": name})
    assert r.status_code == 200
    return re.search(r'id="new-token" class="token">([^<]+)<', r.text).group(1)


def test_script_flow_with_a_token(client, app, worker):
    client.register("ann@example.org")
    token = _token(client)
    assert token.startswith("cst_") and token not in client.get("/account").text  # shown once
    with TestClient(app) as script:  # a fresh client: no session cookie at all
        auth = {"Authorization": f"Bearer {token}"}
        r = script.post("/api/v1/jobs", json={"lab": "env-check"}, headers=auth)
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        worker.run_once()
        assert script.get(f"/api/v1/jobs/{job_id}", headers=auth).json()["status"] == "succeeded"
        assert script.get(f"/api/v1/jobs/{job_id}/result", headers=auth).json()["lab"] == "env-check"
        assert script.get("/api/v1/jobs", headers=auth).status_code == 200
    assert "never" not in client.get("/account").text  # last use recorded


def test_bad_and_revoked_tokens_are_401(client, app):
    client.register("ann@example.org")
    token = _token(client)
    with TestClient(app) as script:
        assert script.get("/api/v1/me", headers={"Authorization": "Bearer cst_nope"}).status_code == 401
        page = client.get("/account").text
        token_id = re.search(r"/account/tokens/(\d+)/revoke", page).group(1)
        assert client.post(f"/account/tokens/{token_id}/revoke").status_code == 200
        r = script.post("/api/v1/jobs", json={"lab": "env-check"}, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 401


def test_a_bad_token_never_falls_back_to_the_cookie(client):
    client.register("ann@example.org")
    r = client.get("/api/v1/me", headers={"Authorization": "Bearer cst_forged"})
    assert r.status_code == 401


def test_token_names_and_ownership(client, make_client):
    client.register("ann@example.org")
    r = client.post("/account/tokens", {"name": "  "})
    assert r.status_code == 400 and "name of 1 to 80 characters" in r.text
    _token(client)
    token_id = re.search(r"/account/tokens/(\d+)/revoke", client.get("/account").text).group(1)
    bob = make_client()
    bob.register("bob@example.org", name="Bob")
    assert bob.post(f"/account/tokens/{token_id}/revoke").status_code == 404
    assert client.client.post("/account/tokens", data={"name": "x"}).status_code == 403  # CSRF still applies to cookies


def test_bundle_upload_with_a_token_as_the_readme_shows(client, app, tmp_path):
    """The curl line of docs/operating.md: multipart field `bundle`, bearer token, no cookie."""
    import io
    import json
    import subprocess
    import sys
    import zipfile

    from tests.conftest import ROOT

    out = tmp_path / "run"
    subprocess.run(
        [sys.executable, "-m", "labs", "run", "env-check", "--out", str(out)], cwd=ROOT, check=True, capture_output=True
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in out.iterdir():
            zf.write(f, f.name)
    client.register("ann@example.org")
    token = _token(client)
    with TestClient(app) as script:
        r = script.post(
            "/api/v1/bundles",
            files={"bundle": ("env.zip", buf.getvalue(), "application/zip")},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 201, r.text
        assert json.loads(r.text)["id"] > 0
