"""A report's run menu says each run's parameters in words and marks the runs an item asks for;
an optional item left empty is not counted as missing; a cancelled newer run never hides the last good one.

Real database (SQLite and PostgreSQL), real lab output (the golden bundles)."""

from __future__ import annotations

import re

from app.core.models import Job, LabReport
from app.services.grading import evidence
from app.services.grading import reports as report_service
from app.services.jobs import lifecycle as job_service
from app.services.jobs import own_runs
from tests.app import labruns
from tests.app.reporting import LESSON, LOCAL, finished_job

URL = f"/lessons/{LESSON}/report"


def _finished(db, settings, owner, lab: str, params: dict) -> Job:
    """A finished run of `lab` with `params` (its result is the golden bundle's: the menu reads the job's params)."""
    job = job_service.create_job(db, owner=owner, lab=lab, params=params, backend="cpu", host=LOCAL)
    job_service.claim_next(db, worker_id="test-helper", lease_s=60)
    rel = f"jobs/{job.id}/attempt-1"
    labruns.copy_to(lab, settings.data_dir / rel)
    job_service.finish(db, job_id=job.id, worker_id="test-helper", ok=True, result=labruns.result(lab), bundle_dir=rel)
    db.refresh(job)
    return job


def test_a_run_in_words_names_what_tells_runs_apart():
    words = evidence.params_words("fp8-step", {"outlier_step": 20, "steps": 40})
    assert words == "spike at step 20, 40 steps, delayed"
    assert evidence.params_words("fp8-step", {"outlier_step": None}).startswith("no spike, ")
    assert evidence.params_words("tp-sweep", {"degrees": [1, 2, 4]}).startswith("TP 1, 2, 4, no FP8")
    assert evidence.params_words("overlap-trace", {"schedules": ["immediate", "windowed"], "ranks": 2}).startswith(
        "immediate, windowed schedules, 2 ranks"
    )
    # other changed parameters are one "…", so the closed menu fits a laptop's column
    tiny = evidence.params_words("fp8-step", {**labruns.TINY["fp8-step"], "outlier_step": None})
    assert tiny == "no spike, 4 steps, delayed, …", tiny
    assert evidence.params_words("env-check", {}) == "default settings"


def test_the_menu_marks_the_run_the_item_asks_for(client, db, settings):
    client.register("ann@example.org")
    from app.core.models import User

    ann = db.query(User).filter_by(email="ann@example.org").one()
    plain = finished_job(db, settings, ann, "fp8-step")
    spiked = _finished(db, settings, ann, "fp8-step", {**labruns.TINY["fp8-step"], "outlier_step": 2})
    slots = {s.id: s for s in report_service.slots(_lesson(db))}
    menu = dict(report_service.candidates(db, owner=ann, lab="fp8-step", slot=slots["bf16-fp8-numerics"]))
    assert menu[f"job:{spiked.id}"].startswith(f"✓ Job {spiked.id} · spike at step 2, 4 steps, delayed")
    assert menu[f"job:{plain.id}"].startswith(f"Job {plain.id} · no spike, 4 steps")
    assert " · CPU · " in menu[f"job:{plain.id}"]
    # the fallback item asks for no particular run: nothing is marked
    fallback = dict(report_service.candidates(db, owner=ann, lab="fp8-step", slot=slots["static-trace"]))
    assert not any(t.startswith("✓") for t in fallback.values())

    page = client.get(URL).text
    assert re.search(rf'<option value="job:{spiked.id}">✓ Job {spiked.id} · spike at step 2, ', page)
    hint = re.search(r'data-testid="asks-bf16-fp8-numerics">([^<]*)<', page)
    assert hint and "outlier step" in hint.group(1) and "✓ marks your runs" in hint.group(1)
    assert 'aria-describedby="asks-bf16-fp8-numerics"' in page


def _lesson(db):
    from app.services.learning import lessons as lesson_service

    current = lesson_service.current(db, lesson_id=LESSON)
    assert current is not None
    return current.lesson


def test_an_optional_item_left_empty_is_not_counted_as_missing():
    checks = {
        "env": {"status": "pass"},
        "timeline": {"status": "missing", "optional": False},
        "static-trace": {"status": "missing", "optional": True},
        "stretch": {"status": "missing", "optional": True},
    }
    assert report_service.summary(checks) == {"pass": 1, "missing": 1, report_service.OPTIONAL_EMPTY: 2}


def test_a_submitted_version_says_optional_items_apart(client, db, settings):
    from tests.app.reporting import submit_report

    submit_report(client, db, settings)
    page = client.get(URL).text
    counts = re.search(r"Evidence and automatic checks \(([^)]*)\)", page)
    assert counts and "optional, not attached" in counts.group(1) and "missing" not in counts.group(1), counts


