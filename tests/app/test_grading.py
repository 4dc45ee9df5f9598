"""Grading: claims, concurrent saves, rubric recompute, who sees what, regrade, CSV export."""

from __future__ import annotations

import csv
import io
import re
import shutil
import threading

import pytest

from app.core.db import make_engine, make_sessionmaker
from app.core.models import Grade, Job, LabReport, ReportVersion, User
from app.services.grading import grades as grading
from app.services.grading import rubric_sync
from app.services.learning import lessons as lesson_service
from app.services.learning import publishing
from tests.app.reporting import LESSON, grade_form, submit_report
from tests.conftest import default_class


@pytest.fixture
def report(client, db, settings):
    submit_report(client, db, settings, answers={"numbers": "<img src=x onerror=alert(1)> gap 0.01%"})
    return db.query(LabReport).one()


def _staff(make_user, make_client, email: str, roles=("grader",), lesson: str | None = LESSON, db=None):
    user = make_user(email, roles=roles)
    if lesson and db is not None:
        grading.assign(db, klass=default_class(db), grader=user, lesson_id=lesson)
    c = make_client()
    c.login(email)
    return c


def test_second_claim_is_refused_with_the_holders_name(report, make_user, make_client, db):
    gina = _staff(make_user, make_client, "gina@example.org", db=db)
    hal = _staff(make_user, make_client, "hal@example.org", db=db)
    assert gina.post(f"/classes/default/grader/reports/{report.id}/claim").status_code == 200
    r = hal.post(f"/classes/default/grader/reports/{report.id}/claim")
    assert r.status_code == 409 and "gina (gina@example.org) claimed this report first" in r.text
    db.refresh(report)
    assert report.status == "claimed"
    assert report.claimed_by_id == db.query(User).filter_by(email="gina@example.org").one().id
    # the one who does not hold the claim cannot grade it either
    r = hal.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form())
    assert r.status_code == 409 and "Claim the report" in r.text


@pytest.mark.both_backends
def test_claim_race_between_two_sessions_has_one_winner(report, make_user, settings, db):
    graders = [make_user(f"g{i}@example.org", roles=("grader",)) for i in range(2)]
    engine = make_engine(settings.db_url)
    sessions = make_sessionmaker(engine)
    barrier, outcomes = threading.Barrier(2), []

    def claim(user_id):
        with sessions() as s:
            rep, user = s.get(LabReport, report.id), s.get(User, user_id)
            barrier.wait()
            try:
                grading.claim(s, report=rep, grader=user)
                outcomes.append("won")
            except grading.GradingError as exc:
                outcomes.append(str(exc))

    threads = [threading.Thread(target=claim, args=(g.id,)) for g in graders]
    [t.start() for t in threads]
    [t.join() for t in threads]
    engine.dispose()
    assert outcomes.count("won") == 1 and any("claimed this report first" in o for o in outcomes), outcomes


@pytest.mark.both_backends
def test_concurrent_grade_save_is_refused_and_nothing_is_lost(report, make_user, make_client, db):
    gina = _staff(make_user, make_client, "gina@example.org", db=db)
    gina.post(f"/classes/default/grader/reports/{report.id}/claim")
    first = gina.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(feedback="first tab"))
    assert first.status_code == 200 and "Grade saved" in first.text
    # a second tab opened before the first save still says base_revision 0
    second = gina.post(
        f"/classes/default/grader/reports/{report.id}/grade",
        data=grade_form(
            feedback="second tab",
            levels={
                "environment": "missing",
                "numerics": "missing",
                "tp-mapping": "missing",
                "timeline": "missing",
                "reasoning": "none",
                "stretch": "skipped",
            },
        ),
    )
    assert second.status_code == 409
    assert "Not saved: this grade was saved meanwhile (revision 1, by gina)" in second.text
    assert "second tab" in second.text  # the refused text is kept on the page
    grades = db.query(Grade).all()
    assert len(grades) == 1 and grades[0].feedback == "first tab" and grades[0].total == 16
    # from the current revision, a change is accepted as a new revision; the old one stays
    third = gina.post(
        f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(base_revision=1, feedback="revised")
    )
    assert third.status_code == 200
    assert [g.revision for g in db.query(Grade).order_by(Grade.revision)] == [1, 2]


