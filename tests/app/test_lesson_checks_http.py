"""Lesson parts: "predict, then check" links carrying the learner's number, and the learner's own lab runs
beside the worked examples (from real `python -m labs run` output), read in one indexed query."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import event

from app.core.models import User
from app.services.jobs import lifecycle as jobs
from app.services.jobs import own_runs
from labs.api import number
from labs.words import whole_percent
from tests.app import labruns
from tests.app.reporting import LOCAL, failed_job, finished_job

LESSON = "transformer-scaling"
PART = f"/lessons/{LESSON}/deep-dives"
# fp8-step with a spike, small enough for two cores: the spike at step 3 clips, step 4's scale has seen it.
SPIKE = {**labruns.TINY["fp8-step"], "steps": 6, "outlier_step": 3, "outlier_scale": 50.0}


def spike_bundle() -> Path:
    return labruns.run("fp8-step", json.dumps(SPIKE))


def spike_job(db, owner):
    job = jobs.create_job(db, owner=owner, lab="fp8-step", params=SPIKE, backend="cpu", host=LOCAL)
    assert jobs.claim_next(db, worker_id="test", lease_s=60).id == job.id
    result = json.loads((spike_bundle() / "result.json").read_text())
    jobs.finish(db, job_id=job.id, worker_id="test", ok=True, result=result, bundle_dir=None)
    db.refresh(job)
    return job


def _me(db, email="ann@example.org") -> User:
    return db.query(User).filter_by(email=email).one()


def _pause(page: str, pause_id: str) -> str:
    m = re.search(rf'<div class="pause" id="pause-{pause_id}">.*?</form>', page, re.S)
    assert m, pause_id
    return m.group(0)


def _check_url(fragment: str) -> dict:
    href = html.unescape(re.search(r'class="check-link.*?href="([^"]+)"', fragment, re.S).group(1))
    url = urlsplit(href)
    return {"path": url.path, "fragment": url.fragment, **{k: v[0] for k, v in parse_qs(url.query).items()}}


def _aside(page: str, lab: str) -> str:
    m = re.search(rf'<aside class="your-run[^"]*" id="your-run-{lab}".*?</aside>', page, re.S)
    assert m, lab
    return html.unescape(re.sub(r"\s+", " ", m.group(0)))


# ---------------------------------------------------------------- predict, then check


def test_check_link_opens_the_tool_with_the_scenario_before_an_answer(client):
    client.register("ann@example.org")
    pause = _pause(client.get(PART).text, "async-then-wait")
    q = _check_url(pause)
    assert q["path"] == "/play/overlap-window" and q["fragment"] == "tool-overlap-window"
    assert (q["compute_ms"], q["comm_ms"], q["window_ms"], q["predicts"]) == ("12", "5", "0", "total")
    assert "predict" not in q
    assert "Write your prediction first" in pause


def test_the_learners_number_is_carried_to_play_and_judged_there(client):
    client.register("ann@example.org")
    r = client.post(f"/lessons/{LESSON}/pauses/async-then-wait", {"answer": "Barely: 12 + 5 = 17 ms.", "version": 1})
    assert r.status_code == 200
    assert "Your answer predicts the step time: 17 ms" in re.sub(r"\s+", " ", r.text)  # the answer's fragment
    pause = _pause(client.get(PART).text, "async-then-wait")  # and the page, from the pause slot
    q = _check_url(pause)
    assert q["predict"] == "17" and q["predicts"] == "total"
    assert pause.index("Reference answer") < pause.index("check-link")  # predict, reveal, then check
    play = client.get(q["path"], params={k: v for k, v in q.items() if k not in ("path", "fragment")})
    assert play.status_code == 200
    box = re.sub(r"\s+", " ", re.search(r'<div class="prediction.*?</div>', play.text, re.S).group(0))
    assert 'class="prediction right"' in box and "You predicted the step time: <strong>17 ms</strong>" in box
    assert 'name="predict"' in play.text and 'value="17"' in play.text  # editable on /play
    wrong = client.get(
        q["path"], params={**{k: v for k, v in q.items() if k not in ("path", "fragment")}, "predict": "14"}
    )
    assert "off by 3 ms, 18% too low" in wrong.text


def test_an_answer_without_a_number_links_the_scenario_only(client):
    client.register("ann@example.org")
    client.post(
        f"/lessons/{LESSON}/pauses/dp-long-context",
        {"answer": "No: each rank still sees whole sequences.", "version": 1},
    )
    pause = _pause(client.get(PART).text, "dp-long-context")
    q = _check_url(pause)
    assert q["path"] == "/play/memory" and q["seq"] == "16384" and q["predicts"] == "activations_gb"
    assert "predict" not in q and "holds no number to carry over" in pause


def test_the_shared_body_stays_shared(client, make_client):
    """Two learners' pages differ only in their own slots: one's number never reaches the other's link."""
    client.register("ann@example.org")
    client.post(f"/lessons/{LESSON}/pauses/async-then-wait", {"answer": "17 ms", "version": 1})
    other = make_client()
    other.register("bob@example.org", name="Bob")
    bob = _pause(other.get(PART).text, "async-then-wait")
    # Bob's CSRF token is random text and may contain "17" by chance: it is not part of the comparison.
    visible = re.sub(r'name="csrf_token" value="[^"]*"|compute_ms=12|12 ms', "", bob)
    assert "predict" not in _check_url(bob) and "17" not in visible


