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


# ---------------------------------------------------------------- tokens end with the account's recovery


def _works(app, token: str) -> int:
    with TestClient(app) as script:
        return script.get("/api/v1/jobs", headers={"Authorization": f"Bearer {token}"}).status_code


def test_a_password_change_revokes_every_token_and_says_so(client, app):
    client.register("ann@example.org")
    token, other = _token(client, "laptop"), _token(client, "cluster")
    assert _works(app, token) == 200
    r = client.post(
        "/account/password",
        {"current_password": "correct horse", "new_password": "battery staple", "confirm_password": "battery staple"},
    )
    assert r.status_code == 200
    assert "2 API tokens revoked with it: make a new one below for your scripts." in r.text
    assert _works(app, token) == 401 and _works(app, other) == 401
    assert client.get("/api/v1/me").status_code == 200  # the browser that changed it stays in
    assert _works(app, _token(client, "new")) == 200  # and can make a new one


def test_logging_out_everywhere_revokes_every_token(client, app):
    client.register("ann@example.org")
    token = _token(client)
    assert client.post("/account/logout-everywhere").status_code == 200
    with TestClient(app) as script:
        r = script.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401 and "log out everywhere" in r.json()["detail"]


def test_a_squatters_token_dies_when_the_owner_recovers_the_account_by_reset_link(client, app, make_client, make_user):
    """The reproduction: someone registered the real owner's email and set up a token; the instructor's reset
    link gives the account back, and the squatter's script must stop reading the owner's jobs."""
    client.register("ann@example.org", password="squatter pw")
    token = _token(client)
    assert _works(app, token) == 200
    make_user("ivy@example.org", roles=("instructor",))
    ivy = make_client()
    ivy.login("ivy@example.org")
    r = ivy.post("/account/reset-links", data={"email": "ann@example.org"})
    path = re.search(r'id="reset-link" class="token">http://127\.0\.0\.1:8000([^<]+)<', r.text).group(1)
    owner = make_client()
    r = owner.post(
        path, data={"new_password": "owner's own", "confirm_password": "owner's own"}, follow_redirects=False
    )
    assert r.status_code == 303
    assert _works(app, token) == 401


