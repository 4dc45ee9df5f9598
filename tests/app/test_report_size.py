"""A learner cannot make a report page huge.

A 3.4 MB result.json over five submitted versions made a 41 MB report page that took 5.8 s to render.
Pages now show one version in full (the others as a line and a link) and a bounded excerpt of each result
(app/web/views/result_excerpt.py): the learner's report page and the grader's review page stay under PAGE_LIMIT
however large the results, and say what they left out, with result.json one link away.
"""

from __future__ import annotations

import json
import re

from app.core.models import Job, LabReport, User
from app.services.grading import grades as grading
from app.web.views.result_excerpt import MAX_TABLE_ROWS, excerpt
from tests.app.reporting import LESSON, finished_job
from tests.conftest import default_class

PAGE_LIMIT = 400 * 1024  # bytes of HTML: a few tens of KB of page plus four result excerpts
# Per big table: each job's result alone is larger than PAGE_LIMIT (~0.55 MB), so a page that showed one result in
# full, or every version, would be over it several times (3.4 MB results only take longer to store).
ROWS = 4_000
VERSIONS = 5


def inflate(result: dict) -> dict:
    """A lab's real result with two ROWS-row tables, 2,000 summary rows and 300 artifacts added."""
    big = dict(result)
    results = dict(result["results"])
    rows = [[i, i * 0.001, f"row {i} of the learner's own table"] for i in range(ROWS)]
    results["tables"] = [
        *results.get("tables", []),
        *({"title": f"Per step {k}", "columns": ["step", "x", "note"], "rows": rows} for k in (1, 2)),
    ]
    results["summary"] = [*results.get("summary", []), *({"label": f"extra {i}", "value": i} for i in range(2000))]
    big["results"] = results
    big["artifacts"] = [
        *result["artifacts"],
        *({"name": f"copy{i}", "path": "x.json", "media_type": "application/json"} for i in range(300)),
    ]
    return big


def _submit(client, fields: dict) -> None:
    r = client.post(f"/lessons/{LESSON}/report", data={"action": "submit", **fields})
    assert r.status_code == 200 and "Submitted as version" in r.text, r.text[-1500:]


def test_large_results_over_several_versions_give_bounded_report_and_review_pages(
    client, make_client, make_user, db, settings
):
    client.register("ann@example.org")
    ann = db.query(User).filter_by(email="ann@example.org").one()
    for lab in ("env-check", "fp8-step", "tp-sweep", "overlap-trace"):
        job = finished_job(db, settings, ann, lab)
        job.result = inflate(job.result)
        db.commit()
    assert all(len(json.dumps(j.result)) > PAGE_LIMIT for j in db.query(Job))
    client.post(f"/lessons/{LESSON}/report", data={"action": "attach-latest"})
    page = client.get(f"/lessons/{LESSON}/report").text
    picks = dict(
        re.findall(
            r'name="evidence-([a-z0-9-]+)">\s*<option value="">— none —</option>\s*<option value="([^"]+)" selected',
            page,
        )
    )
    # a TINY fp8-step run has no spike, which the numerics item asks for: the learner picks it from the menu
    picks["bf16-fp8-numerics"] = f"job:{db.query(Job).filter_by(lab='fp8-step').one().id}"
    assert len(picks) >= 4  # every required evidence item has its job
    for n in range(1, VERSIONS + 1):
        answers = {"answer-numbers": f"attempt {n}", "answer-overlap": "windowed", "answer-sharding": "TP=4"}
        _submit(client, {**answers, **{f"evidence-{k}": v for k, v in picks.items()}})  # complete: one press

    r = client.get(f"/lessons/{LESSON}/report")
    assert r.status_code == 200
    assert len(r.content) < PAGE_LIMIT, f"report page is {len(r.content):,} bytes"
    print(f"report page: {len(r.content):,} bytes")
    assert 'id="version-5"' in r.text and "attempt 5" in r.text  # the latest in full
    for n in range(1, VERSIONS):  # the others one link each, their answers not on the page
        assert f'href="/lessons/{LESSON}/report?v={n}#version-{n}"' in r.text and f"attempt {n}<" not in r.text
    assert f"Showing the first {MAX_TABLE_ROWS} of {ROWS:,} rows" in r.text
    assert re.search(r"Not shown here: 1,9\d\d more summary rows, 2\d\d more files", r.text)
    assert re.search(r'href="/reports/\d+/versions/5/evidence/[a-z0-9-]+/artifacts/result.json"', r.text)

    older = client.get(f"/lessons/{LESSON}/report?v=2")
    assert older.status_code == 200 and len(older.content) < PAGE_LIMIT
    assert 'id="version-2"' in older.text and "attempt 2" in older.text and "an earlier version" in older.text
    assert client.get(f"/lessons/{LESSON}/report?v=9").status_code == 404

    gina = make_user("gina@example.org", roles=("grader",))
    grading.assign(db, klass=default_class(db), grader=gina, lesson_id=LESSON)
    grader = make_client()
    grader.login("gina@example.org")
    report = db.query(LabReport).one()
    review = grader.get(f"/classes/default/grader/reports/{report.id}")
    assert review.status_code == 200
    assert len(review.content) < PAGE_LIMIT, f"review page is {len(review.content):,} bytes"
    print(f"review page: {len(review.content):,} bytes")
    assert f"Showing the first {MAX_TABLE_ROWS} of {ROWS:,} rows" in review.text


def test_an_excerpt_keeps_small_results_whole_and_cuts_long_text():
    small = {
        "environment": {"label": "CPU emulation", "emulated": True},
        "results": {
            "summary": [{"label": "loss", "value": 1.5}],
            "tables": [{"title": "t", "columns": ["a"], "rows": [[1], [2]]}],
        },
        "artifacts": [{"name": "plot", "title": "Plot", "path": "p.svg", "media_type": "image/svg+xml"}],
    }
    view = excerpt(small)
    assert not view.cut and view.tables[0].rows == [[1], [2]] and view.plots[0].name == "plot"
    long = excerpt(
        {
            **small,
            "environment": {"label": "x" * 5000},
            "results": {"tables": [{"title": "t", "columns": ["a"], "rows": [["y" * 5000]]}]},
        }
    )
    assert len(long.label) == 600 and long.label.endswith("…") and len(long.tables[0].rows[0][0]) == 200