@pytest.mark.both_backends
def test_grade_save_race_between_two_sessions_has_one_winner(report, make_user, settings, db):
    gina = make_user("gina@example.org", roles=("grader",))
    grading.claim(db, report=report, grader=gina)
    lesson, version_no, _ = lesson_service.current(db, lesson_id=LESSON)
    engine = make_engine(settings.db_url)
    sessions = make_sessionmaker(engine)
    barrier, outcomes = threading.Barrier(2), []

    def save(feedback):
        with sessions() as s:
            rep, user = s.get(LabReport, report.id), s.get(User, gina.id)
            version = s.query(ReportVersion).filter_by(report_id=report.id).one()
            barrier.wait()
            try:
                grading.save_grade(
                    s,
                    report=rep,
                    version=version,
                    grader=user,
                    base_revision=0,
                    levels={
                        "environment": "complete",
                        "numerics": "shown",
                        "tp-mapping": "shown",
                        "timeline": "shown",
                        "reasoning": "thin",
                        "stretch": "skipped",
                    },
                    feedback=feedback,
                    notes="",
                    rubric=lesson.rubric,
                    rubric_version=version_no,
                )
                outcomes.append("saved")
            except grading.GradingError as exc:
                outcomes.append(str(exc))

    threads = [threading.Thread(target=save, args=(f"tab {i}",)) for i in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    engine.dispose()
    assert outcomes.count("saved") == 1 and any(o.startswith("Not saved") for o in outcomes), outcomes
    assert db.query(Grade).count() == 1


def test_every_line_must_be_scored(report, make_user, make_client, db):
    gina = _staff(make_user, make_client, "gina@example.org", db=db)
    gina.post(f"/classes/default/grader/reports/{report.id}/claim")
    r = gina.post(
        f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(levels={"environment": "complete"})
    )
    assert r.status_code == 409 and "missing: BF16 vs FP8 numerics" in r.text
    r = gina.post(
        f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(levels={"environment": "superb"})
    )
    assert r.status_code == 409 and "environment: &#39;superb&#39;" in r.text
    assert db.query(Grade).count() == 0


def test_changing_rubric_points_recomputes_saved_grades(report, client, make_user, make_client, db):
    gina = _staff(make_user, make_client, "gina@example.org", db=db)
    gina.post(f"/classes/default/grader/reports/{report.id}/claim")
    assert gina.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form()).status_code == 200
    row = lesson_service.latest_row(db, lesson_id=LESSON)
    files = dict(row.files)
    assert "    points: 4\n    evidence: bf16-fp8-numerics" in files["rubric.yaml"]
    files["rubric.yaml"] = files["rubric.yaml"].replace(
        "    points: 4\n    evidence: bf16-fp8-numerics", "    points: 10\n    evidence: bf16-fp8-numerics"
    )
    version, errors = publishing.publish(db, lesson_id=LESSON, files=files, source="editor", note="numerics weigh more")
    assert errors == []
    # numerics was "explained" (fraction 1): 16 - 4 + 10 = 22 of 26
    page = client.get(f"/lessons/{LESSON}/report").text
    assert '<span class="total">22 / 26</span>' in page
    grades = db.query(Grade).order_by(Grade.revision).all()
    assert [(g.revision, g.total, g.max_total) for g in grades] == [(1, 16, 20), (2, 22, 26)]
    assert grades[1].grader_id is None and f"lesson version {version}" in grades[1].reason
    assert grades[1].feedback == grades[0].feedback
    # a save started before the recompute is refused rather than silently overwriting it
    r = gina.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(base_revision=1))
    assert r.status_code == 409 and "by a rubric recompute" in r.text
    # nothing to do the second time
    assert rubric_sync.sync_rubric(db, lesson_id=LESSON) == []


def test_visibility_by_role_lesson_and_owner(report, client, make_user, make_client, db, settings):
    other = _staff(make_user, make_client, "olga@example.org", lesson="precision-by-numbers", db=db)
    page = other.get("/classes/default/grader").text
    assert f"/classes/default/grader/reports/{report.id}" not in page
    assert other.get(f"/classes/default/grader/reports/{report.id}").status_code == 404
    assert other.post(f"/classes/default/grader/reports/{report.id}/claim").status_code == 404
    unassigned = _staff(make_user, make_client, "una@example.org", lesson=None, db=db)
    assert "not assigned to grade any lesson" in unassigned.get("/classes/default/grader").text
    learner2 = make_client()
    learner2.register("bob@example.org")
    assert learner2.get("/classes/default/grader").status_code == 403
    assert learner2.get("/classes/default/grader/export.csv").status_code == 403
    assert (
        learner2.get(f"/reports/{report.id}/versions/1/evidence/env-capability/artifacts/result.json").status_code
        == 404
    )
    assert "Nothing submitted yet" in learner2.get(f"/lessons/{LESSON}/report").text
    # the owner and an instructor do see it
    assert (
        client.get(f"/reports/{report.id}/versions/1/evidence/env-capability/artifacts/result.json").status_code == 200
    )
    ivy = _staff(make_user, make_client, "ivy@example.org", roles=("instructor",), lesson=None, db=db)
    review = ivy.get(f"/classes/default/grader/reports/{report.id}")
    assert review.status_code == 200
    # learner text is escaped on the grader's page
    assert "&lt;img src=x onerror=alert(1)&gt;" in review.text and "<img src=x onerror" not in review.text
    svg = ivy.get(f"/reports/{report.id}/versions/1/evidence/bf16-fp8-numerics/artifacts/loss_curves")
    assert svg.status_code == 200 and "sandbox" in svg.headers["content-security-policy"]


