"""An LMS can be turned against the course's users in none of these ways (each test failed before classes):

- an LMS Instructor is an instructor of their LMS course's class and nothing more: they cannot re-register the
  platform with a key set of their own and then sign in as another of its users;
- grades and practice scores of one LMS course's link go to that course's learners only, never to another
  course's, and never to a Mentor or someone launched without a role;
- a roster sync marks who left the course (their work stays; nothing more is sent for them);
- an id_token without exp or iat, not valid yet (nbf), or whose azp names another client is refused; the client id
  may stand anywhere in `aud`; a launch too large is refused on the LTI page, naming the check.

The platform is the joserfc one (tests/lti_platform/platform.py); tests/app/test_lti_reference.py runs the same
kinds of launch against an LMS built on the lti1p3platform package.
"""

from __future__ import annotations

import re

import pytest

from app.core.models import Attempt, ClassMember, LtiAudit, LtiIdentity, LtiLink, LtiPlatform, User
from app.services.learning import lessons as lesson_service
from tests.app.test_lti import (
    LESSON,
    _released_grade,
    class_role,
    class_slug,
    enter,
    launch_fields,
    refused_check,
    register,
)
from tests.lti_platform.platform import INSTRUCTOR, LEARNER, MEMBERSHIP, Platform, new_key

MENTOR = f"{MEMBERSHIP}#Mentor"


@pytest.fixture(scope="module")
def platform():
    p = Platform.start()
    p.add_member("u-ann", "Ann 101", [LEARNER], contexts=("course-101",))
    p.add_member("u-bob", "Bob 202", [LEARNER], contexts=("course-202",))
    p.add_member("u-ivy", "Ivy teaches 101", [INSTRUCTOR], contexts=("course-101",))
    p.add_member("u-zed", "Zed teaches 202", [INSTRUCTOR], contexts=("course-202",))
    p.add_member("u-mo", "Mo the mentor", [MENTOR], contexts=("course-101",))
    p.add_member("u-nil", "Nil no role", [], contexts=("course-101",))
    yield p
    p.stop()


@pytest.fixture
def lms(platform, db, client):
    register(platform, db, client)
    platform.scores.clear()  # the platform outlives each test's database
    return platform


def launched(make_client, platform, sub: str, context: str, **message):
    """A browser of `sub` that launched a link of `context` and followed its ticket: logged in."""
    c = make_client()
    page = c.post("/lti/launch", data=launch_fields(c, platform, sub, context=context, **message))
    assert page.status_code == 200, page.text[:400]
    opened, _ = enter(c, page.text)
    assert opened.status_code == 303
    return c


def test_an_lms_instructor_is_staff_of_their_course_only_and_cannot_take_over_accounts(lms, make_client, db):
    ivy = launched(make_client, lms, "u-ivy", "course-101", custom={"target": f"lesson:{LESSON}"})
    ann = launched(make_client, lms, "u-ann", "course-101", custom={"target": f"lesson:{LESSON}"})
    assert class_role(db, "u-ivy", "course-101") == "instructor"
    ivy_user = db.get(User, db.query(LtiIdentity).filter_by(sub="u-ivy").one().user_id)
    assert ivy_user.roles == set()  # nothing site-wide
    for path in ("/lti", "/admin", "/instructor", "/instructor/cluster", "/classes/default/roster"):
        assert ivy.get(path, follow_redirects=False).status_code == 403, path

    # the takeover: the same issuer and client id registered again, with a key set the attacker holds
    attacker = Platform.start()
    try:
        forged_reg = {**lms.registration(), "key_set_url": f"{attacker.base}/jwks", "name": "Test LMS"}
        for path in ("/lti/platforms", "/admin/lti/platforms"):
            assert ivy.post(path, data=forged_reg).status_code in (403, 404), path
        row = db.query(LtiPlatform).one()
        db.refresh(row)
        assert row.key_set_url == f"{lms.base}/jwks"
        assert [a.action for a in db.query(LtiAudit).order_by(LtiAudit.id)] == ["registered"]
        # an id_token for Ann signed with the attacker's key (named by the platform's kid) logs nobody in
        other = make_client()
        fields = launch_fields(other, lms, "u-ann", context="course-101", custom={"target": f"lesson:{LESSON}"})
        fields["id_token"] = lms.resign(fields["id_token"], key=attacker.key)
        assert refused_check(other.post("/lti/launch", data=fields)) == "signature"
        assert "Ann 101" not in other.get("/").text
    finally:
        attacker.stop()
    assert "Ann 101" in ann.get("/").text


