"""The home page: Start, then Resume, then a completed state once every part of a lesson is done."""

from app.content import load_course
from tests.conftest import ROOT

LESSON = "transformer-scaling"
PARTS = [p.id for p in load_course(ROOT / "lessons").lesson(LESSON).parts]


def _card(html: str) -> str:
    start = html.index(f'href="/lessons/{LESSON}"')
    return html[start : html.index("</li>", start)]


def test_start_resume_then_completed(client):
    client.register("ann@example.org")
    assert ">Start</a>" in _card(client.get("/").text)
    client.post(f"/lessons/{LESSON}/progress/{PARTS[0]}/done", headers={"HX-Request": "true"})
    card = _card(client.get("/").text)
    assert ">Resume</a>" in card and "lesson-complete" not in card
    for part in PARTS[1:]:
        client.post(f"/lessons/{LESSON}/progress/{part}/done", headers={"HX-Request": "true"})
    card = _card(client.get("/").text)
    assert "Resume" not in card
    assert 'data-testid="lesson-complete"' in card and "Completed: every part is done" in card
    assert f'href="/lessons/{LESSON}/report"' in card  # what is left to do: the lab report


def test_each_card_says_what_its_lesson_teaches(client):
    """A newcomer chooses between lessons by their summaries, rendered (maths and all) on the cards."""
    from app.filters import md

    client.register("ann@example.org")
    html = client.get("/").text
    for lesson in load_course(ROOT / "lessons").lessons.values():
        start = html.index(f'href="/lessons/{lesson.id}"')
        card = html[start : html.index("</li>", start)]
        assert str(md(lesson.header.summary)) in card


def test_the_dashboard_counts_each_answered_question_once_and_only_the_learners(client, make_client, db):
    """learning.dashboard reads part rows and answered questions in one statement (on both databases): a
    question answered twice counts once, a wrong try or a multi-step problem's step does not count, and
    another learner's answers never do."""
    from sqlalchemy import select

    from app.models import User
    from app.services import learning

    client.register("ann@example.org")
    make_client().register("eve@example.org", name="Eve")
    ann, eve = (db.scalar(select(User).where(User.email == e)) for e in ("ann@example.org", "eve@example.org"))
    lesson = load_course(ROOT / "lessons").lesson(LESSON)
    first, second, third = list(lesson.questions)[:3]

    def attempt(user, qid, status):
        learning.record_attempt(
            db, user=user, lesson_id=LESSON, version=1, question_id=qid, seed=0, answer="x", status=status
        )

    attempt(ann, first, "correct")
    attempt(ann, first, "correct")
    attempt(ann, second, "answered")
    attempt(ann, third, "incorrect")
    attempt(ann, f"{third}:step-1", "correct")
    for qid in lesson.questions:
        attempt(eve, qid, "correct")
    client.post(f"/lessons/{LESSON}/progress/{PARTS[0]}/done", headers={"HX-Request": "true"})
    card = _card(client.get("/").text)
    assert f"1 of {len(PARTS)} parts done" in card
    assert f"2 of {len(lesson.questions)} questions answered" in card
