"""The course against an LMS it did not write: tests/lti_platform/reference.py, built on the lti1p3platform package.

Launch, deep linking, roster (NRPS) and grades (AGS) through the package's own code, two LMS courses mapped to two
classes, and the refusals: a takeover by re-registering the platform, grades for another course, an id_token
without exp or iat, and the azp/aud cases."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
import requests

from app.core.models import ClassMember, CourseClass, LtiAudit, LtiContext, LtiIdentity, LtiLink, LtiPlatform, User
from app.services.lti import registry as lti
from tests.app.test_lti import LESSON, _released_grade, enter, refused_check
from tests.lti_platform.platform import form_fields
from tests.lti_platform.reference import INSTRUCTOR, LEARNER, MENTOR, Reference


@pytest.fixture(scope="module")
def lms():
    ref = Reference.start()
    ref.add_member("r-ann", "Ann of 101", [LEARNER], ("ref-101",))
    ref.add_member("r-bob", "Bob of 202", [LEARNER], ("ref-202",))
    ref.add_member("r-ivy", "Ivy teaches 101", [INSTRUCTOR], ("ref-101",))
    ref.add_member("r-zed", "Zed teaches 202", [INSTRUCTOR], ("ref-202",))
    ref.add_member("r-mo", "Mo the mentor", [MENTOR], ("ref-101",))
    yield ref
    ref.stop()


@pytest.fixture
def registered(lms, db, client):
    form = lms.registration_form()
    lti.register(
        db,
        **{k: v for k, v in form.items() if k != "deployment_ids"},
        deployment_ids=[form["deployment_ids"]],
        via="cli",
    )
    lms.tool_jwks = client.get("/lti/jwks.json").json()
    lms.scores.clear()
    return lms


def launch_form(client, lms: Reference, sub: str, **message) -> dict[str, str]:
    """The package's login initiation at the tool, the tool's redirect to the package's authorization endpoint, and
    the form the package answers with (what the LMS's page posts to the tool)."""
    login = client.get(lms.initiation(sub, **message), follow_redirects=False)
    assert login.status_code == 302, login.text[:400]
    answer = requests.get(login.headers["location"], timeout=10)
    assert answer.status_code == 200, answer.text
    action, fields = form_fields(answer.text)
    assert urlsplit(action).path == "/lti/launch"
    return fields


def launched(make_client, lms: Reference, sub: str, **message):
    c = make_client()
    page = c.post("/lti/launch", data=launch_form(c, lms, sub, **message))
    assert page.status_code == 200, page.text[:400]
    opened, _ = enter(c, page.text)
    assert opened.status_code == 303
    return c


def slug_of(db, context: str) -> str:
    return db.get(CourseClass, db.query(LtiContext).filter_by(context_id=context).one().class_id).slug


def role_of(db, sub: str, context: str) -> str | None:
    db.expire_all()
    uid = db.query(LtiIdentity).filter_by(sub=sub).one().user_id
    cid = db.query(LtiContext).filter_by(context_id=context).one().class_id
    row = db.query(ClassMember).filter_by(class_id=cid, user_id=uid, left_at=None).one_or_none()
    return row.role if row else None


def test_launch_and_deep_linking_through_the_package(registered, make_client, db):
    lms = registered
    ann = launched(make_client, lms, "r-ann", context="ref-101", custom={"target": f"lesson:{LESSON}"})
    assert "Ann of 101" in ann.get(f"/lessons/{LESSON}").text
    assert role_of(db, "r-ann", "ref-101") == "learner"
    assert db.get(User, db.query(LtiIdentity).filter_by(sub="r-ann").one().user_id).roles == set()

    ivy = make_client()
    page = ivy.post("/lti/launch", data=launch_form(ivy, lms, "r-ivy", context="ref-101", kind="deep"))
    assert page.status_code == 200, page.text[:600]
    assert role_of(db, "r-ivy", "ref-101") == "instructor"
    ticket = re.search(r'name="ticket" value="([^"]+)"', page.text).group(1)
    answer = ivy.post("/lti/deep-link", data={"ticket": ticket, "target": f"lab:{LESSON}"})
    assert answer.status_code == 200, answer.text[:600]
    action, fields = form_fields(answer.text)
    assert requests.post(action, data=fields, timeout=10).status_code == 200  # the package verified the answer
    (item,) = lms.deep_link_items
    assert item["type"] == "ltiResourceLink" and item["custom"] == {"target": f"lab:{LESSON}"}
    lms.deep_link_items.clear()

    # a Mentor may read what the link opens, and is nobody's learner
    launched(make_client, lms, "r-mo", context="ref-101", custom={"target": f"lesson:{LESSON}"})
    assert role_of(db, "r-mo", "ref-101") is None


def test_roster_and_grades_through_the_package_reach_the_links_own_course_only(registered, make_client, db):
    lms = registered
    lab = {"target": f"lab:{LESSON}"}
    ivy = launched(make_client, lms, "r-ivy", context="ref-101", custom=lab, link="lab-101", lineitem="C101")
    zed = launched(make_client, lms, "r-zed", context="ref-202", custom=lab, link="lab-202", lineitem="C202")
    launched(make_client, lms, "r-bob", context="ref-202", custom=lab, link="lab-202", lineitem="C202")
    s101, s202 = slug_of(db, "ref-101"), slug_of(db, "ref-202")
    link = {r.resource_link_id: r.id for r in db.query(LtiLink)}

    synced = ivy.post(f"/classes/{s101}/lti/links/{link['lab-101']}/roster")  # Ann arrives by the roster
    assert synced.status_code == 200 and "3 members" in synced.text, synced.text[:400]
    assert role_of(db, "r-ann", "ref-101") == "learner" and role_of(db, "r-mo", "ref-101") is None
    ann_id = db.query(LtiIdentity).filter_by(sub="r-ann").one().user_id
    _released_grade(db, ann_id, 18.0)

    assert "0 sent" in zed.post(f"/classes/{s202}/lti/links/{link['lab-202']}/grades").text
    assert zed.post(f"/classes/{s202}/lti/links/{link['lab-101']}/grades").status_code == 404
    assert "1 sent" in ivy.post(f"/classes/{s101}/lti/links/{link['lab-101']}/grades").text
    assert [(s["lineitem"], s["userId"], s["in_course"]) for s in lms.scores] == [("C101", "r-ann", True)]
    assert lms.scores[0]["scoreGiven"] == 18.0 and lms.scores[0]["comment"] == "Clear evidence."


def test_a_takeover_by_re_registering_the_platform_is_refused(registered, make_client, db):
    lms = registered
    ivy = launched(make_client, lms, "r-ivy", context="ref-101", custom={"target": f"lesson:{LESSON}"})
    attacker = Reference.start()
    try:
        stolen = {**lms.registration_form(), "key_set_url": f"{attacker.base}/jwks"}
        assert ivy.post("/lti/platforms", data=stolen).status_code == 403
        assert db.query(LtiPlatform).one().key_set_url == f"{lms.base}/jwks"
        assert db.query(LtiAudit).count() == 1  # the registration itself; nothing changed it
        # the attacker's package signs an id_token for Ann with its key: refused, nobody logged in
        other = make_client()
        fields = launch_form(other, lms, "r-ann", context="ref-101", custom={"target": f"lesson:{LESSON}"})
        claims = lms.claims_of(fields["id_token"])
        fields["id_token"] = attacker.sign(claims)
        assert refused_check(other.post("/lti/launch", data=fields)) == "signature"
    finally:
        attacker.stop()


def _resigned(client, lms: Reference, change) -> str:
    fields = launch_form(client, lms, "r-ann", context="ref-101", custom={"target": f"lesson:{LESSON}"})
    claims = lms.claims_of(fields["id_token"])
    change(claims)
    fields["id_token"] = lms.sign(claims)
    return client.post("/lti/launch", data=fields)


@pytest.mark.parametrize(
    ("change", "check"),
    [
        (lambda c: (c.pop("exp"), c.pop("iat")), "exp"),  # what the package signs when asked for no expiry
        (lambda c: c.pop("iat"), "iat"),
        (lambda c: c.update(aud=[c["aud"], "another-tool"], azp="another-tool"), "azp"),
        (lambda c: c.update(aud=[c["aud"], "another-tool"]) or c.pop("azp"), "azp"),
    ],
    ids=["no-exp", "no-iat", "azp-names-another", "several-aud-no-azp"],
)
def test_the_packages_tokens_that_break_the_security_framework_are_refused(registered, make_client, change, check):
    assert refused_check(_resigned(make_client(), registered, change)) == check


def test_the_client_id_second_in_aud_with_azp_is_accepted(registered, make_client):
    page = _resigned(make_client(), registered, lambda c: c.update(aud=["another-tool", c["aud"]]))
    assert page.status_code == 200, page.text[:400]
