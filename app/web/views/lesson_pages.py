"""A lesson part's body, rendered once per lesson version and shared by every learner.

Most of a part (prose, callouts, code traces with their highlighting, concept cards) is the same for
every learner of a version; only pause-and-reason answers (with their "predict, then check" link, which
carries the number the learner wrote), practice questions (each learner's variant, last attempt and saved
text), the learner's own lab runs beside a worked example (`your_run:`) and the footer (the done toggle)
are the learner's own. The shared body is
rendered once with those pieces left as `<!--slot:…-->` markers (templates/lessons/_part.html with
`slots`), split at the markers, and kept per (lesson id, version, content hash, part). Each request then
renders only the slots, with the same templates the fragments use, and joins the pieces.

A learner's pause and question slots are kept too, per (version's content, browser session, learner, the
newest answer and attempt ids): answers and attempts are append-only rows, so any new one changes the key,
and nothing else those slots show can change under the same key. Re-reading a part the learner has not
answered anything on since (the usual case: moving between parts, reloading) renders no slot again. Run
slots (jobs change state) and the footer (the done toggle) are rendered every time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from functools import partial
from typing import Any, TypeVar

from jinja2 import Environment
from markupsafe import Markup

from app.content.schema import Lesson, Part, PauseCheck, SectionBlock
from app.content.tools import CheckLink, pause_link

T = TypeVar("T")


def kept(store: dict[Any, T], limit: int, key: Hashable, build: Callable[[], T]) -> T:
    """`store[key]`, built on first use. A store is per process and bounded: it is emptied when it holds
    `limit` entries (what it keeps is cheap to build again, and the hot entries come back at once)."""
    value = store.get(key)
    if value is None:
        if len(store) >= limit:
            store.clear()
        value = store[key] = build()
    return value


_SLOT = re.compile(r"<!--slot:(pause|question|run|foot)(?::([^ >]+))?-->")
_MAX_BODIES = 512  # parts x versions kept per process; a lesson has ~6 parts, so ~80 versions of it
Piece = str | tuple[str, str]  # shared HTML, or (slot kind, id)
_bodies: dict[tuple, tuple[Piece, ...]] = {}


def _pieces(env: Environment, key: tuple, lesson: Lesson, part: Part, version: int, current_version: int) -> tuple:
    def build() -> tuple[Piece, ...]:
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
        return tuple(pieces)

    return kept(_bodies, _MAX_BODIES, (key, part.id, version == current_version), build)


# A pause's "predict, then check" link is a pure function of the version's check and the learner's text, and
# building it (validating the tool's inputs, encoding the query) was a quarter of a pause slot's time.
_LINKS_KEPT = 4096
_LINK_ANSWER_CHARS = 500  # longer answers are rare: their links are built each time rather than kept
_links: dict[tuple[int, str | None], tuple[PauseCheck, CheckLink]] = {}


def check_link(check: PauseCheck, answer: str | None) -> CheckLink:
    """`pause_link(check, answer)`, kept per (check, answer): what templates/lessons/_pause.html calls."""
    if answer is not None and len(answer) > _LINK_ANSWER_CHARS:
        return pause_link(check, answer)
    key = (id(check), answer)  # safe: the entry holds `check`, so no other object can take its id meanwhile
    return kept(_links, _LINKS_KEPT, key, lambda: (check, pause_link(check, answer)))[1]


# The reference sections outside the timed parts, in the order the pacing list shows them. A lesson has one
# only when it has something to show in it: atlas.yaml, lab.yaml, `references:` in lesson.yaml.
SECTIONS = {"atlas": "Knowledge atlas", "lab": "Hands-on lab", "references": "Go deeper"}


def sections(lesson: Lesson) -> dict[str, str]:
    """The reference sections this lesson has (id -> title, in SECTIONS' order): what the pacing list offers, and
    the only ones `/lessons/<id>/<section>` should answer for (a lesson without lab.yaml has no lab page)."""
    has = {
        "atlas": lesson.atlas is not None,
        "lab": lesson.lab is not None,
        "references": bool(lesson.header.references),
    }
    return {sid: title for sid, title in SECTIONS.items() if has[sid]}


_MISSING = {"atlas": "knowledge atlas", "lab": "hands-on lab", "references": "“Go deeper” links"}


def section_missing(lesson: Lesson, section_id: str) -> str | None:
    """Why `/lessons/<id>/<section_id>` has nothing to show, in the learner's words (the 404's reason), or None
    when the lesson has that section or `section_id` names no section. No page links to a missing one: this
    answers a typed or stale address."""
    if section_id not in SECTIONS or section_id in sections(lesson):
        return None
    return f"Lesson {lesson.number:02d} · {lesson.title} has no {_MISSING[section_id]}."


_PACINGS_KEPT = 4096
_pacings: dict[tuple, tuple[Lesson, Markup]] = {}


def pacing(
    env: Environment, lesson: Lesson, version: int, current_version: int, part_id: str, progress: dict
) -> Markup:
    """The lesson's parts with the learner's done ticks (templates/lessons/_pacing.html), kept per (lesson,
    version, part shown, parts done): every part page and the done toggle show it, and it has more links to
    escape than the rest of the page around the part."""
    done = frozenset(pid for pid, pr in progress.items() if pr.done_at)
    key = (id(lesson), version, current_version, part_id, done)  # safe: the entry holds `lesson` (see check_link)

    def build() -> tuple[Lesson, Markup]:
        html = env.get_template("lessons/_pacing.html").render(
            lesson=lesson,
            version=version,
            current_version=current_version,
            part_id=part_id,
            done=done,
            sections=sections(lesson),
        )
        return lesson, Markup(html)

    return kept(_pacings, _PACINGS_KEPT, key, build)[1]


def labs_shown(part: Part | None) -> list[str]:
    """Labs whose learner runs this part shows (sections' `your_run:`): the route reads them only when
    this is not empty, so parts without one cost no query."""
    if part is None:
        return []
    return sorted({b.your_run for b in part.blocks if isinstance(b, SectionBlock) and b.your_run})


_SLOTS_KEPT = 8192  # ~2-4 KB each: a class of a few hundred learners' recent parts, bounded per process
_slots: dict[tuple, str] = {}


def _learner_key(key: tuple, ctx: dict[str, Any]) -> tuple:
    """What a pause or question slot of this learner depends on besides the slot itself: the version's content
    and whether it is current (answers close on old versions), the session's CSRF token and the learner (their
    variants), and the newest answer and attempt (rows are only ever added, so a new one changes this)."""
    user = ctx.get("user")
    return (
        key,
        ctx["version"],
        ctx["version"] == ctx["current_version"],
        ctx["csrf_token"],
        user.id if user is not None else None,
        max((r.id for r in ctx["responses"].values()), default=0),
        max((a.id for a in ctx["attempts"].values()), default=0),
    )


def render_part(env: Environment, key: tuple, ctx: dict[str, Any]) -> Markup:
    """The part `ctx["part"]` of `ctx["lesson"]` for this learner: shared body plus the learner's slots.

    `key` names the lesson version's content (lessons.Current.key); `ctx` is what _part.html reads (with
    `user` and `csrf_token`).
    """
    lesson, part = ctx["lesson"], ctx["part"]
    pieces = _pieces(env, key, lesson, part, ctx["version"], ctx["current_version"])
    learner = _learner_key(key, ctx)
    out: list[str] = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
        elif piece[0] in ("pause", "question"):
            out.append(kept(_slots, _SLOTS_KEPT, (learner, piece), partial(_render_slot, env, ctx, piece)))
        elif piece[0] == "run":
            lab, _, where = piece[1].partition("@")
            out.append(env.get_template("lessons/_your_run.html").render(ctx, lab=lab, where=where))
        else:
            out.append(env.get_template("lessons/_part_foot.html").render(ctx))
    return Markup("".join(out))


def _render_slot(env: Environment, ctx: dict[str, Any], piece: tuple[str, str]) -> str:
    kind, slot_id = piece
    if kind == "pause":
        pause = next(p for p in ctx["lesson"].pauses if p.id == slot_id)
        return env.get_template("lessons/_pause.html").render(ctx, pause=pause, error=None, draft="")
    return env.get_template("lessons/_question_slot.html").render(ctx, qid=slot_id)