def test_instructor_assigns_graders_in_the_page(report, make_user, make_client, db):
    ivy = _staff(make_user, make_client, "ivy@example.org", roles=("instructor",), lesson=None, db=db)
    make_user("gina@example.org", roles=("grader",))
    r = ivy.post(
        "/classes/default/grader/assignments",
        data={"email": "gina@example.org", "lesson_id": LESSON},
        follow_redirects=True,
    )
    assert "gina@example.org now grades transformer-scaling" in r.text
    r = ivy.post(
        "/classes/default/grader/assignments",
        data={"email": "nobody@example.org", "lesson_id": LESSON},
        follow_redirects=True,
    )
    assert "email: no grader with the email nobody@example.org" in r.text and 'class="banner error"' in r.text
    spoof = ivy.get(
        "/classes/default/grader?assign=made-up&email=x&lesson=y"
    ).text  # the address cannot add words of its own
    assert "made-up" not in spoof and 'class="banner' not in spoof.split('<div id="queue">')[1].split("<table")[0]
    gina = make_client()
    gina.login("gina@example.org")
    assert f"/classes/default/grader/reports/{report.id}" in gina.get("/classes/default/grader").text


def test_queue_filters_and_stable_order(client, make_client, make_user, db, settings):
    submit_report(client, db, settings, email="ann@example.org")
    second = make_client()
    submit_report(second, db, settings, email="bob@example.org")
    first_id, second_id = [r.id for r in db.query(LabReport).order_by(LabReport.id)]
    gina = _staff(make_user, make_client, "gina@example.org", db=db)

    def ids(html):
        return [int(i) for i in re.findall(r'<tr data-report="(\d+)"', html)]

    assert ids(gina.get("/classes/default/grader").text) == [first_id, second_id]
    gina.post(f"/classes/default/grader/reports/{second_id}/claim")
    assert ids(gina.get("/classes/default/grader?grader=me").text) == [second_id]
    assert ids(gina.get("/classes/default/grader?grader=none").text) == [first_id]
    assert ids(gina.get("/classes/default/grader?status=claimed").text) == [second_id]
    assert ids(gina.get(f"/classes/default/grader?lesson={LESSON}").text) == [first_id, second_id]
    # the order does not move when one is claimed, and the review page links to the next one
    assert ids(gina.get("/classes/default/grader").text) == [first_id, second_id]
    review = gina.get(f"/classes/default/grader/reports/{first_id}").text
    assert f'href="/classes/default/grader/reports/{second_id}" rel="next"' in review and "1 of 2" in review


def test_regrade_reruns_checks_and_marks_lost_files_not_gradable(report, make_user, make_client, db, settings):
    gina = _staff(make_user, make_client, "gina@example.org", db=db)
    version = db.query(ReportVersion).one()
    assert version.checks["timeline"]["status"] in ("pass", "warn")
    job = db.get(Job, version.evidence["timeline"]["job"])
    shutil.rmtree(settings.data_dir / job.bundle_dir)
    r = gina.post(f"/classes/default/grader/reports/{report.id}/regrade", data={"version": "1"})
    assert r.status_code == 200 and "Automatic checks re-run" in r.text
    db.refresh(version)
    assert version.checks["timeline"]["status"] == "not_gradable"
    assert "files are missing on the server" in version.checks["timeline"]["checks"][0]["sentence"]
    assert version.evidence["timeline"] == {"job": job.id}  # the submission itself is unchanged


