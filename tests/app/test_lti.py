"""LTI 1.3 end to end over HTTP: the course (tool) against an independent platform (tests/lti_platform) that
signs with its own key and checks the tool's signatures against the tool's published JWKS.

Launch, deep linking, roster sync and grade passback, and each forged or replayed launch refused with the
failed check named on the page. An LMS course maps to one class, and what the LMS says of a person is a role in
that class only: tests/app/test_lti_classes.py has the takeover, cross-course and launch-check regressions."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
import requests

from app.core.models import (
    Attempt,
    ClassMember,
    GraderAssignment,
    LabReport,
    LtiContext,
    LtiIdentity,
    LtiLink,
    LtiPlatform,
    ReportVersion,
    User,
)
from app.core.models import Grade as GradeRow
from app.services.learning import lessons as lesson_service
from app.services.lti import contexts
from app.services.lti import registry as lti
from app.services.lti import sync as lti_sync
from tests.lti_platform.platform import INSTRUCTOR, LEARNER, SCHOOL, TA, Platform, form_fields, new_key

LESSON = "transformer-scaling"  # a lesson with a lab, so both "lesson:" and "lab:" targets exist


@pytest.fixture(scope="module")
def platform():
    p = Platform.start()
    p.add_member("u-ann", "Ann Learner", [LEARNER])
    p.add_member("u-ivy", "Ivy Instructor", [INSTRUCTOR])
    p.add_member("u-tom", "Tom Assistant", [INSTRUCTOR, TA])
    yield p
    p.stop()


@pytest.fixture
def registered(platform, db, client):
    """The platform registered as an instructor would (CLI here; the browser form has its own test), and the
    tool's JWKS handed to the platform as an LMS admin pastes its URL."""
    register(platform, db, client)
    return platform


def register(platform, db, client) -> None:
    reg = platform.registration()
    lti.register(
        db, **{k: v for k, v in reg.items() if k != "deployment_ids"}, deployment_ids=[reg["deployment_ids"]], via="cli"
    )
    platform.tool_jwks = client.get("/lti/jwks.json").json()


def class_role(db, sub: str, context: str = "course-42") -> str | None:
    """The class role of the LMS user `sub` in the class of LMS course `context`."""
    db.expire_all()
    user_id = db.query(LtiIdentity).filter_by(sub=sub).one().user_id
    ctx = db.query(LtiContext).filter_by(context_id=context).one()
    row = db.query(ClassMember).filter_by(class_id=ctx.class_id, user_id=user_id, left_at=None).one_or_none()
    return row.role if row else None


def class_slug(db, context: str = "course-42") -> str:
    from app.core.models import CourseClass

    return db.get(CourseClass, db.query(LtiContext).filter_by(context_id=context).one().class_id).slug


def launch_fields(client, platform, sub: str, **message) -> dict[str, str]:
    """Login initiation at the tool, then the platform's authorization over HTTP: the form the LMS posts."""
    login = client.get("/lti/login", params=platform.login_params(sub, **message), follow_redirects=False)
    assert login.status_code == 302, login.text
    auth_url = login.headers["location"]
    assert auth_url.startswith(platform.base + "/auth?")
    answer = requests.get(auth_url, timeout=10)
    assert answer.status_code == 200, answer.text
    action, fields = form_fields(answer.text)
    assert urlsplit(action).path == "/lti/launch"
    return fields


def enter(client, launch_page: str):
    ticket = re.search(r'href="(/lti/enter/[^"]+)"', launch_page).group(1)
    return client.get(ticket, follow_redirects=False), ticket


def refused_check(response) -> str:
    assert response.status_code in (400, 403), response.text[:400]
    return re.search(r'data-check="([^"]+)"', response.text).group(1)


