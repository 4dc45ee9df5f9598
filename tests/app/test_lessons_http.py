"""Lesson pages, written answers, practice grading and progress, through HTTP on both databases."""

import re

import pytest

from app.content import make_variant
from app.core.models import Attempt, PartProgress, Response
from app.services.learning import lessons as lesson_service
from app.services.learning import progress as learning

LESSON = "transformer-scaling"


@pytest.fixture
def learner(client):
    client.register("ann@example.org")
    return client


def _me(client) -> int:
    return client.get("/api/v1/me").json()["id"]


def test_lesson_resumes_where_left_off(learner):
    r = learner.get(f"/lessons/{LESSON}", follow_redirects=False)
    assert r.headers["location"] == f"/lessons/{LESSON}/orient"
    assert learner.get(f"/lessons/{LESSON}/code-trace").status_code == 200
    r = learner.get(f"/lessons/{LESSON}", follow_redirects=False)
    assert r.headers["location"] == f"/lessons/{LESSON}/code-trace"


@pytest.mark.parametrize("htmx", [False, True])
def test_part_page_and_fragment(learner, htmx):
    headers = {"HX-Request": "true"} if htmx else {}
    r = learner.get(f"/lessons/{LESSON}/deep-dives", headers=headers)
    assert ("<html" in r.text) is not htmx  # the fragment is the same template's block
    assert "Pause and reason" in r.text and 'aria-current="page"' in r.text
    assert "HX-Request" in r.headers["vary"]  # a cache keeps the page and the fragment apart


def test_going_back_through_htmx_history_gets_the_whole_page(learner):
    """A history restore (HX-History-Restore-Request; htmx 2 sent HX-Request with it) puts the answer in place
    of <body>: a fragment there would leave the learner on a page without its header and pacing."""
    headers = {"HX-Request": "true", "HX-History-Restore-Request": "true", "HX-Request-Type": "full"}
    html = learner.get(f"/lessons/{LESSON}/deep-dives", headers=headers).text
    assert "<html" in html and 'id="pacing"' in html and "Pause and reason" in html


def test_unknown_lesson_and_part_are_404(learner):
    assert learner.get("/lessons/nope").status_code == 404
    assert learner.get(f"/lessons/{LESSON}/nope").status_code == 404


def test_pause_answer_is_saved_before_reveal(learner, db):
    html = learner.get(f"/lessons/{LESSON}/deep-dives").text
    pause_id = re.search(r'id="pause-([a-z0-9-]+)"', html).group(1)
    empty = learner.post(f"/lessons/{LESSON}/pauses/{pause_id}", {"answer": "  ", "version": 1})
    assert empty.status_code == 400 and "Write an answer first" in empty.text
    assert db.query(Response).count() == 0
    r = learner.post(f"/lessons/{LESSON}/pauses/{pause_id}", {"answer": "distributions drift", "version": 1})
    assert r.status_code == 200 and "Reference answer" in r.text and "distributions drift" in r.text
    learner.post(f"/lessons/{LESSON}/pauses/{pause_id}", {"answer": "second thoughts", "version": 1})
    assert [x.text for x in db.query(Response).order_by(Response.id)] == ["distributions drift", "second thoughts"]
    too_long = learner.post(f"/lessons/{LESSON}/pauses/{pause_id}", {"answer": "x" * 5001, "version": 1})
    assert too_long.status_code == 400 and "under 5000 characters" in too_long.text
    assert "x" * 100 in too_long.text  # the draft is handed back, not lost


def test_single_choice_feedback_per_option(learner, db):
    lesson, version, _ = lesson_service.current(db, lesson_id=LESSON)
    qid, q = next((k, v) for k, v in lesson.questions.items() if v.kind == "single_choice")
    for option in q.body.options:
        r = learner.post(f"/lessons/{LESSON}/questions/{qid}", {"answer": option.id, "version": version})
        assert r.status_code == 200
        assert ("Correct." in r.text) is option.correct
    bad = learner.post(f"/lessons/{LESSON}/questions/{qid}", {"answer": "Z", "version": version})
    assert bad.status_code == 400 and "Pick one of the options" in bad.text
    assert db.query(Attempt).count() == len(q.body.options)