def test_a_site_admin_changes_a_registration_only_on_purpose_and_every_change_is_recorded(lms, client, make_user, db):
    make_user("ada@example.org", roles=("admin",))
    client.login("ada@example.org")
    moved = {**lms.registration(), "key_set_url": "https://keys.example.edu/jwks"}
    refused = client.post("/lti/platforms", data=moved)
    assert refused.status_code == 409 and "key_set_url" in refused.text and 'id="e-replace"' in refused.text
    assert db.query(LtiPlatform).one().key_set_url == f"{lms.base}/jwks"
    done = client.post("/lti/platforms", data={**moved, "replace": "1"})
    assert done.status_code == 200 and "Registered Test LMS" in done.text
    change = db.query(LtiAudit).order_by(LtiAudit.id.desc()).first()
    assert (change.action, change.by_email, change.via) == ("changed", "ada@example.org", "web")
    assert change.before["key_set_url"] == f"{lms.base}/jwks" and change.after["key_set_url"] == moved["key_set_url"]
    assert moved["key_set_url"] in client.get("/lti").text  # the audit is on the admin's page


def test_grades_and_practice_scores_go_to_the_links_own_course_only(lms, make_client, db):
    lab, lesson = {"target": f"lab:{LESSON}"}, {"target": f"lesson:{LESSON}"}
    ivy = launched(make_client, lms, "u-ivy", "course-101", custom=lab, link="lab-101", lineitem="L101")
    zed = launched(make_client, lms, "u-zed", "course-202", custom=lab, link="lab-202", lineitem="L202")
    launched(make_client, lms, "u-ann", "course-101", custom=lab, link="lab-101", lineitem="L101")
    launched(make_client, lms, "u-bob", "course-202", custom=lab, link="lab-202", lineitem="L202")
    for sub, ctx in (
        ("u-ivy", "course-101"),
        ("u-zed", "course-202"),
        ("u-ann", "course-101"),
        ("u-bob", "course-202"),
    ):
        launched(make_client, lms, sub, ctx, custom=lesson, link=f"lesson-{ctx}", lineitem=f"P{ctx}")
    # Mo (a Mentor) and Nil (no role) launch too: they may read, and they are nobody's learners
    mo = launched(
        make_client, lms, "u-mo", "course-101", custom=lesson, link="lesson-course-101", lineitem="Pcourse-101"
    )
    launched(make_client, lms, "u-nil", "course-101", custom=lesson, link="lesson-course-101", lineitem="Pcourse-101")
    assert class_role(db, "u-mo", "course-101") is None and class_role(db, "u-nil", "course-101") is None
    assert mo.get(f"/lessons/{LESSON}", follow_redirects=False).status_code == 303  # reading is open to them
    slug101, slug202 = class_slug(db, "course-101"), class_slug(db, "course-202")
    assert slug101 != slug202

    def uid(sub: str) -> int:
        return db.query(LtiIdentity).filter_by(sub=sub).one().user_id

    _released_grade(db, uid("u-ann"), 17.0)  # Ann's released grade, and practice of everyone in 101
    checked = next(
        q.id
        for q in lesson_service.current(db, lesson_id=LESSON).lesson.questions.values()
        if q.kind != "free_response"
    )
    for sub in ("u-ann", "u-bob", "u-mo", "u-nil"):
        db.add(Attempt(user_id=uid(sub), lesson_id=LESSON, lesson_version=1, question_id=checked, variant_seed=0,
                       answer="x", status="correct"))  # fmt: skip
    db.commit()
    link = {r.resource_link_id: r.id for r in db.query(LtiLink)}

    # course 202's column receives no grade of course 101's learner, and its instructor cannot reach 101's links
    sent = zed.post(f"/classes/{slug202}/lti/links/{link['lab-202']}/grades")
    assert sent.status_code == 200 and "0 sent" in sent.text
    assert zed.post(f"/classes/{slug202}/lti/links/{link['lab-101']}/grades").status_code == 404
    assert zed.post(f"/classes/{slug101}/lti/links/{link['lab-101']}/grades").status_code == 403
    sent = ivy.post(f"/classes/{slug101}/lti/links/{link['lab-101']}/grades")
    assert sent.status_code == 200 and "1 sent" in sent.text

    # practice: course 101's column gets Ann's score alone (not Bob of 202, not the Mentor, not the role-less)
    assert "1 sent" in ivy.post(f"/classes/{slug101}/lti/links/{link['lesson-course-101']}/practice").text
    assert "1 sent" in zed.post(f"/classes/{slug202}/lti/links/{link['lesson-course-202']}/practice").text
    by_column = {(s["lineitem"], s["userId"]) for s in lms.scores}
    assert by_column == {("L101", "u-ann"), ("Pcourse-101", "u-ann"), ("Pcourse-202", "u-bob")}
    assert all(s["in_course"] for s in lms.scores)

    # each class's roster has its own learners only
    roster101 = ivy.get(f"/classes/{slug101}/roster").text
    assert "Ann 101" in roster101 and "Bob 202" not in roster101 and "Mo the mentor" not in roster101
    assert (
        "Bob 202" in zed.get(f"/classes/{slug202}/roster").text
        and "Ann 101" not in zed.get(f"/classes/{slug202}/roster").text
    )