# ---------------------------------------------------------------- the learner's own runs


def test_without_runs_each_section_nudges(client):
    client.register("ann@example.org")
    page = client.get(PART).text
    for lab in ("fp8-step", "overlap-trace", "tp-sweep"):
        aside = _aside(page, lab)
        assert "your-run none" in aside and f'href="/labs/{lab}"' in aside and "See your own numbers here" in aside


def test_own_runs_appear_beside_the_worked_examples(client, db, settings):
    client.register("ann@example.org")
    ann = _me(db)
    fp8 = spike_job(db, ann)
    trace = finished_job(db, settings, ann, "overlap-trace")
    sweep = finished_job(db, settings, ann, "tp-sweep")
    page = client.get(PART).text

    spike = fp8.result["results"]["outlier"]
    aside = _aside(page, "fp8-step")
    assert f"The 50× spike at step 3 met a scale set from earlier steps' amaxes and clipped {number(spike['clipped_at_spike'])} values" in aside  # fmt: skip
    assert f"at step 4 the scale fell {number(spike['scale_at_spike'])} → {number(spike['scale_after'])}" in aside
    assert f'href="/jobs/{fp8.id}"' in aside and "CPU emulation" in aside  # linked, and labelled honestly

    w = trace.result["results"]["schedules"]["windowed"]
    aside = _aside(page, "overlap-trace")
    assert f"Your windowed schedule hid {whole_percent(w['overlap_ratio'])} of the all-gather" in aside
    assert f'href="/jobs/{trace.id}"' in aside

    aside = _aside(page, "tp-sweep")
    rows = sweep.result["results"]["degrees"]
    assert "Your sweep of a 16 tokens × 32 wide × ffn 64 block, step per degree: TP 1" in aside
    assert f"TP 2 {number(rows[1]['step_ms'], 3)} ms" in aside
    assert "cost model predicts" in aside and f'href="/jobs/{sweep.id}"' in aside
    # the sections sit in the part in order: the fp8 run beside the range section's worked example
    assert page.index('id="your-run-fp8-step"') < page.index('id="pause-fixed-scale"')


def test_only_the_learners_latest_succeeded_run_counts(client, make_client, db, settings):
    client.register("ann@example.org")
    other = make_client()
    other.register("eve@example.org", name="Eve")
    ann, eve = _me(db), _me(db, "eve@example.org")
    old = finished_job(db, settings, ann, "overlap-trace")
    new = finished_job(db, settings, ann, "overlap-trace")
    failed_job(db, ann, "overlap-trace")  # newer, but failed: not a run to show
    finished_job(db, settings, eve, "fp8-step")  # another learner's run is never shown to ann
    page = client.get(PART).text
    aside = _aside(page, "overlap-trace")
    assert f'href="/jobs/{new.id}"' in aside and f'href="/jobs/{old.id}"' not in aside
    assert "your-run none" in _aside(page, "fp8-step")
    assert own_runs.notes(db, user=ann, labs=[]) == {}