def test_launch_logs_in_by_sub_maps_roles_and_refuses_forgeries(registered, client, make_client, db):
    platform = registered
    target = {"target": f"lesson:{LESSON}"}
    fields = launch_fields(client, platform, "u-ann", custom=target)
    page = client.post("/lti/launch", data=fields)
    assert page.status_code == 200, page.text[:600]
    # the launch page may be framed by the LMS, and by nobody else
    ancestors = re.search(r"frame-ancestors ([^;]+)", page.headers["content-security-policy"]).group(1)
    assert sorted(ancestors.split()) == sorted(["'self'", platform.base, platform.issuer, SCHOOL])
    opened, ticket = enter(client, page.text)
    assert opened.status_code == 303 and opened.headers["location"] == f"/lessons/{LESSON}"
    assert "Ann Learner" in client.get(f"/lessons/{LESSON}").text  # logged in as the LMS's user
    assert client.get(ticket, follow_redirects=False).status_code == 400  # the ticket works once

    # replayed: the same state and id_token again
    assert refused_check(client.post("/lti/launch", data=fields)) == "state"

    ann = db.query(LtiIdentity).filter_by(sub="u-ann").one()
    again = make_client()
    opened, _ = enter(
        again, again.post("/lti/launch", data=launch_fields(again, platform, "u-ann", custom=target)).text
    )
    assert opened.status_code == 303
    assert db.query(LtiIdentity).filter_by(sub="u-ann").one().user_id == ann.user_id  # matched, not a new user
    assert db.get(User, ann.user_id).roles == set()  # no site role: a learner of the LMS course's class only
    assert class_role(db, "u-ann") == "learner"

    def forged(**changes):
        fresh = launch_fields(client, platform, "u-ann", custom=target)
        key = changes.pop("key", None)
        fresh["id_token"] = platform.resign(fresh["id_token"], key=key, **changes)
        return refused_check(client.post("/lti/launch", data=fresh))

    assert forged(key=new_key()) == "signature"
    assert forged(aud="someone-elses-client") == "audience"
    assert forged(nonce="a-nonce-never-issued") == "nonce"
    assert forged(lti_deployment_id="dep-unknown") == "deployment"
    assert forged(exp=1_000_000_000) == "expired"
    page = client.post("/lti/launch", data={"id_token": fields["id_token"], "state": "state-made-up"})
    assert refused_check(page) == "state" and "unknown, already used or expired" in page.text

    # roles in the class: Instructor -> instructor; a TA (sent Instructor too) -> grader of the launched lesson only
    for sub, role in (("u-ivy", "instructor"), ("u-tom", "grader")):
        c = make_client()
        enter(c, c.post("/lti/launch", data=launch_fields(c, platform, sub, custom=target)).text)
        assert class_role(db, sub) == role
        assert db.get(User, db.query(LtiIdentity).filter_by(sub=sub).one().user_id).roles == set()
    tom = db.query(LtiIdentity).filter_by(sub="u-tom").one()
    assert db.query(GraderAssignment).filter_by(user_id=tom.user_id, lesson_id=LESSON).count() == 1


def test_deep_linking_places_a_lab_that_then_launches(registered, client, make_client, db):
    platform = registered
    page = client.post("/lti/launch", data=launch_fields(client, platform, "u-ivy", kind="deep"))
    assert page.status_code == 200, page.text[:600]
    ticket = re.search(r'name="ticket" value="([^"]+)"', page.text).group(1)
    assert f'value="lab:{LESSON}"' in page.text
    answer = client.post("/lti/deep-link", data={"ticket": ticket, "target": f"lab:{LESSON}"})
    assert answer.status_code == 200, answer.text[:600]
    action, fields = form_fields(answer.text)
    assert action == f"{platform.base}/deep_link_return"
    assert f"form-action 'self' {platform.base}" in answer.headers["content-security-policy"]
    # the platform checks the answer's signature against the tool's JWKS, its audience and its data
    assert requests.post(action, data=fields, timeout=10).status_code == 200
    (item,) = platform.deep_link_items
    assert item["custom"] == {"target": f"lab:{LESSON}"} and item["lineItem"]["scoreMaximum"] == 100
    assert client.post("/lti/deep-link", data={"ticket": ticket, "target": f"lab:{LESSON}"}).status_code == 400

    # a learner's launch of the placed link opens the lab report
    learner = make_client()
    fields = launch_fields(learner, platform, "u-ann", custom=item["custom"], link="placed-link")
    opened, _ = enter(learner, learner.post("/lti/launch", data=fields).text)
    assert opened.headers["location"] == f"/lessons/{LESSON}/report"

    # a learner may not choose what a link opens
    assert (
        refused_check(learner.post("/lti/launch", data=launch_fields(learner, platform, "u-ann", kind="deep")))
        == "role"
    )


