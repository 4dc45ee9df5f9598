"""A lesson part's body, rendered once per lesson version and shared by every learner.

Most of a part (prose, callouts, code traces with their highlighting, concept cards) is the same for
every learner of a version; only pause-and-reason answers (with their "predict, then check" link, which
carries the number the learner wrote), practice questions (each learner's variant, last attempt and saved
text), the learner's own lab runs beside a worked example (`your_run:`) and the footer (the done toggle)
are the learner's own. The shared body is
rendered once with those pieces left as `<!--slot:…-->` markers (templates/lessons/_part.html with
`slots`), split at the markers, and kept per (lesson id, version, content hash, part). Each request then
renders only the slots, with the same templates the fragments use, and joins the pieces.
"""

from __future__ import annotations

import re
from typing import Any

from jinja2 import Environment
from markupsafe import Markup

from app.content.schema import Lesson, Part, PauseCheck, SectionBlock
from app.content.tools import CheckLink

_SLOT = re.compile(r"<!--slot:(pause|question|run|foot)(?::([^ >]+))?-->")
_MAX_BODIES = 512  # parts x versions kept per process; a lesson has ~6 parts, so ~80 versions of it
Piece = str | tuple[str, str]  # shared HTML, or (slot kind, id)
_bodies: dict[tuple, tuple[Piece, ...]] = {}


def _pieces(env: Environment, key: tuple, lesson: Lesson, part: Part, version: int, current_version: int) -> tuple:
    cached = _bodies.get((key, part.id, version == current_version))
    if cached is not None:
        return cached
    html = env.get_template("lessons/_part.html").render(
        lesson=lesson, part=part, version=version, current_version=current_version, slots=True
    )
    pieces: list[Piece] = []
    at = 0
    for m in _SLOT.finditer(html):
        pieces.append(html[at : m.start()])
        pieces.append((m.group(1), m.group(2) or ""))
        at = m.end()
    pieces.append(html[at:])
    if len(_bodies) >= _MAX_BODIES:
        _bodies.clear()
    result = tuple(pieces)
    _bodies[(key, part.id, version == current_version)] = result
    return result


# A pause's "predict, then check" link is a pure function of the version's check and the learner's text, and
# building it (validating the tool's inputs, encoding the query) was a quarter of a pause slot's time.
_LINKS_KEPT = 4096
_LINK_ANSWER_CHARS = 500  # longer answers are rare: their links are built each time rather than kept
_links: dict[tuple[int, str | None], tuple[PauseCheck, CheckLink]] = {}


def check_link(check: PauseCheck, answer: str | None) -> CheckLink:
    """`check.link(answer)`, kept per (check, answer): what templates/lessons/_pause.html calls."""
    if answer is not None and len(answer) > _LINK_ANSWER_CHARS:
        return check.link(answer)
    key = (id(check), answer)  # safe: the entry holds `check`, so no other object can take its id meanwhile
    kept = _links.get(key)
    if kept is None:
        if len(_links) >= _LINKS_KEPT:
            _links.clear()
        kept = _links[key] = (check, check.link(answer))
    return kept[1]


def labs_shown(part: Part | None) -> list[str]:
    """Labs whose learner runs this part shows (sections' `your_run:`): the route reads them only when
    this is not empty, so parts without one cost no query."""
    if part is None:
        return []
    return sorted({b.your_run for b in part.blocks if isinstance(b, SectionBlock) and b.your_run})


def render_part(env: Environment, key: tuple, ctx: dict[str, Any]) -> Markup:
    """The part `ctx["part"]` of `ctx["lesson"]` for this learner: shared body plus the learner's slots.

    `key` names the lesson version's content (lessons.Current.key); `ctx` is what _part.html reads.
    """
    lesson, part = ctx["lesson"], ctx["part"]
    pieces = _pieces(env, key, lesson, part, ctx["version"], ctx["current_version"])
    pauses = {p.id: p for p in lesson.pauses}
    out: list[str] = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
        elif piece[0] == "pause":
            out.append(
                env.get_template("lessons/_pause.html").render(ctx, pause=pauses[piece[1]], error=None, draft="")
            )
        elif piece[0] == "run":
            out.append(env.get_template("lessons/_your_run.html").render(ctx, lab=piece[1]))
        elif piece[0] == "question":
            out.append(env.get_template("lessons/_question_slot.html").render(ctx, qid=piece[1]))
        else:
            out.append(env.get_template("lessons/_part_foot.html").render(ctx))
    return Markup("".join(out))
