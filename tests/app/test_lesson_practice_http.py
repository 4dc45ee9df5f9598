"""Multi-step problems, the percentage hint, free-response answers and self-checks, and where every kind of
answer shows its error, through HTTP on both databases."""

import re

import pytest

from app.content import make_variant
from app.core.models import Attempt, Response
from app.services.learning import lessons as lesson_service
from app.services.learning import progress as learning

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
    assert early.status_code == 400 and "Save your written answer first" in early.text
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
    assert bad.status_code == 400 and "numbered 0 to 4" in bad.text
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


# ---------------------------------------------------------------- a written answer, right after saving it

SCALING = "transformer-scaling"
HX = {"HX-Request": "true"}


def _piece(html: str, element_id: str) -> str:
    """The element with this id (a <div>), up to its matching </div>."""
    start = html.index(f'<div class="question" id="{element_id}"')
    depth, at = 0, start
    for m in re.finditer(r"<(/?)div\b", html[start:]):
        depth += -1 if m.group(1) else 1
        if depth == 0:
            at = start + m.end()
            break
    return html[start : html.index(">", at) + 1]


def test_a_written_answer_is_shown_with_the_reference_right_after_saving_as_after_a_reload(learner, db):
    """Saving a written practice answer (htmx) brings back the piece the part shows after a reload: the learner's
    own answer with its time above the reference, the self-check, and a box to revise it; not an emptied box
    beside the reference alone. The badge says the answer is saved, not 'last answer: answered'."""
    _, version, _ = lesson_service.current(db, lesson_id=SCALING)
    qid = "format-roles"
    before = _piece(learner.get(f"/lessons/{SCALING}/practice").text, f"q-{qid}")
    assert "Save and reveal the reference answer" in before and "Reference answer" not in before
    text = "E4M3 for weights & activations, E5M2 for gradients <their range>."
    r = learner.post(f"/lessons/{SCALING}/questions/{qid}", {"answer": text, "version": version}, headers=HX)
    assert r.status_code == 200 and "<html" not in r.text
    saved = db.query(Response).filter_by(item_id=qid).one()
    piece = r.text.strip()
    assert "Your answer (saved " in piece and "E4M3 for weights &amp; activations" in piece
    assert "&lt;their range&gt;" in piece and saved.created_at.strftime("%Y-%m-%d %H:%M") in piece
    assert piece.index("Your answer (saved") < piece.index("Reference answer") < piece.index("Self-check")
    assert piece.index("Self-check") < piece.index("Revise your answer") < piece.index("Save a new answer")
    assert "Save and reveal" not in piece and "answer saved" in piece and "last answer" not in piece
    assert re.search(r"<textarea[^>]*></textarea>", piece)  # the box is for a revision; the answer is above it
    # one template path: the reloaded part shows exactly the piece the answer brought back
    assert _piece(learner.get(f"/lessons/{SCALING}/practice").text, f"q-{qid}") == piece
    # a plain form post (no JavaScript) gets the same piece on a whole page
    again = learner.post(f"/lessons/{SCALING}/questions/{qid}", {"answer": "A second try.", "version": version})
    assert again.status_code == 200 and '<header class="site"' in again.text
    assert "A second try." in _piece(again.text, f"q-{qid}") and "Save a new answer" in again.text


def test_a_refused_revision_keeps_the_saved_answer_and_reference_shown(learner, db):
    """An empty revision is refused under the box, with what was saved and the reference still shown and the
    form still offering a new answer (the pause prompt does the same)."""
    _, version, _ = lesson_service.current(db, lesson_id=SCALING)
    url = f"/lessons/{SCALING}/questions/format-roles"
    learner.post(url, {"answer": "My first answer.", "version": version}, headers=HX)
    r = learner.post(url, {"answer": "   ", "version": version}, headers=HX)
    assert r.status_code == 400
    assert "My first answer." in r.text and "Reference answer" in r.text and "Save a new answer" in r.text
    pause = learner.post(f"/lessons/{SCALING}/pauses/fixed-scale", {"answer": "Clips.", "version": version})
    assert pause.status_code == 200
    refused = learner.post(f"/lessons/{SCALING}/pauses/fixed-scale", {"answer": "", "version": version}, headers=HX)
    assert refused.status_code == 400 and "Clips." in refused.text and "Reference answer" in refused.text
    assert "Revise your answer" in refused.text and "Save a new answer" in refused.text


# ---------------------------------------------------------------- errors: the same on every kind of answer


def _error_at_its_field(html: str, error_id: str) -> str:
    """The error's text, after checking that it sits under its field and before the form's button, and that
    the field is marked invalid and described by it. Returns the message."""
    err = re.search(rf'<p class="error" role="alert" id="{re.escape(error_id)}">(.*?)</p>', html, re.S)
    assert err, f"no error #{error_id} in {html[:3000]}"

    def described_by(tag: str) -> list[str]:
        m = re.search(r'aria-describedby="([^"]*)"', tag)
        return m.group(1).split() if m else []

    fields = [
        m for m in re.finditer(r"<(input|textarea|fieldset)\b[^>]*>", html) if error_id in described_by(m.group(0))
    ]
    assert fields, f"no field is described by #{error_id}"
    field = fields[0]
    controls = (
        re.findall(r"<input[^>]*>", html[field.end() : err.start()])
        if field.group(1) == "fieldset"
        else [field.group(0)]
    )
    assert controls and all('aria-invalid="true"' in c for c in controls), controls
    button = html.index('<button type="submit"', field.end())
    assert field.start() < err.start() < button, "the error must sit under its field, before the button"
    return err.group(1).strip()