def test_a_lab_answer_is_shown_first_when_the_result_has_one(client, db, settings):
    client.register("ann@example.org")
    job = finished_job(db, settings, _me(db), "tp-sweep")
    job.result = {**job.result, "results": {**job.result["results"], "answer": "TP 2 did not pay for this shape."}}
    db.commit()
    aside = _aside(client.get(PART).text, "tp-sweep")
    assert aside.index("TP 2 did not pay for this shape.") < aside.index("Your sweep of a")


def test_runs_cost_one_query_and_only_on_parts_that_show_them(client, app):
    client.register("ann@example.org")
    seen: list[str] = []

    def record(conn, cursor, statement, *args):
        seen.append(statement)

    event.listen(app.state.engine, "before_cursor_execute", record)
    try:
        client.get(PART)
        on_part = [s for s in seen if re.search(r"\bFROM jobs\b", s)]
        seen.clear()
        client.get(f"/lessons/{LESSON}/mental-model")
        elsewhere = [s for s in seen if re.search(r"\bFROM jobs\b", s)]
    finally:
        event.remove(app.state.engine, "before_cursor_execute", record)
    assert len(on_part) == 1 and elsewhere == []


def test_the_runs_query_uses_the_owner_index(db, make_user):
    """SQLite's plan for the statement latest_succeeded sends: the owner's jobs through an index that leads to
    them (ix_jobs_owner_id, or the fair queue's (status, owner_id, id)), never a scan of the table; the rows
    themselves by primary key."""
    if db.bind.dialect.name != "sqlite":
        pytest.skip("the plan check reads SQLite's EXPLAIN QUERY PLAN")
    user = make_user("ann@example.org")
    sent: list[tuple] = []

    def record(conn, cursor, statement, parameters, *args):
        sent.append((statement, parameters))

    event.listen(db.bind, "before_cursor_execute", record)
    try:
        assert jobs.latest_succeeded(db, owner=user, labs=["fp8-step", "tp-sweep"]) == {}
    finally:
        event.remove(db.bind, "before_cursor_execute", record)
    ((statement, parameters),) = sent
    plan = " | ".join(row[-1] for row in db.connection().exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters))
    assert re.search(r"SEARCH jobs USING (COVERING )?INDEX ix_jobs_(status_)?owner_id", plan), plan
    assert "SCAN jobs" not in plan and "INTEGER PRIMARY KEY" in plan, plan


def test_the_lesson_state_reads_runs_through_the_owner_index(db, make_user):
    """A part that shows the learner's own runs asks for their newest job ids inside lesson_state's one
    statement: SQLite's plan reaches the owner's jobs through an index, never a scan of the jobs table; a part
    without runs sends the statement without the jobs branch."""
    from app.services.learning import progress as learning

    if db.bind.dialect.name != "sqlite":
        pytest.skip("the plan check reads SQLite's EXPLAIN QUERY PLAN")
    user = make_user("ann@example.org")
    sent: list[tuple] = []

    def record(conn, cursor, statement, parameters, *args):
        sent.append((statement, parameters))

    event.listen(db.bind, "before_cursor_execute", record)
    try:
        assert learning.lesson_state(db, user=user, lesson_id=LESSON, runs=True).runs == {}
        assert learning.lesson_state(db, user=user, lesson_id=LESSON).runs == {}
    finally:
        event.remove(db.bind, "before_cursor_execute", record)
    (with_runs, params), (without_runs, _) = sent
    assert "FROM jobs" in with_runs and "FROM jobs" not in without_runs
    plan = " | ".join(row[-1] for row in db.connection().exec_driver_sql(f"EXPLAIN QUERY PLAN {with_runs}", params))
    assert re.search(r"SEARCH jobs USING (COVERING )?INDEX ix_jobs_(status_)?owner_id", plan), plan
    assert "SCAN jobs" not in plan, plan
