"""Errors are pages in the site's look (JSON only under /api), the API docs need no network, and an
artifact is reachable by the path result.json lists as well as by its name."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.app.reporting import finished_job
from tests.conftest import ROOT


def test_unknown_address_is_an_html_page_with_the_users_navigation(client):
    client.register("ann@example.org", name="Ann")
    r = client.get("/no/such/page")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert "There is no page at /no/such/page." in r.text
    assert 'href="/labs"' in r.text and "Ann" in r.text  # logged in: the page keeps the user's navigation
    assert 'class="site"' in r.text  # the site's header and footer


def test_api_errors_stay_json(client):
    r = client.get("/api/v1/nothing-here")
    assert r.status_code == 404 and r.json() == {"detail": "There is no page at /api/v1/nothing-here."}
    r = client.get("/api/v1/jobs/1")
    assert r.status_code == 401 and r.json()["detail"] == "Log in first."


def test_forbidden_is_an_html_page_naming_the_role(client):
    client.register("ann@example.org")
    r = client.get("/instructor", headers={"Accept": "application/json"})  # a page address: HTML all the same
    assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
    assert "This page is for authors" in r.text and "Not allowed" in r.text


def test_a_bug_is_a_plain_500_page_without_a_traceback(app):
    def boom():
        raise RuntimeError("secret internals: password=hunter2")

    app.add_api_route("/boom", boom)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/boom")
        assert r.status_code == 500 and r.headers["content-type"].startswith("text/html")
        assert "Something went wrong on our side" in r.text and "hunter2" not in r.text
        assert "Traceback" not in r.text
        app.add_api_route("/api/v1/boom", boom)
        r = c.get("/api/v1/boom")
        assert r.status_code == 500 and r.json()["detail"].startswith("Something went wrong")


def test_api_docs_load_swagger_ui_from_this_server(client):
    r = client.get("/api/v1/docs")
    assert r.status_code == 200
    assets = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in assets
    assert "/static/vendor/swagger-ui/swagger-ui.css" in assets
    assert not [a for a in assets if "//" in a]  # nothing from a CDN
    # started by a static script (the CSP allows no inline one), with the validator off: Swagger UI would
    # otherwise send the spec to validator.swagger.io
    assert "/static/api-docs.js" in assets and "validatorUrl: null" in client.get("/static/api-docs.js").text
    for asset in assets:
        assert client.get(asset).status_code == 200
    vendored = (ROOT / "static" / "vendor" / "swagger-ui" / "swagger-ui-bundle.js").read_text()
    assert "SwaggerUIBundle" in vendored
    assert client.get("/api/v1/openapi.json").json()["paths"]


@pytest.fixture
def job(client, db, settings):
    from app.core.models import User

    client.register("ann@example.org")
    return finished_job(db, settings, db.query(User).one(), "fp8-step")


def test_artifacts_by_name_and_by_the_path_result_json_lists(client, job):
    listed = job.result["artifacts"][0]
    assert listed["name"] != listed["path"]
    by_name = client.get(f"/jobs/{job.id}/artifacts/{listed['name']}")
    by_path = client.get(f"/jobs/{job.id}/artifacts/{listed['path']}")
    assert by_name.status_code == by_path.status_code == 200 and by_name.content == by_path.content
    assert by_path.headers["content-type"].startswith(listed["media_type"])
    api = client.get(f"/api/v1/jobs/{job.id}/artifacts/{listed['path']}")
    assert api.status_code == 200 and api.content == by_name.content


@pytest.mark.parametrize("name", ["unlisted.txt", "sub/unlisted.txt", "params.json"])
def test_only_listed_artifacts_are_served(client, job, settings, name):
    folder = settings.data_dir / job.bundle_dir
    (folder / "sub").mkdir(exist_ok=True)
    for rel in ("unlisted.txt", "sub/unlisted.txt"):
        (folder / rel).write_text("on disk, but not in result.json")
    r = client.get(f"/jobs/{job.id}/artifacts/{name}")
    assert r.status_code == 404 and "no artifact called" in r.text


def test_api_docs_say_how_scripts_authenticate(client):
    """The OpenAPI schema declares the bearer token the API takes, so the docs page offers 'Authorize'; the page
    links back to the course and to where tokens are made."""
    schema = client.get("/api/v1/openapi.json").json()
    assert schema["components"]["securitySchemes"]["token"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API token from your Account page. It acts as you, the learner, whatever your account's "
        "roles: your own jobs, results, artifacts and uploads only (anyone else's answer 404).",
    }
    assert schema["security"] == [{"token": []}]
    assert client.get("/api/v1/openapi.json").json() == schema  # built once, the same on every read
    page = client.get("/api/v1/docs").text
    assert 'href="/"' in page and 'href="/account"' in page and "Authorize" in page
