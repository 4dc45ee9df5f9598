"""The instructor's class views: roster (sort, filter, CSV, stuck), one learner's page, question and lab statistics.

Every figure is checked against answers, time and runs this module makes through the services learners use.
"""

from __future__ import annotations

import csv
import io
import re

import pytest

from app.core.models import PartProgress
from app.services.classes import roster
from app.services.classes import stats as class_stats
from app.services.jobs import lifecycle as jobs
from app.services.learning import answering
from app.services.learning import lessons as lesson_service
from app.services.learning import progress as learning
from tests.app import labruns
from tests.app.reporting import LESSON, LOCAL, failed_job, finished_job
from tests.conftest import default_scope

SCALE_Q = "fp8-scale-from-amax"  # parameterized numeric; its generator names known mistakes
CHOICE_Q = "verbs-in-order"  # single choice, A is right
WRITTEN_Q = "async-consumer"  # free response: a try, never right or wrong


def _answer(db, user, qid: str, text) -> str:
    current = lesson_service.current(db, lesson_id=LESSON)
    mine = answering.variant(current.lesson, user=user, question_id=qid)
    answer = text(mine) if callable(text) else text
    done = answering.answer_question(
        db,
        user=user,
        lesson=current.lesson,
        current_version=current.version,
        question_id=qid,
        version=current.version,
        answer=answer,
        seed=learning.variant_seed(user.id, qid),
    )
    assert done.error is None, done.error
    return done.feedback.status


def _times(factor):
    return lambda v: repr(v.answer * factor)


def _inverse(v):
    return repr(1 / v.answer)  # the generator's named mistake: amax / fp8_max


@pytest.fixture
def klass(app, db, settings, make_user):
    """Five learners: ann right at once; bob, cat, dan answer 2x first (no rule names it), dan three times and never
    right (stuck); eve gives the inverse (a named mistake), then right. ann is long on part 1 without finishing."""
    ann, bob, cat, dan, eve = (make_user(f"{n}@example.org") for n in ("ann", "bob", "cat", "dan", "eve"))
    ivy = make_user("ivy@example.org", roles=("instructor",))
    assert _answer(db, ann, SCALE_Q, _times(1)) == "correct"
    for u in (bob, cat):
        assert _answer(db, u, SCALE_Q, _times(2)) == "incorrect"
        assert _answer(db, u, SCALE_Q, _times(1)) == "correct"
    for _ in range(3):
        assert _answer(db, dan, SCALE_Q, _times(2)) == "incorrect"
    assert _answer(db, eve, SCALE_Q, _inverse) == "incorrect"
    assert _answer(db, eve, SCALE_Q, _times(1)) == "correct"
    for u, opt in ((ann, "A"), (bob, "B"), (cat, "B"), (dan, "C")):
        _answer(db, u, CHOICE_Q, opt)
    assert _answer(db, eve, WRITTEN_Q, "It must wait for the data it reads.") == "answered"
    lesson = lesson_service.current(db, lesson_id=LESSON).lesson
    first, second = lesson.parts[0], lesson.parts[1]
    learning.visit(db, user=ann, lesson_id=LESSON, part_id=first.id)
    row = db.query(PartProgress).filter_by(user_id=ann.id, part_id=first.id).one()
    row.seconds_spent = first.minutes * 60 * 2 + 60  # past twice its planned minutes
    db.commit()
    for u in (bob, cat):
        learning.set_done(db, user=u, lesson_id=LESSON, part_id=first.id)
    learning.set_done(db, user=bob, lesson_id=LESSON, part_id=second.id)
    finished_job(db, settings, bob, "overlap-trace")
    finished_job(db, settings, cat, "overlap-trace")
    failed_job(db, bob, "overlap-trace")
    return {"ann": ann, "bob": bob, "cat": cat, "dan": dan, "eve": eve, "ivy": ivy, "lesson": lesson}


@pytest.fixture
def ivy(klass, make_client):
    c = make_client()
    c.login("ivy@example.org")
    return c