@pytest.mark.parametrize(
    ("url", "data", "error_id", "says"),
    [
        (f"/lessons/{SCALING}/pauses/fixed-scale", {"answer": " "}, "pause-fixed-scale-error", "Write an answer"),
        (f"/lessons/{SCALING}/questions/format-roles", {"answer": ""}, "q-format-roles-error", "Write an answer"),
        (f"/lessons/{SCALING}/questions/wide-layer-axis", {}, "q-wide-layer-axis-error", "Pick one of the options"),
        (f"/lessons/{SCALING}/questions/fp8-step-time", {"answer": ""}, "q-fp8-step-time-error", "Type a number"),
        (
            f"/lessons/{PLAN}/questions/tp8-zero1-70b/steps/total-state",
            {"answer": ""},
            "q-tp8-zero1-70b-total-state-error",
            "Type a number",
        ),
        (
            f"/lessons/{PLAN}/questions/tp8-zero1-70b/steps/third-option",
            {},
            "q-tp8-zero1-70b-third-option-error",
            "Pick one of the options",
        ),
    ],
    ids=["pause", "written", "choice", "numeric", "step-numeric", "step-choice"],
)
def test_an_empty_answer_is_refused_the_same_way_on_every_kind(learner, db, url, data, error_id, says):
    """Whatever the kind of question, an empty answer's error sits right under the field (before the button),
    the field is aria-invalid and aria-describedby the error, and the message is a sentence naming what is
    needed; nothing is recorded."""
    lesson_id = url.split("/")[2]
    _, version, _ = lesson_service.current(db, lesson_id=lesson_id)
    data = {**data, "version": version}
    if "fp8-step-time" in url:
        data["seed"] = learning.variant_seed(_me(learner), "fp8-step-time")
    for headers in (HX, {}):  # htmx gets the piece, a plain post the piece on a page: the same markup
        r = learner.post(url, data, headers=headers)
        assert r.status_code == 400
        message = _error_at_its_field(r.text, error_id)
        assert message.startswith(says) and message[0].isupper() and message.endswith("."), message
    assert db.query(Attempt).count() == 0 and db.query(Response).count() == 0


def test_a_refused_self_check_shows_its_error_before_its_button(learner, db):
    _, version, _ = lesson_service.current(db, lesson_id=PLAN)
    url = f"/lessons/{PLAN}/questions/defend-plan"
    learner.post(url, {"answer": "Shard in the node.", "version": version})
    r = learner.post(f"{url}/self-check", {"point": ["9"], "version": version}, headers=HX)
    assert r.status_code == 400
    message = _error_at_its_field(r.text, "selfcheck-defend-plan-error")
    assert message.startswith("Tick only the points listed") and message.endswith(".")


def test_a_unitless_answer_names_what_it_counts_and_a_known_mistake_is_explained(learner, db):
    """budget-gpu-hours has no unit to convert, but its box says GPU-hours, the learner may type them, and the
    feedback names them; an answer that counts 2·N·D is told so, and it is a try."""
    lesson, version, _ = lesson_service.current(db, lesson_id=PLAN)
    q = lesson.questions["budget-gpu-hours"]
    page = learner.get(f"/lessons/{PLAN}/compute-budget").text
    assert 'for="q-budget-gpu-hours-answer">Your answer (in GPU-hours)</label>' in page
    seed = learning.variant_seed(_me(learner), "budget-gpu-hours")
    v = make_variant(q, seed)
    url = f"/lessons/{PLAN}/questions/budget-gpu-hours"
    third = learner.post(url, {"answer": f"{v.answer / 3:.1f}", "version": version, "seed": seed}).text
    assert "the forward pass alone" in third and " GPU-hours. That counts 2·N·D" in third
    assert db.query(Attempt).filter_by(question_id="budget-gpu-hours").count() == 1
    typed = learner.post(url, {"answer": f"{v.answer:.1f} GB", "version": version, "seed": seed})
    assert typed.status_code == 400 and "Type the number of GPU-hours alone; drop “GB”." in typed.text
    right = learner.post(url, {"answer": f"{v.answer:.1f} GPU-hours", "version": version, "seed": seed}).text
    assert "Correct" in right and "GPU-hours" in right
    assert [a.status for a in db.query(Attempt).filter_by(question_id="budget-gpu-hours")] == ["incorrect", "correct"]


def test_checking_a_step_keeps_the_earlier_steps_answers_in_their_boxes(learner, db):
    _, version, _ = lesson_service.current(db, lesson_id=PLAN)
    url = f"/lessons/{PLAN}/questions/tp8-zero1-70b/steps"
    learner.post(f"{url}/total-state", {"answer": "1120 GB", "version": version})
    learner.post(f"{url}/third-option", {"answer": "A", "version": version})
    html = learner.post(f"{url}/fsdp-node", {"answer": "141", "version": version}).text
    assert re.search(r'id="q-tp8-zero1-70b-total-state-answer"[^>]*value="1120 GB"', html)
    assert re.search(r'id="q-tp8-zero1-70b-fsdp-node-answer"[^>]*value="141"', html)
    assert re.search(r'id="q-tp8-zero1-70b-third-option-A"[^>]*value="A" checked', html)
    assert re.search(r'id="q-tp8-zero1-70b-tp8-zero1-answer"[^>]*value=""', html)  # never tried: blank
