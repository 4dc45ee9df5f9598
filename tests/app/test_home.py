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