def test_question_and_lab_statistics_match_what_the_tests_made(db, klass, make_user, settings, ivy):
    stats = {
        s.id: s for s in class_stats.question_stats(db, scope=default_scope(db, klass["ivy"]), lesson=klass["lesson"])
    }
    scale = stats[SCALE_Q]
    assert scale.parameterized
    assert (scale.tries, scale.learners, scale.first_try_right) == (10, 5, 1)
    assert scale.mean_tries == pytest.approx(10 / 5)
    # 2x the answer: bob, cat and dan (3 learners, 5 tries); no rule names it
    top = scale.wrong[0]
    assert (top.ratio, top.learners, top.caught) == (2.0, 3, False)
    assert top.shown.startswith("2× the answer")
    # eve's inverse is one learner: below the pattern threshold while another pattern exists
    assert all(w.learners >= class_stats.MIN_GROUP for w in scale.wrong)
    # tries as answer / right answer: the inverse (below 1), four right (1), five at 2x
    assert scale.spread is not None and scale.spread[1:] == pytest.approx((1.5, 2.0))
    choice = stats[CHOICE_Q]
    assert (choice.tries, choice.learners, choice.first_try_right) == (4, 4, 1)
    assert [(w.shown, w.learners) for w in choice.wrong] == [("B", 2), ("C", 1)]
    written = stats[WRITTEN_Q]
    assert (written.tries, written.learners, written.first_try_right, written.wrong) == (1, 1, None, [])
    # a second learner gives the generator's named mistake (her own variant's inverse): a pattern, and caught
    _answer(db, make_user("fay@example.org"), SCALE_Q, _inverse)
    scale = next(
        s
        for s in class_stats.question_stats(db, scope=default_scope(db, klass["ivy"]), lesson=klass["lesson"])
        if s.id == SCALE_Q
    )
    inverse = [w for w in scale.wrong if w.caught]
    assert len(inverse) == 1 and inverse[0].learners == 2, scale.wrong  # eve and fay, each with her own variant

    # labs across the class: one run lost to infrastructure on both of its attempts
    job = jobs.create_job(
        db, owner=klass["eve"], lab="overlap-trace", params=labruns.TINY["overlap-trace"], backend="cpu", host=LOCAL
    )
    for _ in range(job.max_attempts):
        assert jobs.claim_next(db, worker_id="w", lease_s=60).id == job.id
        jobs.lost(db, job_id=job.id, worker_id="w", reason="node died")
    db.refresh(job)
    assert job.status == "failed"
    stats = {s.lab: s for s in class_stats.lab_stats(db, scope=default_scope(db, klass["ivy"]), labs_offered=None)}[
        "overlap-trace"
    ]
    assert (stats.runs, stats.succeeded, stats.failed_run, stats.failed_infra) == (4, 2, 1, 1)
    assert stats.median_s is not None
    ratio = next(h for h in stats.headlines if h.label == "windowed: overlap ratio (mean over ranks)")
    golden = labruns.result("overlap-trace")["results"]["summary"]
    expected = next(i["value"] for i in golden if i["label"] == ratio.label)
    assert ratio.values == [expected, expected]
    page = ivy.get("/classes/default/labs").text
    assert 'data-lab="overlap-trace"' in page and "windowed: overlap ratio" in page