def test_numeric_variant_graded_and_bad_input_not_counted(learner, db):
    lesson, version, _ = lesson_service.current(db, lesson_id=LESSON)
    qid, q = next((k, v) for k, v in lesson.questions.items() if v.kind == "numeric" and v.body.generator)
    seed = learning.variant_seed(_me(learner), qid)
    variant = make_variant(q, seed)
    assert f'name="seed" value="{seed}"' in learner.get(f"/lessons/{LESSON}/practice").text
    answer = f"{variant.answer} {q.body.unit}".strip()
    r = learner.post(f"/lessons/{LESSON}/questions/{qid}", {"answer": answer, "version": version, "seed": seed})
    assert r.status_code == 200 and "Correct." in r.text
    r = learner.post(f"/lessons/{LESSON}/questions/{qid}", {"answer": "lots", "version": version, "seed": seed})
    assert r.status_code == 400 and 'aria-invalid="true"' in r.text
    r = learner.post(f"/lessons/{LESSON}/questions/{qid}", {"answer": "1", "version": version, "seed": seed + 1})
    assert r.status_code == 400 and "different variant" in r.text
    attempts = db.query(Attempt).all()
    assert [(a.status, a.variant_seed, a.lesson_version) for a in attempts] == [("correct", seed, version)]


def test_stale_version_is_refused_and_text_kept(learner, db):
    lesson, version, _ = lesson_service.current(db, lesson_id=LESSON)
    qid = next(k for k, v in lesson.questions.items() if v.kind == "free_response")
    row = lesson_service.latest_row(db, lesson_id=LESSON)
    files = dict(row.files)
    files["lesson.yaml"] = files["lesson.yaml"].replace(
        "title: Transformer Scaling", "title: Transformer Scaling (revised)"
    )
    new_version, errors = lesson_service.publish(db, lesson_id=LESSON, files=files, source="editor")
    assert errors == [] and new_version == version + 1
    r = learner.post(f"/lessons/{LESSON}/questions/{qid}", {"answer": "my careful answer", "version": version})
    assert r.status_code == 400 and f"updated to version {new_version}" in r.text and "my careful answer" in r.text
    assert db.query(Response).count() == 0
    # The old version stays readable, read-only; the current one carries the new title.
    old = learner.get(f"/lessons/{LESSON}/orient?v={version}").text
    assert f"You are reading version {version}" in old
    assert "Transformer Scaling (revised)" in learner.get(f"/lessons/{LESSON}/orient").text
    assert learner.get(f"/lessons/{LESSON}/orient?v=99").status_code == 404


def test_progress_done_time_and_dashboard(learner, db):
    learner.get(f"/lessons/{LESSON}/orient")
    r = learner.post(f"/lessons/{LESSON}/progress/orient/done", headers={"HX-Request": "true"})
    assert r.status_code == 200 and 'aria-label="done"' in r.text
    assert learner.post(f"/lessons/{LESSON}/progress/orient/time", {"seconds": 20}).status_code == 204
    row = db.query(PartProgress).filter_by(part_id="orient").one()
    assert row.done_at is not None and 0 < row.seconds_spent <= 20
    bad = learner.post(f"/lessons/{LESSON}/progress/orient/time", {"seconds": -5})
    assert bad.status_code == 422
    home = learner.get("/").text
    assert "1 of 6 parts done" in home and "Resume" in home


def test_the_done_toggle_marks_and_unmarks_and_its_label_follows(learner, db):
    """htmx swaps the pacing list; the toggle comes back out of band, so it says what a click would do next."""
    hx = {"HX-Request": "true"}
    assert "Mark this part as done" in learner.get(f"/lessons/{LESSON}/orient").text
    r = learner.post(f"/lessons/{LESSON}/progress/orient/done", {"done": "1"}, headers=hx)
    assert r.status_code == 200 and 'aria-label="done"' in r.text  # the pacing tick
    toggle = r.text[r.text.index('<form id="done-form"') :]
    assert 'hx-swap-oob="true"' in toggle and "Mark as not done" in toggle and 'name="done" value="0"' in toggle
    page = learner.get(f"/lessons/{LESSON}/orient").text
    assert "Mark as not done" in page and "Mark this part as done" not in page
    assert db.query(PartProgress).filter_by(part_id="orient").one().done_at is not None
    r = learner.post(f"/lessons/{LESSON}/progress/orient/done", {"done": "0"}, headers=hx)
    assert 'aria-label="done"' not in r.text
    toggle = r.text[r.text.index('<form id="done-form"') :]
    assert "Mark this part as done" in toggle and 'name="done" value="1"' in toggle
    db.expire_all()
    assert db.query(PartProgress).filter_by(part_id="orient").one().done_at is None
    assert "Mark this part as done" in learner.get(f"/lessons/{LESSON}/orient").text


def test_answers_are_per_learner(learner, make_client, db):
    lesson, version, _ = lesson_service.current(db, lesson_id=LESSON)
    pause_id = lesson.pauses[0].id
    learner.post(f"/lessons/{LESSON}/pauses/{pause_id}", {"answer": "ann's private thought", "version": version})
    bob = make_client()
    bob.register("bob@example.org", name="Bob")
    assert "ann's private thought" not in bob.get(f"/lessons/{LESSON}/deep-dives").text


def _pacing(html: str) -> str:
    return html[html.index('id="pacing"') : html.index("</nav>", html.index('id="pacing"'))]