def _released_grade(db, user_id: int, total: float) -> GradeRow:
    report = LabReport(owner_id=user_id, lesson_id=LESSON, status="graded")
    db.add(report)
    db.flush()
    version = ReportVersion(report_id=report.id, number=1, lesson_version=1, evidence={}, answers={})
    db.add(version)
    db.flush()
    grade = GradeRow(
        version_id=version.id,
        revision=1,
        rubric_version=1,
        rubric_hash="x" * 64,
        scores={},
        total=total,
        max_total=20.0,
        feedback="Clear evidence.",
        released_at=lti.utcnow(),
    )
    db.add(grade)
    db.commit()
    return grade


def test_roster_sync_and_grade_passback(registered, client, make_client, db, settings):
    platform = registered
    platform.add_member("u-new", "Nia New", [LEARNER])
    custom = {"target": f"lab:{LESSON}"}
    ann = make_client()
    enter(ann, ann.post("/lti/launch", data=launch_fields(ann, platform, "u-ann", custom=custom, link="lab-link")).text)
    enter(
        client,
        client.post("/lti/launch", data=launch_fields(client, platform, "u-ivy", custom=custom, link="lab-link")).text,
    )
    link = db.query(LtiLink).filter_by(resource_link_id="lab-link").one()
    assert link.lineitem_url == f"{platform.base}/lineitems/1"
    base = f"/classes/{class_slug(db)}/lti/links/{link.id}"

    done = client.post(f"{base}/roster")  # the class instructor's button, with the CSRF token
    assert done.status_code == 200, done.text[:600]
    assert "4 members, 2 new accounts" in done.text  # Tom and Nia; Ann and Ivy launched before
    nia = db.get(User, db.query(LtiIdentity).filter_by(sub="u-new").one().user_id)
    assert nia.display_name == "Nia New" and nia.roles == set() and class_role(db, "u-new") == "learner"
    assert client.client.post(f"{base}/roster").status_code == 403  # no CSRF token: refused

    ann_id = db.query(LtiIdentity).filter_by(sub="u-ann").one().user_id
    first = _released_grade(db, ann_id, 17.0)
    sent = client.post(f"{base}/grades")
    assert sent.status_code == 200 and "1 sent, 0 sent before" in sent.text
    (score,) = platform.scores
    assert score["userId"] == "u-ann" and score["lineitem"] == "1" and score["in_course"]
    assert (score["scoreGiven"], score["scoreMaximum"], score["gradingProgress"]) == (17.0, 20.0, "FullyGraded")
    assert "0 sent, 1 sent before" in client.post(f"{base}/grades").text  # each grade once
    klass = contexts.class_of(db, db.query(LtiContext).filter_by(context_id="course-42").one())

    # a regrade, released: what the grade release calls sends it, and an LMS that is down is reported, not raised
    db.add(GradeRow(version_id=first.version_id, revision=2, rubric_version=1, rubric_hash="x" * 64, scores={},
                    total=19.0, max_total=20.0, released_at=lti.utcnow()))  # fmt: skip
    db.commit()
    key = lti.tool_key(settings.data_dir)
    assert lti_sync.send_lesson_grades(db, klass=klass, lesson_id=LESSON, key=key) == [
        "GPU Systems, fall term: 1 grades sent to the LMS"
    ]
    assert platform.scores[-1]["scoreGiven"] == 19.0
    db.add(GradeRow(version_id=first.version_id, revision=3, rubric_version=1, rubric_hash="x" * 64, scores={},
                    total=20.0, max_total=20.0, released_at=lti.utcnow()))  # fmt: skip
    db.commit()
    platform.down = True
    try:
        (said,) = lti_sync.send_lesson_grades(db, klass=klass, lesson_id=LESSON, key=key)
    finally:
        platform.down = False
    assert (
        said.startswith("GPU Systems, fall term: The LMS's gradebook refused a score after 0 were sent")
        and "503" in said
    )


