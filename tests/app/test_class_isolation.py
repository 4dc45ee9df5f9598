"""Two classes on one server, each with its own instructor, grader and learner: neither class's staff sees the other's
learners, answers, runs, reports or grades on any page, export or API call, and a person with roles in both sees each
in its place.

The walk takes the routes from the app's own routers (app/web/factory.py PAGE_ROUTERS and API_ROUTERS), so a route
added later is walked too: every GET is opened by every staff member with every value of its path parameters (both
classes' slugs, learners, jobs, uploads, reports), and every POST under /classes/{slug}/ is sent across the line
(another class's slug, or this class's slug with another class's report or person) and must be refused, changing
nothing. A path parameter the walk has no value for fails the test: a new kind of route needs one here.
"""

from __future__ import annotations

import itertools
import re

import pytest
from fastapi.routing import APIRoute

from app.core.models import Attempt, Bundle, ClassMember, Grade, GradeHold, GraderAssignment, Job, LabReport, Response
from app.services.classes import registry as class_registry
from app.services.grading import grades as grading
from app.services.learning import lessons as lesson_service
from app.services.learning.tools import TOOLS
from app.web.factory import API_ROUTERS, PAGE_ROUTERS
from labs import catalog
from tests.app.reporting import LESSON, grade_form, submit_report
from tests.conftest import user_with_roles

# What identifies each class's learner and their work: none of it may reach the other class's staff.
SECRETS = {
    "a": ("Alma Aardvark", "alma@a.example.org", "numbers-answer-of-alma"),
    "b": ("Boris Bittern", "boris@b.example.org", "numbers-answer-of-boris"),
}


@pytest.fixture
def two_classes(app, db, settings, make_client):
    """Classes a-101 and b-202: instructor, grader and learner each; each learner's report graded and released."""
    out: dict = {}
    for side, slug in (("a", "a-101"), ("b", "b-202")):
        klass = class_registry.create(db, slug=slug, title=f"Class {side.upper()}", lesson_ids=None)
        instructor = user_with_roles(db, f"inst-{side}@example.org", ())
        grader = user_with_roles(db, f"grad-{side}@example.org", ())
        class_registry.enrol(db, klass=klass, user_id=instructor.id, role="instructor", via="admin")
        class_registry.enrol(db, klass=klass, user_id=grader.id, role="grader", via="admin")
        grading.assign(db, klass=klass, grader=grader, lesson_id=LESSON)
        name, email, answer = SECRETS[side]
        learner_client = make_client()
        learner = submit_report(learner_client, db, settings, email=email, answers={"numbers": answer}, name=name)
        class_registry.join(db, code=klass.invite_code, user_id=learner.id)
        clients = {}
        for who in ("inst", "grad"):
            c = make_client()
            assert c.login(f"{who}-{side}@example.org").status_code == 303
            clients[who] = c
        report = db.query(LabReport).filter_by(owner_id=learner.id).one()
        assert clients["grad"].post(f"/classes/{slug}/grader/reports/{report.id}/claim").status_code == 200
        saved = clients["grad"].post(f"/classes/{slug}/grader/reports/{report.id}/grade", grade_form(feedback=answer))
        assert saved.status_code == 200, saved.text[:400]
        out[side] = {
            "class": klass,
            "slug": slug,
            "learner": learner,
            "report": report,
            "job": db.query(Job).filter_by(owner_id=learner.id).first(),
            "clients": clients,
        }
    # the registrations put both learners in the class open to registration too; its staff are not in this test
    both = user_with_roles(db, "both@example.org", ())
    class_registry.enrol(db, klass=out["a"]["class"], user_id=both.id, role="instructor", via="admin")
    class_registry.enrol(db, klass=out["b"]["class"], user_id=both.id, role="grader", via="admin")
    grading.assign(db, klass=out["b"]["class"], grader=both, lesson_id=LESSON)
    both_client = make_client()
    assert both_client.login("both@example.org").status_code == 303
    out["both"] = both_client
    # a bundle of A's learner, so the upload routes have one to refuse
    out["a"]["bundle"] = db.query(Bundle).filter_by(owner_id=out["a"]["learner"].id).first()
    return out


def _routes(routers):
    for router in routers:
        for route in router.routes:
            if isinstance(route, APIRoute):
                yield route


def _values(db, two: dict) -> dict[str, list]:
    a, b = two["a"], two["b"]
    cur = lesson_service.current(db, lesson_id=LESSON)
    default = class_registry.by_slug(db, slug="default")
    return {
        "slug": [a["slug"], b["slug"], default.slug],
        "report_id": [a["report"].id, b["report"].id],
        "user_id": [a["learner"].id, b["learner"].id],
        "job_id": [a["job"].id, b["job"].id],
        "bundle_id": [x for x in (db.query(Bundle.id).filter(Bundle.owner_id == a["learner"].id).scalar(),) if x]
        or [999_999],
        "lesson_id": [LESSON],
        "part_id": [cur.lesson.parts[0].id],
        "lab": catalog.names()[:1],
        "number": [1],
        "version": [1],
        "slot_id": ["env-capability"],
        "name": ["result.json"],
        "tool": list(TOOLS)[:1],
        "token": ["not-a-token"],
        "ticket": ["not-a-ticket"],
        "code": [a["class"].invite_code],
        "grade_id": [g for (g,) in db.query(Grade.id).limit(2)],
        "token_id": [1],
        "link_id": [1],
        "context_id": [1],
        "question_id": ["q"],
        "pause_id": ["p"],
        "step_id": ["s"],
    }


