"""Submitting an incomplete lab report: the gaps are listed and confirmed first; optional items are no gap;
the run menu's descriptions are short enough to read whole."""

from __future__ import annotations

import html
import re
from datetime import datetime

import pytest

from app.core.models import Bundle, LabReport, ReportVersion, User
from app.services.grading import evidence
from app.services.grading import reports as report_service
from tests.app.reporting import LESSON, failed_job, finished_job

URL = f"/lessons/{LESSON}/report"
REQUIRED = ("env-capability", "bf16-fp8-numerics", "tp-rank-mapping", "timeline")
LABS = {
    "env-capability": "env-check",
    "bf16-fp8-numerics": "fp8-step",
    "tp-rank-mapping": "tp-sweep",
    "timeline": "overlap-trace",
}
QUESTIONS = ("numbers", "overlap", "sharding")


def _me(db, email="ann@example.org"):
    return db.query(User).filter_by(email=email).one()


def _report_form(html: str) -> str:
    return html[html.index('id="report-form"') : html.index("</form>", html.index('id="report-form"'))]


def _listed(html: str) -> list[str]:
    """The fields the 'Not submitted' box names, in its order (each link points at the control on the page)."""
    box = html[html.index('id="missing"') : html.index("</div>", html.index('id="missing"'))]
    links = re.findall(r'<li><a href="#([a-z0-9-]+)">', box)
    assert links == re.findall(r'name="missing-ok" value="([a-z0-9-]+)"', box)  # what the button confirms
    return links


def _one_run_and_one_answer(client, db, settings, hx: bool = False):
    client.register("ann@example.org")
    env = finished_job(db, settings, _me(db), "env-check")
    return client.post(
        URL,
        data={"action": "submit", "evidence-env-capability": f"job:{env.id}", "answer-numbers": "  gap 0.01%, kept  "},
        headers={"HX-Request": "true"} if hx else {},
    )


@pytest.mark.parametrize("hx", [False, True])
def test_an_incomplete_report_is_not_submitted_and_each_gap_is_named(client, db, settings, hx):
    r = _one_run_and_one_answer(client, db, settings, hx)
    assert r.status_code == 200 and db.query(ReportVersion).count() == 0
    assert ("<!doctype html>" in r.text) is (not hx)  # htmx gets the report fragment, a plain post the page
    assert "Submitted as version" not in r.text
    assert "Not submitted: 5 things are missing" in r.text and "Your draft is saved" in r.text
    # the three required items without a run and the two empty answers; optional items are never listed
    assert _listed(r.text) == [
        "evidence-bf16-fp8-numerics",
        "evidence-tp-rank-mapping",
        "evidence-timeline",
        "answer-overlap",
        "answer-sharding",
    ]
    assert "Evidence “Timeline”</a>:\n          no run attached" in r.text
    assert "Question 2: Where was the overlap real?</a>:\n          no answer written" in r.text
    # each link lands on its control
    for field in _listed(r.text):
        assert f'id="{field}"' in r.text
    # nothing typed is lost: the draft holds it and the page shows it
    assert ">  gap 0.01%, kept  </textarea>" in r.text
    assert re.search(r'<option value="job:1" selected>', r.text)
    assert db.query(LabReport).one().draft == {
        "evidence": {"env-capability": {"job": 1}},
        "answers": {"numbers": "  gap 0.01%, kept  "},
    }
    # the way to hand it in anyway is a button of the report form, which carries the form token
    form = _report_form(r.text)
    assert 'name="csrf_token"' in form
    assert '<button type="submit" name="action" value="submit-incomplete"' in form
    assert "Submit with these missing" in form