def test_the_last_good_run_stays_under_a_cancelled_newer_one(db, settings, make_user):
    ann = make_user("lara@example.org")
    good = finished_job(db, settings, ann, "env-check")
    newer = job_service.create_job(db, owner=ann, lab="env-check", params={}, backend="cpu", host=LOCAL)
    job_service.cancel(db, job=newer, by=ann)
    runs = own_runs.latest_runs(db, owner=ann, lab="env-check", limit=1)
    assert [j.id for j in runs.shown] == [newer.id, good.id]
    assert runs.latest.status == "cancelled" and runs.last_result.id == good.id
    # further back than the runs read: found with one more query
    for _ in range(3):
        j = job_service.create_job(db, owner=ann, lab="env-check", params={}, backend="cpu", host=LOCAL)
        job_service.cancel(db, job=j, by=ann)
    runs = own_runs.latest_runs(db, owner=ann, lab="env-check", limit=1)
    assert runs.last_result is not None and runs.last_result.id == good.id
    # a succeeded latest stands alone
    again = finished_job(db, settings, ann, "env-check")
    assert [j.id for j in own_runs.latest_runs(db, owner=ann, lab="env-check", limit=1).shown] == [again.id]


def test_attach_latest_picks_per_item_a_run_that_can_show_what_it_asks(client, db, settings):
    """The numerics item asks at which steps values clipped and what the scale did next: a newer current-scaling run
    (which never clips at a spike) is passed over for an older delayed one with a spike, and an item none of whose
    runs can show it stays empty, with why, on the page and in the banner."""
    from app.core.models import User

    client.register("ann@example.org")
    ann = db.query(User).filter_by(email="ann@example.org").one()
    tiny = labruns.TINY["fp8-step"]
    delayed = _finished(db, settings, ann, "fp8-step", {**tiny, "outlier_step": 2})
    current = _finished(db, settings, ann, "fp8-step", {**tiny, "outlier_step": 2, "recipe": "current"})
    assert current.id > delayed.id
    lesson = _lesson(db)
    report = report_service.get_or_create(db, owner=ann, lesson_id=LESSON)
    done = report_service.attach_latest(db, report=report, owner=ann, lesson=lesson)
    assert done.filled == ["bf16-fp8-numerics"] and done.passed_over == {}
    assert report.draft["evidence"]["bf16-fp8-numerics"] == {"job": delayed.id}


def test_an_item_no_run_can_show_stays_empty_and_says_why(client, db, settings):
    from app.core.models import User

    client.register("ann@example.org")
    ann = db.query(User).filter_by(email="ann@example.org").one()
    tiny = labruns.TINY["fp8-step"]
    current = _finished(db, settings, ann, "fp8-step", {**tiny, "outlier_step": 2, "recipe": "current"})
    tp = finished_job(db, settings, ann, "tp-sweep")  # TP 1 and 2: the item's run; too few degrees for the stretch
    page = client.post(URL, data={"action": "attach-latest"}).text
    assert "Attached your latest runs to 1 item. Left 2 items empty: none of your runs can show what they ask" in page
    why = re.search(r'data-testid="passed-over-bf16-fp8-numerics">(.*?)</p>', page, re.S)
    assert why and "delayed-scaling run with an outlier step" in why.group(1)
    assert f"Your one fp8-step run, job {current.id} (spike at step 2, 4 steps, current, …), cannot show that" in (
        why.group(1)
    )
    assert "three or more TP degrees" in page and f"job {tp.id} (TP 1, 2" in page
    report = db.query(LabReport).one()
    assert report.draft["evidence"] == {"tp-rank-mapping": {"job": tp.id}}


def test_a_delayed_run_that_clipped_nothing_is_not_attached_for_the_clipping_item(client, db, settings):
    from app.core.models import User

    client.register("ann@example.org")
    ann = db.query(User).filter_by(email="ann@example.org").one()
    spiked = _finished(db, settings, ann, "fp8-step", {**labruns.TINY["fp8-step"], "outlier_step": 2})
    spiked.result = {**spiked.result, "results": {**spiked.result["results"], "clipping": {"total_clipped": 0}}}
    db.commit()
    lesson = _lesson(db)
    report = report_service.get_or_create(db, owner=ann, lesson_id=LESSON)
    done = report_service.attach_latest(db, report=report, owner=ann, lesson=lesson)
    assert done.filled == [] and done.passed_over["bf16-fp8-numerics"].endswith(": it clipped nothing.")