def test_an_operators_users_create_password_revokes_the_tokens(client, app, settings, monkeypatch):
    from app.cli.commands import main

    client.register("ann@example.org")
    token = _token(client)
    monkeypatch.setenv("COURSE_ENV", "test")
    monkeypatch.setenv("COURSE_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("DATABASE_URL", settings.db_url)
    assert main(["users", "create", "--email", "ann@example.org", "--password", "operator set"]) == 0
    assert _works(app, token) == 401


def test_a_token_cannot_make_tokens_or_manage_the_account(client, app, db):
    from sqlalchemy import func, select

    from app.core.models import ApiToken

    client.register("ann@example.org")
    token = _token(client)
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(app) as script:
        for method, path, data in (
            ("POST", "/account/tokens", {"name": "minted"}),
            ("POST", "/account/password", {"current_password": "x", "new_password": "y" * 9}),
            ("POST", "/account/name", {"display_name": "Mallory"}),
            ("POST", "/account/logout-everywhere", {}),
            ("GET", "/account", None),
        ):
            r = script.request(method, path, data=data, headers=auth, follow_redirects=False)
            assert r.status_code == 403, (path, r.status_code)
            assert "An API token opens only the JSON API under /api/v1/" in r.text, path
    assert db.scalar(select(func.count()).select_from(ApiToken)) == 1
    assert client.get("/api/v1/me").json()["display_name"] == "Ann"
    assert _works(app, token) == 200  # refused there, still good where it belongs


def test_an_instructors_token_cannot_issue_reset_links_or_act_as_staff(client, app, make_client, make_user):
    client.register("ann@example.org")
    job_id = client.post("/api/v1/jobs", json={"lab": "env-check"}, headers={"X-CSRF-Token": client.api_token()})
    job_id = job_id.json()["id"]
    make_user("ivy@example.org", roles=("instructor",))
    ivy = make_client()
    ivy.login("ivy@example.org")
    ivy_token = _token(ivy)
    auth = {"Authorization": f"Bearer {ivy_token}"}
    with TestClient(app) as script:
        r = script.post("/account/reset-links", data={"email": "ann@example.org"}, headers=auth)
        assert r.status_code == 403 and "reset links" in r.text and "reset/" not in r.text
        assert script.get("/instructor/cluster", headers=auth).status_code == 403
        assert script.get("/classes/default/grader", headers=auth, follow_redirects=False).status_code == 403
        r = script.delete(f"/api/v1/jobs/{job_id}", headers=auth)
        assert r.status_code == 404 and "an API token reaches only its own account's" in r.json()["detail"]
        own = script.post("/api/v1/jobs", json={"lab": "env-check"}, headers=auth)
        assert own.status_code == 201  # her own jobs: a learner's API
        assert script.delete(f"/api/v1/jobs/{own.json()['id']}", headers=auth).json()["status"] == "cancelled"
    assert client.get(f"/api/v1/jobs/{job_id}").json()["status"] == "queued"
    # the same instructor in her browser still can
    assert ivy.client.delete(f"/api/v1/jobs/{job_id}", headers={"X-CSRF-Token": ivy.api_token()}).status_code == 200


def _learners_work(client, db, settings, make_user, make_client):
    """Ann's submitted report (its evidence: finished jobs), an upload of hers, and a grader holding the report:
    (the cited job, the upload's id, the grader's client)."""
    import io
    import zipfile

    from app.core.models import LabReport
    from tests.app import labruns
    from tests.app.reporting import claimed_by_grader, submit_report

    learner = submit_report(client, db, settings)
    report = db.query(LabReport).filter_by(owner_id=learner.id).one()
    job = next(j for j in learner_jobs(db, learner) if j.lab == "overlap-trace")
    root = labruns.bundle("env-check")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in root.iterdir():
            zf.write(f, f.name)
    up = client.client.post(
        "/api/v1/bundles",
        files={"bundle": ("env.zip", buf.getvalue(), "application/zip")},
        headers={"X-CSRF-Token": client.api_token()},
    )
    assert up.status_code == 201, up.text
    grader = claimed_by_grader(make_user, make_client, db, report)
    return job, up.json()["id"], grader


def learner_jobs(db, learner):
    from app.core.models import Job

    return db.query(Job).filter_by(owner_id=learner.id).all()


def test_staff_tokens_read_and_delete_only_their_own_accounts_work(client, app, db, settings, make_user, make_client):
    """An API token acts as the learner it belongs to whatever the account's roles: an instructor's or a grader's
    token reads none of another learner's jobs, results, artifacts or uploads, and deletes none of them; the
    same accounts in their browsers still do their staff work."""
    from app.core.models import Bundle, Job

    job, bundle_id, gina = _learners_work(client, db, settings, make_user, make_client)
    make_user("ivy@example.org", roles=("instructor",))
    ivy = make_client()
    ivy.login("ivy@example.org")
    reads = [
        f"/api/v1/jobs/{job.id}",
        f"/api/v1/jobs/{job.id}/result",
        f"/api/v1/jobs/{job.id}/artifacts/result.json",
        f"/api/v1/jobs/{job.id}/artifacts/trace_windowed",
        f"/api/v1/bundles/{bundle_id}",
        f"/api/v1/bundles/{bundle_id}/artifacts/result.json",
    ]
    for staff, browser_reads in ((ivy, reads), (gina, reads[:4])):
        auth = {"Authorization": f"Bearer {_token(staff)}"}
        with TestClient(app) as script:
            for path in reads:
                r = script.get(path, headers=auth)
                assert r.status_code == 404, (path, r.status_code)
                assert "an API token reaches only its own account's jobs, uploads and reports" in r.json()["detail"]
            assert script.delete(f"/api/v1/bundles/{bundle_id}", headers=auth).status_code == 404
            assert script.delete(f"/api/v1/jobs/{job.id}", headers=auth).status_code == 404
            assert script.get("/api/v1/jobs", headers=auth).json() == []  # a learner's list: their own runs
        for path in browser_reads:  # the browser login is staff: what a token is refused, it may read
            assert staff.get(path).status_code == 200, path
    db.expire_all()
    assert db.get(Bundle, bundle_id) is not None and db.get(Job, job.id).status == "succeeded"
    # the owner's own token reads and deletes her upload
    auth = {"Authorization": f"Bearer {_token(client)}"}
    with TestClient(app) as script:
        assert script.get(f"/api/v1/jobs/{job.id}/result", headers=auth).status_code == 200
        assert script.delete(f"/api/v1/bundles/{bundle_id}", headers=auth).json() == {"deleted": bundle_id}