def _header(html: str) -> str:
    return html[html.index('<header class="lesson-head"') : html.index("</header>", html.index("lesson-head"))]


@pytest.mark.parametrize(
    "lesson_id, first, last, interactive",
    [
        ("precision-by-numbers", "formats", "collectives-memory", False),
        ("planning-at-scale", "compute-budget", "plan", True),
    ],
)
def test_a_lesson_without_a_lab_offers_none(learner, lesson_id, first, last, interactive):
    """Lessons 07 and 08 have no lab.yaml (and no atlas.yaml): no page of theirs links to a lab or an atlas, and
    the last part leads on to what the lesson does have, its "Go deeper" links."""
    for part in (first, last):
        html = learner.get(f"/lessons/{lesson_id}/{part}").text
        assert "Hands-on lab" not in html and f"/lessons/{lesson_id}/lab" not in html, part
        assert "Knowledge atlas" not in html and f"/lessons/{lesson_id}/atlas" not in html, part
        pacing = _pacing(html)
        assert "Outside the core time" in pacing and f'href="/lessons/{lesson_id}/references"' in pacing
        # the header still offers the interactive lesson where there is one (lesson 08's memory tool)
        assert ('href="/play"' in _header(html)) is interactive
    foot = html[html.index('<footer class="part-foot">') :]
    assert re.search(rf'<a class="next" href="/lessons/{lesson_id}/references"[^>]*>Go deeper →</a>', foot)


def test_a_lesson_with_a_lab_still_offers_it_everywhere(learner):
    html = learner.get(f"/lessons/{LESSON}/orient").text
    assert f'<a class="keep" href="/lessons/{LESSON}/lab">Hands-on lab</a>' in _header(html)  # no "Hands-/on"
    pacing = _pacing(html)
    for sid, title in (("atlas", "Knowledge atlas"), ("lab", "Hands-on lab"), ("references", "Go deeper")):
        assert re.search(rf'href="/lessons/{LESSON}/{sid}"[^>]*>{title}</a>', pacing), sid
    last = learner.get(f"/lessons/{LESSON}/practice").text
    foot = last[last.index('<footer class="part-foot">') :]
    assert re.search(rf'<a class="next" href="/lessons/{LESSON}/lab"[^>]*>Hands-on lab →</a>', foot)
    lab = learner.get(f"/lessons/{LESSON}/lab")
    assert lab.status_code == 200 and 'aria-current="page">Hands-on lab</a>' in _pacing(lab.text)


def test_a_section_the_lesson_lacks_is_404_with_the_reason(learner):
    r = learner.get("/lessons/planning-at-scale/lab")
    assert r.status_code == 404 and "Lesson 08 · Planning a run by the numbers has no hands-on lab." in r.text
    assert learner.get("/lessons/planning-at-scale/atlas").status_code == 404
    assert learner.get("/lessons/planning-at-scale/references").status_code == 200


def test_the_lab_page_keeps_its_eyebrow_short_and_says_each_evidence_item_once(learner):
    html = learner.get(f"/lessons/{LESSON}/lab").text
    eyebrow = re.search(r'<p class="eyebrow">([^<]*)</p>\s*<h2 id="lab-h">', html).group(1)
    assert eyebrow == "Optional hands-on lab · 45–70 min"  # kind · time, not a sentence in capitals
    assert re.search(r"<p>Outside the lesson&#39;s core time\. Best on a CUDA GPU with FP8 support;[^<]*</p>", html)
    item = re.search(r'<li id="evidence-static-trace">(.*?)</li>', html, re.S).group(1)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", item))
    assert text.startswith("on unsupported hardware Static recipe and shape trace: Without a suitable GPU")
    assert text.lower().count("unsupported hardware") == 1 and " :" not in text


def test_a_pause_prompt_links_to_the_lab_preset_it_names(learner):
    """Lesson 09's pauses ask the learner to run a named preset: the prompt is inline Markdown, so the link is a
    link, not '[GPipe against 1F1B](/labs/...)' typed out."""
    html = learner.get("/lessons/parallelism-measured/pipeline-lab").text
    prompt = re.search(r'<p class="prompt" id="pause-[^"]+-prompt">(.*?)</p>', html, re.S).group(1)
    assert re.search(r'<a href="/labs/pipeline\?preset=gpipe-against-1f1b"[^>]*>GPipe against 1F1B</a>', prompt), prompt
    assert "](/labs" not in html


@pytest.mark.parametrize(
    ("lesson", "says"),
    [
        ("transformer-scaling", "The report is one of this lab's evidence items."),
        ("parallelism-measured", "Run it once before the labs below"),
    ],
)
def test_the_environment_check_is_called_evidence_only_where_the_lab_asks_for_it(learner, lesson, says):
    page = learner.get(f"/lessons/{lesson}/lab").text
    assert says in page
    assert "first evidence item" not in page
