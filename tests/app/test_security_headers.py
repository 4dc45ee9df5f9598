"""HTML pages send a CSP (framing refused), X-Frame-Options, nosniff and a Referrer-Policy;
every response is nosniff; cookies are HttpOnly and SameSite=Lax always and Secure (with HSTS) in production.
tests/browser/test_csp.py checks in Chromium that the policy breaks nothing."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.web.factory import create_app
from app.web.middleware.headers import csp


def _policy(response) -> str:
    """The response's CSP, which must be ours with a fresh nonce (returned with the nonce blanked)."""
    policy = response.headers["content-security-policy"]
    nonce = re.search(r"'nonce-([A-Za-z0-9_-]{20,})'", policy)
    assert nonce and policy == csp(nonce.group(1)), policy
    return policy.replace(nonce.group(1), "N")


def _cookie(response) -> str:
    return next(v for k, v in response.headers.multi_items() if k == "set-cookie" and v.startswith("course_session="))


@pytest.mark.parametrize("path", ["/login", "/register", "/api/v1/docs"])
def test_html_pages_send_the_policy(client, path):
    r = client.get(path)
    assert r.headers["content-type"].startswith("text/html")
    policy = _policy(r)
    assert "frame-ancestors 'none'" in policy and "script-src 'self';" in policy and "'unsafe-eval'" not in policy
    assert "style-src 'self' 'nonce-N';" in policy and "'unsafe-inline'" not in policy.replace(
        "style-src-attr 'unsafe-inline'", ""
    )
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "same-origin"
    assert "strict-transport-security" not in r.headers  # plain HTTP in tests: no HSTS


def test_logged_in_pages_and_error_pages_send_it_too(client):
    client.register("ann@example.org")
    for path, status in (("/account", 200), ("/", 200), ("/jobs/999999", 404), ("/instructor", 403)):
        r = client.get(path)
        assert r.status_code == status and _policy(r), path


def test_each_page_gets_its_own_nonce_and_the_editor_is_given_it(client, make_user, make_client):
    a, b = client.get("/login"), client.get("/login")
    assert _policy(a) == _policy(b) and a.headers["content-security-policy"] != b.headers["content-security-policy"]
    make_user("prof@example.org", roles=("instructor",))
    prof = make_client()
    prof.login("prof@example.org")
    r = prof.get("/instructor/lessons/transformer-scaling/edit?file=parts/orient.yaml")
    nonce = re.search(r"'nonce-([^']+)'", r.headers["content-security-policy"]).group(1)
    assert f'data-csp-nonce="{nonce}"' in r.text  # static/editor.js hands it to CodeMirror's cspNonce facet


def test_json_and_static_responses_are_nosniff_without_a_page_policy(client):
    for path in ("/api/v1/openapi.json", "/static/app.css", "/api/v1/me"):
        r = client.get(path)
        assert r.headers["x-content-type-options"] == "nosniff", path
        assert "content-security-policy" not in r.headers, path


def test_the_docs_page_loads_only_vendored_files(client):
    html = client.get("/api/v1/docs").text
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in html and "/static/api-docs.js" in html
    assert "cdn" not in html.lower() and "<script>" not in html  # no CDN, no inline script
    assert client.get("/static/vendor/swagger-ui/swagger-ui-bundle.js").status_code == 200


def test_htmx_runs_without_eval_or_injected_styles(client):
    html = client.get("/login").text
    assert '"includeIndicatorCSS":false' in html  # htmx 4 adopts no stylesheet of its own
    # htmx 4 evaluates code only for hx-on handlers and "js:" values (htmx.js #executeJavaScript): none is written
    # anywhere, and the CSP has no 'unsafe-eval' for them either
    templates = Path(__file__).resolve().parents[2] / "templates"
    for f in templates.rglob("*.html"):
        assert not re.search(r"""hx-on[:-]|hx-[a-z-]+=["']js:""", f.read_text()), f
    assert "unsafe-eval" not in client.get("/login").headers["content-security-policy"]


def test_development_cookies_are_httponly_and_lax(client):
    r = client.get("/login")
    cookie = _cookie(r).lower()
    assert "httponly" in cookie and "samesite=lax" in cookie and "secure" not in cookie


def test_production_cookies_are_secure_with_hsts(settings):
    env = {"COURSE_ENV": "production", "COURSE_SECRET_KEY": "s" * 48}
    assert Settings.from_env(env).secure_cookies is True  # on by default in production
    assert Settings.from_env({**env, "COURSE_SECURE_COOKIES": "0"}).secure_cookies is False  # a plain-HTTP trial
    assert Settings.from_env({**env, "COURSE_SECURE_COOKIES": "off"}).secure_cookies is False  # as the other on/off
    assert Settings.from_env({"COURSE_SECURE_COOKIES": "yes"}).secure_cookies is True
    assert Settings.from_env({}).secure_cookies is False  # development on http://127.0.0.1
    app = create_app(dataclasses.replace(settings, environment="production", secure_cookies=True))
    with TestClient(app, base_url="https://testserver") as c:
        r = c.get("/login")
        cookie = _cookie(r).lower()
        assert "; secure" in cookie and "httponly" in cookie and "samesite=lax" in cookie
        assert r.headers["strict-transport-security"].startswith("max-age=")
        assert c.get("/api/v1/openapi.json").headers["strict-transport-security"]


def test_a_bad_secure_cookies_value_names_the_setting():
    from app.core.config import SettingsError

    with pytest.raises(SettingsError, match="COURSE_SECURE_COOKIES: got 'https', expected 1/true/yes/on or 0/false"):
        Settings.from_env({"COURSE_SECURE_COOKIES": "https"})
