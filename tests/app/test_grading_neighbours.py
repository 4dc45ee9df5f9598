"""The review page's place in the queue: "3 of 50", previous and next, in the queue page's own order and filters,
found with one statement however long the queue is (app/services/grading/queue.py `neighbours`)."""

from __future__ import annotations

import itertools
import re
from datetime import timedelta

import pytest
from sqlalchemy import event

from app.core.models import ClassMember, LabReport, ReportVersion, User, utcnow
from app.services.grading import grades as grading
from app.services.grading import queue as grading_queue
from app.services.learning import lessons as lesson_service
from tests.app.reporting import LESSON
from tests.conftest import default_class, default_scope

OTHER = "precision-by-numbers"  # a second lesson: the grader below is not assigned to it


@pytest.fixture
def seed(client, db):
    """The app started (its lessons published), and `seed(n, ...)`: n submitted reports by new learners of the class
    "default" (`enrolled=False`: people in no class), each with one version, submitted `gap` apart from `at` (a zero
    gap: one timestamp for all, so only the id orders them). Returns their ids in submission order."""
    made = itertools.count()
    version = lesson_service.current(db, lesson_id=LESSON).version
    klass = default_class(db)

    def make(
        n: int,
        *,
        lesson: str = LESSON,
        at=None,
        gap=timedelta(seconds=1),
        status="submitted",
        claimer=None,
        enrolled=True,
    ):
        at = at or utcnow()
        ids = []
        for i in range(n):
            k = next(made)
            owner = User(email=f"learner{k}@example.org", display_name=f"learner{k}", password_hash="-")
            db.add(owner)
            db.flush()
            if enrolled:
                db.add(ClassMember(class_id=klass.id, user_id=owner.id, role="learner", via="admin"))
            report = LabReport(
                owner_id=owner.id,
                lesson_id=lesson,
                status=status,
                submitted_at=at + i * gap,
                claimed_by_id=claimer.id if claimer else None,
                claimed_at=at if claimer else None,
            )
            db.add(report)
            db.flush()
            db.add(
                ReportVersion(
                    report_id=report.id, number=1, lesson_version=version, evidence={}, answers={}, submitted_at=at
                )
            )
            ids.append(report.id)
        db.commit()
        return ids

    return make


def _grader(make_user, db, email="gina@example.org", roles=("grader",)):
    user = make_user(email, roles=roles)
    if "instructor" not in roles:
        grading.assign(db, klass=default_class(db), grader=user, lesson_id=LESSON)
    return user


@pytest.mark.both_backends  # the statements are the dialect's
def test_the_review_page_reads_the_same_statements_with_2_and_50_reports_queued(
    app, make_client, make_user, db, seed, monkeypatch
):
    """The page's previous/next and "n of m" come from one keyset statement, not from walking the queue (which
    read ~5 statements per queued report)."""
    # the catalogue of current versions is re-read every CURRENT_TTL_S: keep it for the test so both measured
    # views read the same statements (see the dashboard's statement-count test)
    monkeypatch.setattr(lesson_service, "CURRENT_TTL_S", 3600.0)
    _grader(make_user, db)
    gina = make_client()
    gina.login("gina@example.org")
    start = utcnow() - timedelta(hours=1)
    first, second = seed(2, at=start)

    def statements(report_id: int, expect: str) -> list[str]:
        seen: list[str] = []

        def record(conn, cursor, statement, *args):
            seen.append(statement)

        event.listen(app.state.engine, "before_cursor_execute", record)
        try:
            r = gina.get(f"/classes/default/grader/reports/{report_id}")
        finally:
            event.remove(app.state.engine, "before_cursor_execute", record)
        assert r.status_code == 200 and expect in r.text, r.text[:2000]
        return seen

    gina.get(f"/classes/default/grader/reports/{second}")  # warm: the session, the catalogue
    few = statements(second, "2 of 2")
    seed(48, at=start + timedelta(minutes=1))
    many = statements(second, "2 of 50")
    assert len(many) == len(few), (len(few), len(many))
    # and few in all: the report, its versions, evidence, grades and the one neighbour statement
    assert len(few) <= 25, few


def _links(html: str) -> tuple[int | None, int | None, str | None]:
    """(previous id, next id, "n of m") from a review page's eyebrow."""
    prev = re.search(r'href="/classes/default/grader/reports/(\d+)[^"]*" rel="prev"', html)
    nxt = re.search(r'href="/classes/default/grader/reports/(\d+)[^"]*" rel="next"', html)
    pos = re.search(r"Grading queue</a> · (\d+ of \d+)", html)
    return (
        int(prev.group(1)) if prev else None,
        int(nxt.group(1)) if nxt else None,
        pos.group(1) if pos else None,
    )


