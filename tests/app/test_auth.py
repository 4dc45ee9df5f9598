import pytest
from sqlalchemy import func, select

from app.core.models import User


def test_register_login_logout(client):
    r = client.register("ann@example.org")
    assert r.status_code == 303
    assert "Ann" in client.get("/").text
    r = client.post("/logout", follow_redirects=False)
    assert r.status_code == 303
    assert "Log in" in client.get("/").text
    assert client.login("ann@example.org").status_code == 303
    me = client.get("/api/v1/me").json()  # registering joined the class open to registration, as a learner
    assert me["roles"] == [] and [(c["slug"], c["role"]) for c in me["classes"]] == [("default", "learner")]


def test_duplicate_registration_is_refused_and_changes_nothing(client, db):
    from app.services.accounts.users import count_users

    client.register("ann@example.org")
    client.post("/logout")
    r = client.register("ANN@example.org ", password="another password")
    assert r.status_code == 400
    assert "already exists" in r.text
    assert count_users(db) == 1
    assert client.login("ann@example.org").status_code == 303  # the original password still works


@pytest.mark.parametrize(
    "email,password,field",
    [("not-an-email", "long enough", "email"), ("a@b.org", "short", "password")],
)
def test_bad_registration_names_the_field(client, email, password, field):
    r = client.register(email, password=password)
    assert r.status_code == 400
    assert f'id="{field}-error"' in r.text


def test_registration_names_every_bad_field_at_once_and_creates_nothing(client, db):
    r = client.client.post(
        "/register",
        data={"csrf_token": client.csrf("/register"), "email": "nope", "display_name": " ", "password": "short"},
    )
    assert r.status_code == 400
    for field, words in (
        ("email", "enter an address like name@example.org"),
        ("display_name", "use 1 to 80 characters (you gave 0)"),
        ("password", "(you gave 5)"),
    ):
        assert f'id="{field}-error"' in r.text and words in r.text, field
        assert f'aria-describedby="{field}-error"' in r.text
    assert 'value="nope"' in r.text  # what the learner typed stays (except the password)
    assert db.scalar(select(func.count(User.id))) == 0


def test_wrong_password(client):
    client.register("ann@example.org")
    client.post("/logout")
    r = client.login("ann@example.org", password="wrong password")
    assert r.status_code == 400
    assert "do not match" in r.text
    assert client.get("/api/v1/me").status_code == 401


def test_post_without_csrf_is_refused(client):
    r = client.client.post("/register", data={"email": "x@y.org", "password": "long enough"})
    assert r.status_code == 403
    assert "security token" in r.text
    r = client.client.post("/login", data={"email": "x@y.org", "password": "long enough", "csrf_token": "forged"})
    assert r.status_code == 403


def test_a_refused_token_comes_back_with_the_sessions_current_one(client):
    """A page whose token went stale (a login in another tab starts a new session) gets the current token with
    the 403, so its script can send again without a reload that would lose what was typed (static/requests.js);
    and the error page does not blame a missing role."""
    client.register("ann@example.org")
    current = client.api_token()
    r = client.client.post(
        "/lessons/transformer-scaling/progress/orient/time", data={"seconds": 20, "csrf_token": "stale"}
    )
    assert r.status_code == 403 and "login changed since this page was loaded" in r.text
    assert r.headers["x-csrf-token"] == current
    assert "does not hold the role" not in r.text
    assert "does not hold the role" in client.get("/instructor").text  # which a page for staff does say
    again = client.client.post(
        "/lessons/transformer-scaling/progress/orient/time", data={"seconds": 20}, headers={"X-CSRF-Token": current}
    )
    assert again.status_code == 204


PAUSE = "/lessons/transformer-scaling/pauses/{}"