def test_roster_sorts_filters_exports_and_opens_a_learner(ivy, klass, db):
    page = ivy.get("/classes/default/roster?sort=right&desc=1")
    assert page.status_code == 200
    order = re.findall(r'<tr data-learner="(\d+)"', page.text)
    ids = {k: v.id for k, v in klass.items() if k != "lesson"}
    # right answers: bob 1 (scale) , cat 1, eve 1, ann 2 (scale + choice), dan 0
    assert order[0] == str(ids["ann"]) and order[-1] == str(ids["dan"])
    assert 'aria-sort="descending"' in page.text
    stuck = ivy.get("/classes/default/roster?stuck=1").text
    shown = set(re.findall(r'<tr data-learner="(\d+)"', stuck))
    assert shown == {str(ids["ann"]), str(ids["dan"])}
    assert "wrong tries at “fp8-scale-from-amax”" in stuck and "not finished" in stuck
    one = ivy.get("/classes/default/roster?q=CAT").text
    assert re.findall(r'<tr data-learner="(\d+)"', one) == [str(ids["cat"])]
    bad = ivy.get("/classes/default/roster?sort=password")
    assert bad.status_code == 422 and "sort:" in bad.text and "name, email" in bad.text

    # CSV: the same figures, and a name a spreadsheet would run as a formula is defused
    bob = klass["bob"]
    bob.display_name = "=HYPERLINK(1)"
    db.commit()
    r = ivy.get(f"/classes/default/roster.csv?lesson={LESSON}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = {row["email"]: row for row in csv.DictReader(io.StringIO(r.text))}
    assert set(rows) == {f"{n}@example.org" for n in ("ann", "bob", "cat", "dan", "eve")}
    b = rows["bob@example.org"]
    total = len(klass["lesson"].parts)
    assert (b["parts_done"], b["parts_total"]) == ("2", str(total))
    assert (b["questions_right"], b["questions_attempted"], b["wrong_tries"]) == ("1", "2", "2")
    assert (b["lab_runs"], b["lab_runs_failed"]) == ("2", "1")
    assert b["name"] == "'=HYPERLINK(1)"
    assert rows["dan@example.org"]["wrong_tries"] == "4" and rows["dan@example.org"]["stuck"]

    # one learner's page: their tries, and a reset link issued from here (a CSRF-carrying POST)
    page = ivy.get(f"/classes/default/learners/{klass['dan'].id}")
    assert page.status_code == 200
    assert page.text.count("fp8-scale-from-amax") >= 3 and 'action="/account/reset-links"' in page.text
    assert 'value="dan@example.org"' in page.text and 'name="csrf_token"' in page.text
    issued = ivy.post("/account/reset-links", {"email": "dan@example.org"})
    assert issued.status_code == 200 and "/reset/" in issued.text
    assert ivy.get("/classes/default/learners/999999").status_code == 404

    # the question page: a frequent wrong answer links to a draft rule opened in the editor
    page = ivy.get(f"/classes/default/questions?lesson={LESSON}")
    assert page.status_code == 200
    link = re.search(r'href="(/instructor/lessons/[^"]+mistake=[^"]+)" data-testid="draft-rule"', page.text)
    assert link and f"file=questions/{SCALE_Q}.yaml" in link.group(1)
    editor = ivy.get(link.group(1).replace("&amp;", "&"))
    assert editor.status_code == 200
    assert (
        "  - times_answer: 2\n    feedback: &#34;&#34;" in editor.text
        and "learners answered 2× their own" in editor.text
    )
    assert (
        'data-testid="drafted-rule"' in editor.text and "mistakes[0].feedback" in editor.text
    )  # what is left to write
    assert ivy.get("/classes/default/questions?lesson=nope").status_code == 422
    assert 'href="/classes"' in ivy.get("/instructor").text


PATHS = (
    "/classes/default/roster",
    "/classes/default/roster.csv",
    "/classes/default/questions",
    "/classes/default/labs",
)


def test_learners_and_graders_are_refused(klass, make_client, make_user):
    make_user("gus@example.org", roles=("grader",))
    anonymous = make_client()
    for email in ("bob@example.org", "gus@example.org"):
        c = make_client()
        c.login(email)
        for path in (*PATHS, f"/classes/default/learners/{klass['ann'].id}"):
            assert c.get(path, follow_redirects=False).status_code == 403, (email, path)
            assert anonymous.get(path, follow_redirects=False).status_code in (302, 303, 401), path


@pytest.mark.both_backends
def test_roster_sums_agree_on_both_backends(db, klass):
    # SUM(CASE …) over GROUP BY comes back as int on SQLite and as Decimal-free bigint on PostgreSQL
    rows = {r.email: r for r in roster.rows(db, scope=default_scope(db, klass["ivy"]), lessons=[klass["lesson"]])}
    dan, bob = rows["dan@example.org"], rows["bob@example.org"]
    assert (dan.wrong, dan.right, dan.attempted) == (4, 0, 2) and dan.stuck
    assert (bob.runs, bob.runs_failed, bob.parts_done) == (2, 1, 2)


def test_a_grader_lands_on_the_queue_after_login(client, make_user):
    make_user("gus@example.org", roles=("grader",))
    make_user("ivy@example.org", roles=("instructor", "grader"))
    r = client.login("gus@example.org")
    assert r.status_code == 303 and r.headers["location"] == "/classes/default/grader"
    client.post("/logout")
    r = client.post(
        "/login",
        data={"email": "gus@example.org", "password": "correct horse", "next": "/labs", "csrf_token": client.csrf()},
        follow_redirects=False,
    )
    assert r.headers["location"] == "/labs"  # the page that asked for the login wins
    client.post("/logout")
    assert client.login("ivy@example.org").headers["location"] == "/"  # instructors author and run the class