def test_roster_sync_marks_who_left_and_sends_them_nothing_more(lms, make_client, db):
    lab = {"target": f"lab:{LESSON}"}
    ivy = launched(make_client, lms, "u-ivy", "course-101", custom=lab, link="lab-101", lineitem="L101")
    launched(make_client, lms, "u-ann", "course-101", custom=lab, link="lab-101", lineitem="L101")
    slug = class_slug(db, "course-101")
    link = db.query(LtiLink).filter_by(resource_link_id="lab-101").one()
    ann_id = db.query(LtiIdentity).filter_by(sub="u-ann").one().user_id
    _released_grade(db, ann_id, 15.0)
    lms.members["u-ann"].status = "Deleted"  # Ann dropped the LMS course
    try:
        done = ivy.post(f"/classes/{slug}/lti/links/{link.id}/roster")
        assert done.status_code == 200 and "1 marked as left" in done.text
        db.expire_all()
        row = db.query(ClassMember).filter_by(user_id=ann_id).one()
        assert row.left_at is not None and row.role == "learner"  # marked, not deleted
        roster = ivy.get(f"/classes/{slug}/roster").text
        assert "Ann 101" in roster and 'data-testid="left"' in roster  # her work stays, marked
        assert "0 sent" in ivy.post(f"/classes/{slug}/lti/links/{link.id}/grades").text
        assert not [s for s in lms.scores if s["userId"] == "u-ann"]
    finally:
        lms.members["u-ann"].status = "Active"


@pytest.mark.parametrize(
    ("changes", "drop", "check"),
    [
        ({}, ("exp",), "exp"),
        ({}, ("iat",), "iat"),
        ({"nbf": 4_000_000_000}, (), "nbf"),
        ({"aud": ["course-tool-1", "someone-else"], "azp": "someone-else"}, (), "azp"),
        ({"aud": ["course-tool-1", "someone-else"]}, (), "azp"),
        ({"azp": "someone-else"}, (), "azp"),
    ],
)
def test_an_id_token_the_security_framework_forbids_is_refused(lms, make_client, changes, drop, check):
    c = make_client()
    fields = launch_fields(c, lms, "u-ann", context="course-101", custom={"target": f"lesson:{LESSON}"})
    fields["id_token"] = lms.resign(fields["id_token"], drop=drop, **changes)
    page = c.post("/lti/launch", data=fields)
    assert refused_check(page) == check
    assert "Nothing was changed and no one was logged in" in page.text


def test_the_client_id_may_stand_anywhere_in_aud(lms, make_client):
    c = make_client()
    fields = launch_fields(c, lms, "u-ann", context="course-101", custom={"target": f"lesson:{LESSON}"})
    fields["id_token"] = lms.resign(fields["id_token"], aud=["someone-else", lms.client_id], azp=lms.client_id)
    page = c.post("/lti/launch", data=fields)
    assert page.status_code == 200, page.text[:400]
    opened, _ = enter(c, page.text)
    assert opened.status_code == 303


def test_an_oversized_or_malformed_launch_is_refused_on_the_lti_page(lms, client):
    big = client.client.post(
        "/lti/launch",
        content=b"id_token=" + b"x" * (1024 * 1024) + b"&state=s",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert big.status_code == 413 and refused_check_any(big) == "size"
    assert "Content Too Large" not in big.text
    not_a_form = client.client.post("/lti/launch", content=b"{}", headers={"content-type": "application/json"})
    assert refused_check(not_a_form) == "format"
    no_state = client.client.post("/lti/launch", data={"id_token": "a.b.c"})
    assert refused_check(no_state) == "state"


def refused_check_any(response) -> str:
    return re.search(r'data-check="([^"]+)"', response.text).group(1)


def test_the_same_sub_and_course_on_another_platform_are_another_person_and_class(lms, make_client, db):
    """A second LMS (another issuer) gives its launches roles in its own courses' classes only."""
    launched(make_client, lms, "u-ivy", "course-101", custom={"target": f"lesson:{LESSON}"})
    other = Platform.start()
    other.issuer, other.client_id = "https://other-lms.example.edu", "other-tool"
    other.add_member("u-ivy", "Not Ivy", [INSTRUCTOR], contexts=("course-101",))  # the same sub and course id
    try:
        register(other, db, make_client())
        launched(make_client, other, "u-ivy", "course-101", custom={"target": f"lesson:{LESSON}"})
        identities = db.query(LtiIdentity).filter_by(sub="u-ivy").all()
        assert len({i.user_id for i in identities}) == 2  # (platform, sub) is the identity: two people
        classes = {class_slug_of(db, i.platform_id) for i in identities}
        assert len(classes) == 2  # and course-101 of each platform is its own class
    finally:
        other.stop()


def class_slug_of(db, platform_id: int) -> str:
    from app.core.models import CourseClass, LtiContext

    ctx = db.query(LtiContext).filter_by(platform_id=platform_id, context_id="course-101").one()
    return db.get(CourseClass, ctx.class_id).slug


def test_a_forged_signature_never_reaches_a_new_key(lms, make_client):
    c = make_client()
    fields = launch_fields(c, lms, "u-ann", context="course-101", custom={"target": f"lesson:{LESSON}"})
    fields["id_token"] = lms.resign(fields["id_token"], key=new_key())
    assert refused_check(c.post("/lti/launch", data=fields)) == "signature"