def test_a_plain_form_refused_for_its_token_is_offered_back_filled_in(client):
    """Without JavaScript nothing renews a stale token, so the refusal page carries the form back: what was
    typed in a box it can edit, the rest as it was sent, the current token, and the same action. Only for a
    post from our own pages (Sec-Fetch-Site), and never for a password."""
    client.register("ann@example.org")
    current = client.api_token()
    page = client.get("/lessons/transformer-scaling/deep-dives").text
    pause_id = page.split('action="/lessons/transformer-scaling/pauses/')[1].split('"')[0]
    answer = "Per-tensor scaling: one outlier sets the scale,\nso <small> values underflow."
    form = {"csrf_token": "stale", "version": "1", "answer": answer}
    same_site = {"sec-fetch-site": "same-origin"}
    r = client.client.post(PAUSE.format(pause_id), data=form, headers=same_site, follow_redirects=False)
    assert r.status_code == 403 and "Not sent: the page was out of date" in r.text
    resend = r.text.split('data-testid="resend"')[1].split("</form>")[0]
    assert f'action="{PAUSE.format(pause_id)}"' in r.text.split('data-testid="resend"')[0].rsplit("<form", 1)[1]
    assert f'name="csrf_token" value="{current}"' in resend
    assert 'name="answer"' in resend and "so &lt;small&gt; values underflow." in resend  # escaped, in a textarea
    assert '<input type="hidden" name="version" value="1">' in resend and "stale" not in resend
    assert client.get("/lessons/transformer-scaling/deep-dives").text.count("Reference answer") == 0  # not saved

    # another site's form, a request from a script, or a form with a password: the refusal alone
    for headers in ({"sec-fetch-site": "cross-site"}, {}, {**same_site, "hx-request": "true"}):
        r = client.client.post(PAUSE.format(pause_id), data=form, headers=headers)
        assert r.status_code == 403 and 'data-testid="resend"' not in r.text and answer not in r.text, headers
    r = client.client.post(
        "/account/password",
        data={"csrf_token": "stale", "current_password": "correct horse", "new_password": "another horse!"},
        headers=same_site,
    )
    assert r.status_code == 403 and 'data-testid="resend"' not in r.text and "another horse" not in r.text


def test_api_post_needs_csrf_header(client):
    client.register("ann@example.org")
    r = client.client.post("/api/v1/jobs", json={"lab": "env-check"})
    assert r.status_code == 403
    r = client.client.post("/api/v1/jobs", json={"lab": "env-check"}, headers={"X-CSRF-Token": client.api_token()})
    assert r.status_code == 201


def test_pages_need_login(client):
    r = client.get("/labs", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login?next=/labs"
    assert client.get("/api/v1/jobs").status_code == 401


def test_login_redirect_stays_on_site(client):
    client.register("ann@example.org")
    client.post("/logout")
    token = client.csrf()
    r = client.client.post(
        "/login",
        data={
            "email": "ann@example.org",
            "password": "correct horse",
            "next": "https://evil.example/",
            "csrf_token": token,
        },
        follow_redirects=False,
    )
    assert r.headers["location"] == "/"


@pytest.mark.parametrize("path", ["/instructor", "/classes/default/grader"])
def test_learner_cannot_open_staff_pages(client, path):
    client.register("ann@example.org")
    r = client.get(path)
    assert r.status_code == 403
    assert "This page is for" in r.text


def test_roles_from_command_line_user(client, make_user):
    make_user("teach@example.org", roles=("instructor", "grader"))
    client.login("teach@example.org")
    assert client.get("/instructor").status_code == 200
    assert client.get("/classes/default/grader").status_code == 200
    me = client.get("/api/v1/me").json()
    assert me["roles"] == ["admin", "author"] and [(c["slug"], c["role"]) for c in me["classes"]] == [
        ("default", "instructor")
    ]


def test_oversized_body_is_refused_before_reading(client):
    r = client.client.post(
        "/register",
        content=b"x",
        headers={"content-length": str(26 * 1024 * 1024), "content-type": "application/x-www-form-urlencoded"},
    )
    # Starlette's body limit answers a declared length over the route's limit itself (tests/app/test_body_limits.py)
    assert r.status_code == 413 and r.text == "Content Too Large"