def test_submit_with_these_missing_hands_in_what_was_confirmed(client, db, settings):
    page = _one_run_and_one_answer(client, db, settings).text
    r = client.post(
        URL,
        data={
            "action": "submit-incomplete",
            "evidence-env-capability": "job:1",
            "answer-numbers": "gap 0.01%",
            "missing-ok": _listed(page),
        },
    )
    assert r.status_code == 200
    assert "Submitted as version 1, with 5 items missing as you confirmed." in r.text
    assert 'id="missing"' not in r.text
    version = db.query(ReportVersion).one()
    assert version.evidence == {"env-capability": {"job": 1}} and version.answers == {"numbers": "gap 0.01%"}
    assert version.checks["timeline"]["status"] == "missing"  # the grader sees it as missing


def test_the_incomplete_button_alone_submits_nothing(client, db, settings):
    """The server checks the confirmation: without the listed gaps confirmed, it lists them again."""
    _one_run_and_one_answer(client, db, settings)
    r = client.post(URL, data={"action": "submit-incomplete", "evidence-env-capability": "job:1"})
    assert r.status_code == 200 and db.query(ReportVersion).count() == 0
    assert "Not submitted: 6 things are missing" in r.text
    assert "answer-numbers" in _listed(r.text)


def test_a_confirmation_does_not_cover_a_gap_made_after_it(client, db, settings):
    page = _one_run_and_one_answer(client, db, settings).text
    # the learner confirms the five gaps listed but has emptied the first answer in the meantime
    r = client.post(
        URL,
        data={"action": "submit-incomplete", "evidence-env-capability": "job:1", "missing-ok": _listed(page)},
    )
    assert db.query(ReportVersion).count() == 0
    assert "Your draft is saved, but more is missing now than when you confirmed" in r.text
    assert "Question 1: What do your BF16 and FP8 numbers show?</a>:\n          no answer written " in r.text
    assert "(new since you confirmed)" in r.text and r.text.count("(new since you confirmed)") == 1


def test_fewer_gaps_than_confirmed_still_submit(client, db, settings):
    page = _one_run_and_one_answer(client, db, settings).text
    r = client.post(
        URL,
        data={
            "action": "submit-incomplete",
            "evidence-env-capability": "job:1",
            "answer-numbers": "gap",
            "answer-overlap": "rank 1 waited",
            "missing-ok": _listed(page),
        },
    )
    assert "Submitted as version 1, with 4 items missing as you confirmed." in r.text


def test_a_complete_report_submits_in_one_press_without_optional_items(client, db, settings):
    client.register("ann@example.org")
    ann = _me(db)
    form = {"action": "submit", **{f"answer-{q}": f"my answer to {q}" for q in QUESTIONS}}
    for slot in REQUIRED:
        form[f"evidence-{slot}"] = f"job:{finished_job(db, settings, ann, LABS[slot]).id}"
    r = client.post(URL, data=form)  # the fallback and the stretch item stay empty
    assert r.status_code == 200
    assert "Submitted as version 1. The automatic checks ran; a grader will pick it up." in r.text
    assert 'id="missing"' not in r.text and db.query(ReportVersion).count() == 1


def test_an_attached_run_that_failed_is_no_gap(client, db, settings):
    """The learner chose it; its checks say it is not gradable. Only an item with nothing attached is a gap."""
    client.register("ann@example.org")
    ann = _me(db)
    form = {"action": "submit", **{f"answer-{q}": "written" for q in QUESTIONS}}
    for slot in REQUIRED:
        form[f"evidence-{slot}"] = f"job:{finished_job(db, settings, ann, LABS[slot]).id}"
    form["evidence-tp-rank-mapping"] = f"job:{failed_job(db, ann, 'tp-sweep').id}"
    assert "Submitted as version 1." in client.post(URL, data=form).text


def test_whitespace_is_not_an_answer(client, db, settings):
    client.register("ann@example.org")
    r = client.post(URL, data={"action": "submit", "answer-numbers": "x", "answer-overlap": " \n\t "})
    assert db.query(ReportVersion).count() == 0
    assert "answer-overlap" in _listed(r.text) and "answer-numbers" not in _listed(r.text)