def test_csv_export_escapes_formulas_and_respects_roles(report, make_user, make_client, db):
    gina = _staff(make_user, make_client, "gina@example.org", db=db)
    gina.post(f"/classes/default/grader/reports/{report.id}/claim")
    gina.post(
        f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(feedback='=HYPERLINK("http://evil")')
    )
    r = gina.get(f"/classes/default/grader/export.csv?lesson={LESSON}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.content.decode("utf-8-sig"))))
    assert len(rows) == 1
    row = rows[0]
    assert row["learner_email"] == "ann@example.org" and row["total"] == "16.0" and row["max_total"] == "20.0"
    assert row["numerics (of 4)"] == "4.0" and row["stretch (of 3)"] == "1.5"
    assert row["feedback"].startswith("'=HYPERLINK")
    other = _staff(make_user, make_client, "olga@example.org", lesson="precision-by-numbers", db=db)
    assert len(list(csv.DictReader(io.StringIO(other.get("/classes/default/grader/export.csv").text)))) == 0


def test_resubmission_is_marked_for_the_grader_with_what_changed(report, client, make_user, make_client, db):
    """Walked as a grader: version 2 of a graded report opened as a blank rubric with nothing saying it was a
    resubmission, what version 1 got, or what the learner changed; the queue showed "2" and a bare "—"."""
    gina = _staff(make_user, make_client, "gina@example.org", db=db)
    gina.post(f"/classes/default/grader/reports/{report.id}/claim")
    gina.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form())
    first = gina.get(f"/classes/default/grader/reports/{report.id}").text
    assert 'data-testid="resubmitted"' not in first  # version 1 is no resubmission
    form = {f"evidence-{k}": f"job:{v['job']}" for k, v in db.query(ReportVersion).one().evidence.items()}
    form.update({"answer-numbers": "<img src=x onerror=alert(1)> gap 0.01%", "answer-sharding": "At TP=2."})
    client.post(
        f"/lessons/{LESSON}/report", data={**form, "action": "submit-incomplete", "missing-ok": "answer-overlap"}
    )
    assert db.query(ReportVersion).count() == 2
    queue = gina.get("/classes/default/grader").text
    assert 'data-testid="resubmitted">resubmitted</span>' in queue and "(version 1: 16 / 20)" in queue
    review = gina.get(f"/classes/default/grader/reports/{report.id}").text
    text = " ".join(re.sub(r"<[^>]+>", "", review).split())
    assert "Resubmitted: version 2 replaces version 1" in text
    assert "Version 1 was graded 16 / 20 by gina" in text and "score every line again" in text
    assert "Changed since version 1: answer 3." in text
    assert 'data-testid="changed-sharding"' in review and 'data-testid="changed-numbers"' not in review
    # once version 2 is graded the queue shows its own grade, and no earlier one
    gina.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(version=2))
    queue = gina.get("/classes/default/grader").text
    assert "16 / 20" in queue and "(version 1:" not in queue


def test_csv_export_reads_clearly_in_a_spreadsheet(report, client, make_user, make_client, db):
    """Opened as a grader would: item columns were bare ids with no maximum, times were ISO strings with
    microseconds no spreadsheet reads as dates, "grader" held an email, names with accents broke in Excel (no BOM),
    and after a resubmission the row lost the grade the learner had (version 2 ungraded: every grade cell empty)."""
    owner = db.get(User, report.owner_id)
    owner.display_name = "=Zoë+1"  # a name that is a formula, with an accent
    db.commit()
    gina = _staff(make_user, make_client, "gina@example.org", db=db)
    gina.post(f"/classes/default/grader/reports/{report.id}/claim")
    gina.post(f"/classes/default/grader/reports/{report.id}/grade", data=grade_form(feedback="Good."))
    form = {f"evidence-{k}": f"job:{v['job']}" for k, v in db.query(ReportVersion).one().evidence.items()}
    client.post(
        f"/lessons/{LESSON}/report",
        data={
            **form,
            "answer-numbers": "v2",
            "action": "submit-incomplete",
            "missing-ok": ["answer-overlap", "answer-sharding"],
        },
    )
    r = gina.get(f"/classes/default/grader/export.csv?lesson={LESSON}")
    assert r.content.startswith("\ufeff".encode())  # Excel reads UTF-8 only with the mark
    head, *rows = list(csv.reader(io.StringIO(r.content.decode("utf-8-sig"))))
    assert head[:11] == [
        "report",
        "lesson",
        "learner_email",
        "learner_name",
        "latest_version",
        "submitted_at_utc",
        "status",
        "grader_email",
        "graded_version",
        "total",
        "max_total",
    ]
    assert "tp-mapping (of 3)" in head and head[-2:] == ["graded_at_utc", "feedback"]
    row = dict(zip(head, rows[0]))
    assert row["learner_name"] == "'=Zoë+1"  # shown as text, never run as a formula
    assert row["latest_version"] == "2" and row["graded_version"] == "1" and row["total"] == "16.0"
    assert row["feedback"] == "Good." and row["grader_email"] == "gina@example.org"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row["submitted_at_utc"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row["graded_at_utc"])