def test_practice_scores_go_to_a_lesson_links_column(registered, client, make_client, db):
    platform = registered
    custom = {"target": f"lesson:{LESSON}"}
    ann = make_client()
    enter(
        ann,
        ann.post(
            "/lti/launch", data=launch_fields(ann, platform, "u-ann", custom=custom, link="l-link", lineitem="7")
        ).text,
    )
    enter(client, client.post("/lti/launch", data=launch_fields(client, platform, "u-ivy", custom=custom, link="l-link", lineitem="7")).text)  # fmt: skip
    lesson = lesson_service.current(db, lesson_id=LESSON).lesson
    checked = [q.id for q in lesson.questions.values() if q.kind != "free_response"]
    ann_id = db.query(LtiIdentity).filter_by(sub="u-ann").one().user_id
    for status in ("incorrect", "correct", "correct"):  # one question right (twice), after a wrong try
        db.add(Attempt(user_id=ann_id, lesson_id=LESSON, lesson_version=1, question_id=checked[0], variant_seed=0,
                       answer="x", status=status))  # fmt: skip
    db.commit()
    link = db.query(LtiLink).filter_by(resource_link_id="l-link").one()
    done = client.post(f"/classes/{class_slug(db)}/lti/links/{link.id}/practice")
    assert done.status_code == 200 and "1 sent" in done.text  # Ann; Ivy is staff
    (score,) = [s for s in platform.scores if s["lineitem"] == "7"]
    assert (score["userId"], score["scoreGiven"], score["scoreMaximum"]) == ("u-ann", 1.0, float(len(checked)))


def test_registration_form_names_bad_fields_and_jwks_is_stable(client, make_user, db, settings):
    make_user("ada@example.org", roles=("admin",))  # a site admin registers platforms; nobody else may
    client.login("ada@example.org")
    bad = client.post("/lti/platforms", data={"name": "LMS", "issuer": "https://lms.example.edu", "client_id": "c1",
                                              "deployment_ids": "d1", "auth_login_url": "http://lms.example.edu/auth",
                                              "auth_token_url": "https://lms.example.edu/token",
                                              "key_set_url": "https://lms.example.edu/jwks"})  # fmt: skip
    assert bad.status_code == 422
    assert "http:// is allowed for localhost only" in bad.text and 'id="e-auth_login_url"' in bad.text
    good = client.post("/lti/platforms", data={"name": "LMS", "issuer": "https://lms.example.edu", "client_id": "c1",
                                               "deployment_ids": "d1, d2", "auth_login_url": "https://lms.example.edu/auth",
                                               "auth_token_url": "https://lms.example.edu/token",
                                               "key_set_url": "https://lms.example.edu/jwks"})  # fmt: skip
    assert good.status_code == 200 and "Registered LMS" in good.text
    row = db.query(LtiPlatform).one()
    assert sorted(d.deployment_id for d in row.deployments) == ["d1", "d2"]
    keys = client.get("/lti/jwks.json").json()["keys"]
    assert keys == client.get("/lti/jwks.json").json()["keys"] and keys[0]["alg"] == "RS256"
    key_file = settings.data_dir / lti.KEY_FILE
    assert key_file.stat().st_mode & 0o077 == 0  # the private key is readable by the server's user alone
    assert "PRIVATE" not in client.get("/lti").text