def _fill(path: str, values: dict) -> list[str]:
    names = re.findall(r"{(\w+)(?::\w+)?}", path)
    missing = [n for n in names if n not in values]
    assert not missing, f"{path}: the walk has no value for {missing}; add one to _values"
    out = []
    for combo in itertools.product(*(values[n] for n in names)):
        filled = path
        for n, v in zip(names, combo):
            filled = re.sub(r"{" + n + r"(?::\w+)?}", str(v), filled)
        out.append(filled)
    return out


def _leaks(text: str, side: str) -> list[str]:
    return [s for s in SECRETS[side] if s in text]


def test_every_staff_route_keeps_each_class_to_itself(two_classes, db):
    two = two_classes
    values = _values(db, two)
    walked = 0
    for route in _routes((*PAGE_ROUTERS, *API_ROUTERS)):
        if "GET" not in route.methods:
            continue
        for path in _fill(route.path, values):
            for side, other in (("a", "b"), ("b", "a")):
                for who, client in two[side]["clients"].items():
                    r = client.get(path, follow_redirects=False)
                    walked += 1
                    assert r.status_code < 500, (who, side, path, r.status_code)
                    leaked = _leaks(r.text, other)
                    assert not leaked, f"{who} of {side} sees {leaked} of class {other} at {path} ({r.status_code})"
                    if f"/classes/{two[other]['slug']}" in path:
                        assert r.status_code in (403, 404), (who, side, path, r.status_code)
    assert walked > 200


def test_every_class_post_across_the_line_is_refused_and_changes_nothing(two_classes, db):
    two = two_classes
    a, b = two["a"], two["b"]
    before = _state(db)
    posts = [r for r in _routes(PAGE_ROUTERS) if "POST" in r.methods and r.path.startswith("/classes/{slug}")]
    assert posts, "the class routes take posts"
    for route in posts:
        for side, other in (("a", "b"), ("b", "a")):
            mine, theirs = two[side], two[other]
            values = {
                "slug": [theirs["slug"]],
                "report_id": [theirs["report"].id],
                "user_id": [theirs["learner"].id],
                "link_id": [1],
            }
            own_slug = {**values, "slug": [mine["slug"]]}
            form = {"lesson_id": LESSON, "action": "release", "email": SECRETS[other][1], "role": "remove",
                    "version": "1", **grade_form()}  # fmt: skip
            for path in _fill(route.path, values):  # another class's address
                for who, client in mine["clients"].items():
                    r = client.post(path, form, follow_redirects=False)
                    assert r.status_code in (403, 404), (who, side, path, r.status_code)
            if set(re.findall(r"{(\w+)}", route.path)) - {"slug"}:  # this class's address, another's report/person
                for path in _fill(route.path, own_slug):
                    for who, client in mine["clients"].items():
                        r = client.post(path, form, follow_redirects=False)
                        assert r.status_code in (403, 404, 409, 422), (who, side, path, r.status_code)
                        assert not _leaks(r.text, other)
    assert _state(db) == before
    assert a["report"].id != b["report"].id


def _state(db) -> dict:
    db.expire_all()
    return {
        "members": sorted((m.class_id, m.user_id, m.role, m.left_at is None) for m in db.query(ClassMember)),
        "claims": sorted((r.id, r.claimed_by_id, r.status) for r in db.query(LabReport)),
        "grades": db.query(Grade).count(),
        "released": sorted((g.id, g.released_at is None) for g in db.query(Grade)),
        "holds": db.query(GradeHold).count(),
        "assignments": db.query(GraderAssignment).count(),
        "answers": db.query(Attempt).count() + db.query(Response).count(),
    }


def test_a_person_with_roles_in_both_sees_each_in_its_place(two_classes):
    two = two_classes
    c = two["both"]
    roster_a = c.get(f"/classes/{two['a']['slug']}/roster").text
    assert SECRETS["a"][0] in roster_a and SECRETS["b"][0] not in roster_a
    queue_b = c.get(f"/classes/{two['b']['slug']}/grader").text
    assert SECRETS["b"][0] in queue_b and SECRETS["a"][0] not in queue_b
    queue_a = c.get(f"/classes/{two['a']['slug']}/grader").text
    assert SECRETS["a"][0] in queue_a and SECRETS["b"][0] not in queue_a
    # a grader in B is not an instructor there: B's roster is not theirs
    assert c.get(f"/classes/{two['b']['slug']}/roster").status_code == 403
    csv_b = c.get(f"/classes/{two['b']['slug']}/grader/export.csv").text
    assert SECRETS["b"][1] in csv_b and SECRETS["a"][1] not in csv_b
    # the switcher on each class's page leads to the other class, to the page their role there allows
    switch = c.get(f"/classes/{two['a']['slug']}/roster").text
    assert f'href="/classes/{two["b"]["slug"]}"' in switch  # a grader in B: its overview, not its roster
    switch = c.get(f"/classes/{two['b']['slug']}/grader").text
    assert f'href="/classes/{two["a"]["slug"]}/grader"' in switch
    classes = c.get("/classes").text
    assert "Class A" in classes and "Class B" in classes
