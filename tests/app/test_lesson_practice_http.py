"""Multi-step problems, the percentage hint and free-response self-checks, through HTTP on both databases."""

import pytest

from app.content import make_variant
from app.models import Attempt, Response
from app.services import learning
from app.services import lessons as lesson_service

PLAN = "planning-at-scale"


@pytest.fixture
def learner(client):
    client.register("ann@example.org")
    return client


def _me(client) -> int:
    return client.get("/api/v1/me").json()["id"]


def test_a_problem_is_checked_step_by_step_and_solutions_open_after_a_try(learner, db):
    lesson, version, _ = lesson_service.current(db, lesson_id=PLAN)
    problem = lesson.questions["tp8-zero1-70b"].body
    page = learner.get(f"/lessons/{PLAN}/plan").text
    assert "Worked step 1" not in page and "opens after your first try" in page
    url = f"/lessons/{PLAN}/questions/tp8-zero1-70b/steps"
    wrong = learner.post(f"{url}/total-state", {"answer": "112 GB", "version": version})
    assert wrong.status_code == 200 and "Not yet" in wrong.text and "Worked step 1" in wrong.text
    garbage = learner.post(f"{url}/total-state", {"answer": "a lot", "version": version})
    assert garbage.status_code == 400 and "is not a number" in garbage.text
    assert db.query(Attempt).count() == 1  # the malformed answer was not a try
    right = {
        "total-state": "1120 GB",
        "fsdp-node": "140",
        "fsdp-all": "17.5 GB",
        "third-option": "A",
        "tp8-zero1": "48.1",
        "activations": "11.4",
    }
    for step in problem.steps:
        r = learner.post(f"{url}/{step.id}", {"answer": right[step.id], "version": version})
        assert r.status_code == 200 and "Correct." in r.text, (step.id, r.text[-2000:])
    assert "Every step is right" in r.text and "48.1" in r.text
    whole = db.query(Attempt).filter_by(question_id="tp8-zero1-70b").all()
    assert [a.status for a in whole] == ["correct"]  # the problem itself, recorded once when the last step is right
    assert learner.post(f"{url}/nope", {"answer": "1", "version": version}).status_code == 404
    assert learner.post(f"/lessons/{PLAN}/questions/state-per-gpu/steps/x", {"answer": "1"}).status_code == 404


def test_stale_version_keeps_the_step_answer(learner, db):
    _, version, _ = lesson_service.current(db, lesson_id=PLAN)
    r = learner.post(f"/lessons/{PLAN}/questions/plan-7b/steps/ddp-state", {"answer": "112", "version": version + 5})
    assert r.status_code == 400 and "updated to version" in r.text and 'value="112"' in r.text
    assert db.query(Attempt).count() == 0


def test_a_fraction_for_a_percentage_is_a_hint_not_an_attempt(learner, db):
    lesson, version, _ = lesson_service.current(db, lesson_id="precision-by-numbers")
    q = lesson.questions["pipeline-bubble"]
    seed = learning.variant_seed(_me(learner), "pipeline-bubble")
    v = make_variant(q, seed)
    data = {"answer": f"{v.answer / 100:.4f}", "version": version, "seed": seed}
    r = learner.post("/lessons/precision-by-numbers/questions/pipeline-bubble", data)
    assert r.status_code == 400 and "As a percentage?" in r.text
    assert db.query(Attempt).count() == 0
    data["answer"] = f"{v.answer:.2f}"
    assert "Correct." in learner.post("/lessons/precision-by-numbers/questions/pipeline-bubble", data).text


def test_self_check_is_saved_with_the_answer(learner, db):
    _, version, _ = lesson_service.current(db, lesson_id=PLAN)
    url = f"/lessons/{PLAN}/questions/defend-plan"
    early = learner.post(f"{url}/self-check", {"point": ["0"], "version": version})
    assert early.status_code == 400 and "save your written answer first" in early.text
    r = learner.post(url, {"answer": "Shard in the node, replicate across nodes.", "version": version})
    assert r.status_code == 200 and "Self-check: which of these points" in r.text
    saved = learner.post(f"{url}/self-check", {"point": ["0", "2"], "version": version})
    assert saved.status_code == 200 and "2 of 5 points" in saved.text
    answer = db.query(Response).filter_by(kind="free_response").one()
    check = db.query(Response).filter_by(kind="self_check").one()
    assert check.item_id == "defend-plan:self-check" and check.text == f"0,2@{answer.id}"
    page = learner.get(f"/lessons/{PLAN}/plan").text
    assert 'id="sc-defend-plan-0" name="point" value="0" checked' in page
    bad = learner.post(f"{url}/self-check", {"point": ["7"], "version": version})
    assert bad.status_code == 400 and "points are numbered 0 to 4" in bad.text
    # A newer answer starts unticked; the old ticks stay in the table, tied to the old answer.
    learner.post(url, {"answer": "A second, better answer.", "version": version})
    page = learner.get(f"/lessons/{PLAN}/plan").text
    assert "newer answer since your last self-check" in page and 'value="0" checked' not in page
    assert db.query(Response).filter_by(kind="self_check").count() == 1


def test_an_answer_sent_without_javascript_comes_back_as_a_whole_page(learner, db):
    """htmx swaps the answered piece in place; a plain form post (no JavaScript) gets the same piece in a whole
    page, in the site's frame, with a link back to the part at that piece."""
    _, version, _ = lesson_service.current(db, lesson_id=PLAN)
    url = f"/lessons/{PLAN}/questions/tp8-zero1-70b/steps/total-state"
    piece = learner.post(url, {"answer": "112 GB", "version": version}, headers={"HX-Request": "true"})
    assert piece.status_code == 200 and "Not yet" in piece.text
    assert "<html" not in piece.text and piece.text.lstrip().startswith('<div class="question multistep"')
    page = learner.post(url, {"answer": "1120 GB", "version": version})
    assert page.status_code == 200 and "Correct." in page.text
    assert '<header class="site"' in page.text and f'href="/lessons/{PLAN}/plan#q-tp8-zero1-70b"' in page.text
    bad = learner.post(url, {"answer": "a lot", "version": version})  # an error keeps what was typed, on a page
    assert bad.status_code == 400 and '<header class="site"' in bad.text and 'value="a lot"' in bad.text