def test_cli_registers_a_platform(app, settings, monkeypatch, capsys):  # `app`: a migrated database to start from
    from app.cli.commands import main

    monkeypatch.setenv("COURSE_ENV", "test")
    monkeypatch.setenv("COURSE_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("DATABASE_URL", settings.db_url)
    args = ["lti", "add-platform", "--name", "Moodle", "--issuer", "https://moodle.example.edu", "--client-id", "abc",
            "--deployment-id", "1", "--auth-login-url", "https://moodle.example.edu/mod/lti/auth.php",
            "--auth-token-url", "https://moodle.example.edu/mod/lti/token.php",
            "--key-set-url", "https://moodle.example.edu/mod/lti/certs.php"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Registered Moodle" in out and "/lti/jwks.json" in out
    assert main([*args[:-2], "--key-set-url", "ftp://moodle.example.edu/certs"]) == 2
    assert "--key-set-url: got 'ftp://moodle.example.edu/certs'" in capsys.readouterr().err
    assert main(["lti", "list"]) == 0
    assert "issuer https://moodle.example.edu  client id abc  deployments 1" in capsys.readouterr().out
    # changing where the course fetches the LMS's keys needs --replace, and is recorded with the CLI as its source
    moved = [*args[:-2], "--key-set-url", "https://moodle.example.edu/keys2"]
    assert main(moved) == 2 and "--replace:" in capsys.readouterr().err
    assert main([*moved, "--replace"]) == 0


@pytest.mark.parametrize(
    "change, check, words",
    [
        ({"iss": None}, "iss", "the login initiation has no iss parameter"),
        ({"login_hint": None}, "login_hint", "the login initiation has no login_hint parameter"),
        (
            {"iss": "https://unknown.example.org"},
            "registration",
            "no platform is registered with issuer 'https://unknown.example.org'",
        ),
        ({"client_id": "not-the-client"}, "registration", "and client id 'not-the-client'"),
    ],
)
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_login_initiation_the_tool_cannot_place_is_a_4xx_naming_the_check(
    registered, client, method, change, check, words
):
    """No or an unknown iss, a wrong client id or no login hint raised pylti1p3's OIDCException, which the login
    did not catch: a 500. Now each is the LTI refusal page, naming the failed check, and nothing is stored."""
    import html

    params = {k: v for k, v in {**registered.login_params("u-ann"), **change}.items() if v is not None}
    if method == "GET":
        r = client.get("/lti/login", params=params, follow_redirects=False)
    else:
        r = client.client.post("/lti/login", data=params, follow_redirects=False)
    assert r.status_code == 400 and refused_check(r) == check, r.text[-600:]
    assert words in html.unescape(r.text)


def test_the_lti_urls_never_take_the_requests_host_header(registered, client, make_user, make_client):
    """With COURSE_PUBLIC_URL unset the tool's URLs (its page, the launch URL handed to the LMS at login) were
    built from the request's Host header, which the client chooses."""
    from urllib.parse import parse_qs

    evil = {"Host": "evil.example:666"}
    login = client.get("/lti/login", params=registered.login_params("u-ann"), headers=evil, follow_redirects=False)
    assert login.status_code == 302
    redirect_uri = parse_qs(urlsplit(login.headers["location"]).query)["redirect_uri"][0]
    assert redirect_uri == "http://127.0.0.1:8000/lti/launch"  # Settings.site_url: no COURSE_PUBLIC_URL in tests
    make_user("ivy@example.org", roles=("admin",))  # the registrations page is the site admin's
    ivy = make_client()
    ivy.login("ivy@example.org")
    page = ivy.get("/lti", headers=evil).text
    assert "http://127.0.0.1:8000/lti/jwks.json" in page and "evil.example" not in page