def test_an_empty_report_is_refused_with_no_way_to_confirm_it(client, db):
    client.register("ann@example.org")
    for action in ("submit", "submit-incomplete"):
        r = client.post(URL, data={"action": action})
        assert r.status_code == 422 and "Attach at least one piece of evidence or write an answer" in r.text
        assert "Submit with these missing" not in r.text
    assert db.query(ReportVersion).count() == 0


def test_the_page_states_the_rule(client):
    client.register("ann@example.org")
    page = client.get(URL).text
    assert "A report is complete when every required evidence item has a run attached and every" in page
    assert "items marked optional never count" in page


def test_a_missing_optional_item_is_neutral_and_a_required_one_red(client, db, settings):
    client.register("ann@example.org")
    page = client.get(URL).text
    for optional in ("static-trace", "tp-sweep-oversharding"):
        assert f'class="state status-check-missing" data-testid="state-{optional}">Optional, not attached<' in page
    assert 'class="state state-missing" data-testid="state-timeline">Missing<' in page
    assert "(optional)</span>" not in page
    # in a submitted version the optional item's heading says the same, not "Missing"
    env = finished_job(db, settings, _me(db), "env-check")
    client.post(
        URL,
        data={
            "action": "submit-incomplete",
            "evidence-env-capability": f"job:{env.id}",
            "missing-ok": [f"evidence-{s}" for s in REQUIRED[1:]] + [f"answer-{q}" for q in QUESTIONS],
        },
    )
    version = client.get(URL).text
    head = version[version.index('id="ev-tp-sweep-oversharding"') :]
    assert re.search(r'<span class="status status-check-missing">Optional, not attached</span>', head[:1200])
    timeline = version[version.index('id="ev-timeline"') :]
    assert re.search(r'<span class="status status-check-missing">Missing</span>', timeline[:1200])


# ---------------------------------------------------------------- the run menu


def test_run_menu_says_each_runs_parameters_in_words(client, db, settings):
    """Each run in the evidence menu names its lab's key parameters in words, so an outlier run and a default run
    look different, then where it ran and when; a failed run says so first. Bounded, so it fits the menu."""
    client.register("ann@example.org")
    ann = _me(db)
    ok = finished_job(db, settings, ann, "fp8-step")
    broken = failed_job(db, ann, "fp8-step")
    when = ok.finished_at
    words = evidence.params_words("fp8-step", ok.params)
    assert "steps" in words and "delayed" in words, words
    menu = dict(report_service.candidates(db, owner=ann, lab="fp8-step"))
    assert menu[f"job:{ok.id}"] == f"Job {ok.id} · {words} · CPU · {when.day} {when:%b %H:%M}"
    assert menu[f"job:{broken.id}"].startswith(f"Job {broken.id} · failed · ")  # no result: no place it ran
    assert all(len(text) <= 120 for text in menu.values()), menu
    page = html.unescape(client.get(URL).text)
    assert f'<option value="job:{ok.id}">Job {ok.id} · {words} · CPU · {when.day} {when:%b %H:%M}</option>' in page


def test_run_menu_names_the_year_only_when_it_is_not_this_one():
    now = datetime(2026, 12, 2, 16, 0)
    assert report_service._menu_time(datetime(2026, 12, 2, 15, 37), now) == "2 Dec 15:37"
    assert report_service._menu_time(datetime(2025, 1, 9, 8, 5), now) == "9 Jan 2025 08:05"
    assert report_service._menu_time(None, now) == ""


def test_run_menu_clips_a_long_upload_name(db, settings, client):
    client.register("ann@example.org")
    ann = _me(db)
    bundle = Bundle(
        owner_id=ann.id,
        lab="env-check",
        filename="my-very-long-laptop-run-from-tuesday-night.zip",
        size_bytes=10,
        bundle_dir="bundles/x",
        result={"environment": {"emulated": True, "backend": "cpu"}},
    )
    db.add(bundle)
    db.commit()
    menu = dict(report_service.candidates(db, owner=ann, lab="env-check"))
    assert menu[f"bundle:{bundle.id}"] == f"Upload {bundle.id} · my-very-long-laptop-run… · CPU, self-reported"