def test_previous_and_next_at_the_ends_and_with_filters(make_client, make_user, db, seed):
    gina = _grader(make_user, db)
    c = make_client()
    c.login("gina@example.org")
    start = utcnow() - timedelta(hours=1)
    a, b, d = seed(3, at=start)
    (hidden,) = seed(1, lesson=OTHER, at=start + timedelta(seconds=1, milliseconds=500))  # not hers: never a neighbour
    # her lesson, but by someone who is not a learner of the class: never a neighbour either
    (outsider,) = seed(1, at=start + timedelta(seconds=1, milliseconds=700), enrolled=False)
    (claimed,) = seed(1, at=start + timedelta(seconds=1, milliseconds=200), status="claimed", claimer=gina)

    # the whole queue: a, b, claimed (between b and d by submission time), d; the ends have one link each
    assert _links(c.get(f"/classes/default/grader/reports/{a}").text) == (None, b, "1 of 4")
    assert _links(c.get(f"/classes/default/grader/reports/{b}").text) == (a, claimed, "2 of 4")
    assert _links(c.get(f"/classes/default/grader/reports/{claimed}").text) == (b, d, "3 of 4")
    assert _links(c.get(f"/classes/default/grader/reports/{d}").text) == (claimed, None, "4 of 4")
    # filtered: the links keep the filter and step over what it leaves out
    page = c.get(f"/classes/default/grader/reports/{b}?status=submitted&lesson={LESSON}").text
    assert _links(page) == (a, d, "2 of 3")
    assert f'href="/classes/default/grader/reports/{d}?lesson={LESSON}&amp;status=submitted" rel="next"' in page
    assert _links(c.get(f"/classes/default/grader/reports/{claimed}?grader=me").text) == (None, None, "1 of 1")
    # a report the filter leaves out has no place in that queue, and no links
    assert _links(c.get(f"/classes/default/grader/reports/{a}?grader=me").text) == (None, None, None)
    assert c.get(f"/classes/default/grader/reports/{hidden}").status_code == 404
    assert c.get(f"/classes/default/grader/reports/{outsider}").status_code == 404


@pytest.mark.both_backends  # keyset comparisons on timestamps: each backend stores and compares its own way
def test_neighbours_follow_the_queue_order_for_every_filter(make_user, db, seed):
    """Against the queue itself, the page's own list: every report under every filter, ties in submission time
    included (ordered by id), and for an instructor, who sees every lesson."""
    gina = _grader(make_user, db)
    ivy = _grader(make_user, db, "ivy@example.org", roles=("instructor",))
    start = utcnow() - timedelta(hours=1)
    seed(3, at=start, gap=timedelta(0))  # one timestamp: the id decides
    seed(2, lesson=OTHER, at=start, gap=timedelta(0))
    seed(2, at=start + timedelta(seconds=5), status="claimed", claimer=gina)
    seed(1, at=start + timedelta(seconds=2), status="claimed", claimer=ivy)
    seed(2, at=start + timedelta(seconds=3), status="graded")
    seed(1, at=start - timedelta(seconds=1), status="draft")  # never queued
    seed(1, at=start + timedelta(seconds=1), enrolled=False)  # by someone outside the class: never queued
    everyone = [r.id for r in db.query(LabReport)]
    checked = 0
    for user, role in ((gina, "grader"), (ivy, "instructor")):
        scope = default_scope(db, user, role)
        for lesson_id, status, grader in itertools.product(
            (None, LESSON, OTHER), (None, *grading_queue.QUEUE_STATUSES), (None, "me", "none", str(gina.id))
        ):
            filters = {"lesson_id": lesson_id, "status": status, "grader": grader}
            order = [row.report.id for row in grading_queue.queue(db, scope=scope, **filters)]
            for report_id in everyone:
                report = db.get(LabReport, report_id)
                got = grading_queue.neighbours(db, scope=scope, report=report, **filters)
                if report_id not in order:
                    assert got is None, (user.email, filters, report_id)
                    continue
                i = order.index(report_id)
                want = grading_queue.Neighbours(
                    previous=order[i - 1] if i else None,
                    next=order[i + 1] if i + 1 < len(order) else None,
                    position=i + 1,
                    total=len(order),
                )
                assert got == want, (user.email, filters, report_id, order)
                checked += 1
    assert checked > 100  # the product above is not empty by mistake


@pytest.mark.both_backends  # the statements are the dialect's
def test_the_queue_page_reads_the_same_statements_with_2_and_50_reports_queued(
    app, make_client, make_user, db, seed, monkeypatch
):
    """Each queued report's version, grades and people are read for the whole queue at once, not row by row
    (a class of 200 would otherwise cost about a thousand statements per view of /grader)."""
    monkeypatch.setattr(lesson_service, "CURRENT_TTL_S", 3600.0)
    gina = _grader(make_user, db)
    c = make_client()
    c.login("gina@example.org")
    start = utcnow() - timedelta(hours=1)
    seed(1, at=start)
    seed(1, at=start + timedelta(seconds=1), status="claimed", claimer=gina)

    def statements(expect_rows: int) -> list[str]:
        seen: list[str] = []

        def record(conn, cursor, statement, *args):
            seen.append(statement)

        event.listen(app.state.engine, "before_cursor_execute", record)
        try:
            r = c.get("/classes/default/grader")
        finally:
            event.remove(app.state.engine, "before_cursor_execute", record)
        assert r.status_code == 200
        assert len(re.findall(r'href="/classes/default/grader/reports/\d+', r.text)) >= expect_rows, r.text[:2000]
        return seen

    c.get("/classes/default/grader")  # warm: the session, the catalogue
    few = statements(2)
    seed(48, at=start + timedelta(minutes=1))
    many = statements(50)
    assert len(many) == len(few), (len(few), len(many))
