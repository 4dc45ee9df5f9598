"""A learner's trail through a lesson: part progress and time, written answers, graded attempts.

Written answers and attempts are append-only rows: a new answer never overwrites an old one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import Float, Integer, String, Table, Text, bindparam, case, cast, func, literal, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.content.schema import Lesson
from app.core.models import Attempt, PartProgress, Person, Response, User, UTCDateTime, utcnow
from app.core.sqltime import epoch_s
from app.services.errors import FieldError

MAX_ANSWER_CHARS = 5000
# Reading time: the page counts the seconds its part is on screen and reports them at most once a minute, and the
# rest when the part is hidden or left (static/reading.js). One report credits no more than MAX_REPORT_S, nor more
# than the wall time since the part's last accepted report plus REPORT_SLACK_S (two tabs on one part, or a forged
# report, cannot add faster than a clock).
REPORT_EVERY_S = 60
MAX_REPORT_S = 90  # a minute's report, with room for a timer that fired late in a busy tab
REPORT_SLACK_S = 2  # reports travel different connections: one can land a little early against the last one
# A re-read of the part the learner already saw last, within this long, changes nothing worth a database
# write: resuming goes to the same part either way, and reading time comes from the beacon, not from views.
VISIT_REFRESH_S = 60


class AnswerError(FieldError):
    pass


def variant_seed(user_id: int, question_id: str) -> int:
    """Each learner's own, stable variant of a parameterized question."""
    digest = hashlib.sha256(f"{user_id}:{question_id}".encode()).hexdigest()
    return int(digest[:8], 16) % 1_000_000


def check_answer_text(text: str, field: str = "answer") -> str:
    text = (text or "").strip()
    if not text:
        raise AnswerError(field, "Write an answer first (it is saved before anything is revealed).")
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerError(field, f"Keep it under {MAX_ANSWER_CHARS} characters (yours has {len(text)}).")
    return text


def _progress_row(db: Session, user: Person, lesson_id: str, part_id: str) -> PartProgress:
    row = db.scalar(
        select(PartProgress).where(
            PartProgress.user_id == user.id, PartProgress.lesson_id == lesson_id, PartProgress.part_id == part_id
        )
    )
    if row is None:
        row = PartProgress(user_id=user.id, lesson_id=lesson_id, part_id=part_id, seconds_spent=0)
        db.add(row)
        try:
            db.flush()
        except IntegrityError:  # two tabs opened the part at once
            db.rollback()
            return _progress_row(db, user, lesson_id, part_id)
    return row


def visit(db: Session, *, user: Person, lesson_id: str, part_id: str, version: int | None = None) -> None:
    """Record that the learner opened a part (where "resume" goes) and, given, the lesson version they read it
    under (what `version_read` goes by). A page asks `visit_due` first, so a repeat view of the latest-seen
    part writes nothing."""
    row = _progress_row(db, user, lesson_id, part_id)
    row.last_seen_at = utcnow()
    if version is not None:
        row.version_seen = version
    db.commit()


def visit_due(
    progress: dict[str, PartProgress] | dict[str, ProgressView], part_id: str, version: int | None = None
) -> bool:
    """Whether opening `part_id` needs `visit` to write: not when it is already the latest-seen part, seen
    within VISIT_REFRESH_S, under `version` when one is given (a page reads this first, so a plain re-read
    never waits on a write)."""
    row = progress.get(part_id)
    latest = max((r.last_seen_at for r in progress.values()), default=None)
    return not (
        row is not None
        and row.last_seen_at == latest
        and (utcnow() - row.last_seen_at).total_seconds() < VISIT_REFRESH_S
        and (version is None or row.version_seen == version)
    )


def version_read(progress: dict[str, PartProgress] | dict[str, ProgressView]) -> int | None:
    """The newest lesson version the learner opened any part of this lesson under; None when no part of it was
    recorded with a version (never opened, or only before versions were recorded: nothing to compare)."""
    return max((r.version_seen for r in progress.values() if r.version_seen is not None), default=None)


_PP: Table = PartProgress.__table__  # type: ignore[assignment]  # a declarative class's table is a Table
_SINCE = bindparam("now_s", type_=Float()) - epoch_s(_PP.c.time_reported_at) + REPORT_SLACK_S
_SECONDS = bindparam("seconds", type_=Integer())
_CREDIT = case(
    (_PP.c.time_reported_at.is_(None), _SECONDS),
    (_SINCE >= _SECONDS, _SECONDS),
    (_SINCE > 0, cast(_SINCE, Integer)),
    else_=literal(0, Integer()),
)
# Core, not the ORM: an ORM bulk update first works out which loaded objects it touches, which cost more than the
# statement itself.
_ADD_TIME = (
    update(_PP)
    .where(
        _PP.c.user_id == bindparam("for_user"),
        _PP.c.lesson_id == bindparam("for_lesson"),
        _PP.c.part_id == bindparam("for_part"),
    )
    .values(seconds_spent=_PP.c.seconds_spent + _CREDIT, time_reported_at=bindparam("now", type_=UTCDateTime()))
)


def add_time(db: Session, *, user: Person, lesson_id: str, part_id: str, seconds: int) -> None:
    """Credit a report of reading time, bounded as REPORT_EVERY_S says. One UPDATE when the part's row exists (the
    page's visit made it): bound and credit in one statement, so two tabs reporting at once cannot both be
    credited the same minute."""
    now = utcnow()
    params = {
        "for_user": user.id,
        "for_lesson": lesson_id,
        "for_part": part_id,
        "seconds": max(0, min(int(seconds), MAX_REPORT_S)),
        "now": now,
        "now_s": now.timestamp(),
    }
    if not db.connection().execute(_ADD_TIME, params).rowcount:  # no row yet: the page's visit was not recorded
        _progress_row(db, user, lesson_id, part_id)
        db.connection().execute(_ADD_TIME, params)
    db.commit()


def set_done(db: Session, *, user: User, lesson_id: str, part_id: str, done: bool = True) -> PartProgress:
    row = _progress_row(db, user, lesson_id, part_id)
    row.done_at = utcnow() if done else None
    row.last_seen_at = utcnow()
    db.commit()
    return row


def progress_map(db: Session, *, user: User, lesson_id: str) -> dict[str, PartProgress]:
    rows = db.scalars(select(PartProgress).where(PartProgress.user_id == user.id, PartProgress.lesson_id == lesson_id))
    return {r.part_id: r for r in rows}


def resume_part(db: Session, *, user: User, lesson: Lesson) -> str:
    """Where the learner left off: the part seen last, or the first part."""
    rows = progress_map(db, user=user, lesson_id=lesson.id)
    known = [r for r in rows.values() if lesson.part(r.part_id)]
    if not known:
        return lesson.parts[0].id
    return max(known, key=lambda r: r.last_seen_at).part_id


def save_response(
    db: Session, *, user: Person, lesson_id: str, version: int, item_id: str, kind: str, text: str
) -> Response:
    row = Response(
        user_id=user.id,
        lesson_id=lesson_id,
        lesson_version=version,
        item_id=item_id,
        kind=kind,
        text=check_answer_text(text),
    )
    db.add(row)
    db.commit()
    return row


def latest_responses(db: Session, *, user: Person, lesson_id: str) -> dict[str, Response]:
    """The newest written answer per item: only those rows are loaded, not the whole append-only history."""
    newest = (
        select(func.max(Response.id))
        .where(Response.user_id == user.id, Response.lesson_id == lesson_id)
        .group_by(Response.item_id)
    )
    return {r.item_id: r for r in db.scalars(select(Response).where(Response.id.in_(newest)))}


def record_attempt(
    db: Session, *, user: Person, lesson_id: str, version: int, question_id: str, seed: int, answer: str, status: str
) -> Attempt:
    row = Attempt(
        user_id=user.id,
        lesson_id=lesson_id,
        lesson_version=version,
        question_id=question_id,
        variant_seed=seed,
        answer=answer[:MAX_ANSWER_CHARS],
        status=status,
    )
    db.add(row)
    db.commit()
    return row


def save_self_check(
    db: Session, *, user: User, lesson_id: str, version: int, question_id: str, ticked: list[int], points: int
) -> Response:
    """Record which self-check points the learner ticked, tied to their latest written answer.

    Stored append-only like every response, as "<ticked indices>@<answer id>" under "<question>:self-check",
    so ticks always say which answer they judged.
    """
    answer = latest_responses(db, user=user, lesson_id=lesson_id).get(question_id)
    if answer is None or answer.kind != "free_response":
        raise AnswerError("point", "Save your written answer first: the self-check is ticked against it.")
    bad = sorted({i for i in ticked if not 0 <= i < points})
    if bad:
        raise AnswerError(
            "point", f"Tick only the points listed (numbered 0 to {points - 1}); got {', '.join(map(str, bad))}."
        )
    text = ",".join(str(i) for i in sorted(set(ticked))) or "-"
    return save_response(
        db,
        user=user,
        lesson_id=lesson_id,
        version=version,
        item_id=f"{question_id}:self-check",
        kind="self_check",
        text=f"{text}@{answer.id}",
    )


def record_step(
    db: Session, *, user: User, lesson_id: str, version: int, question_id: str, step_ids: list[str], step_id: str,
    answer: str, status: str,
) -> Attempt:  # fmt: skip
    """Record one step of a multi-step problem ("<question>:<step>"); when it completes every step, the
    problem itself is recorded as correct too, so progress counts it like any other question."""
    row = record_attempt(
        db, user=user, lesson_id=lesson_id, version=version, question_id=f"{question_id}:{step_id}", seed=0,
        answer=answer, status=status,
    )  # fmt: skip
    latest = latest_attempts(db, user=user, lesson_id=lesson_id)
    done = all(getattr(latest.get(f"{question_id}:{s}"), "status", None) == "correct" for s in step_ids)
    if done and getattr(latest.get(question_id), "status", None) != "correct":
        record_attempt(
            db, user=user, lesson_id=lesson_id, version=version, question_id=question_id, seed=0,
            answer="every step right", status="correct",
        )  # fmt: skip
    return row


def latest_attempts(db: Session, *, user: Person, lesson_id: str) -> dict[str, Attempt]:
    """The newest attempt per question: an answer's page reads this after every try, and loading every try of
    the lesson as objects grew with each one (most of an answer's time after an hour of practice)."""
    newest = (
        select(func.max(Attempt.id))
        .where(Attempt.user_id == user.id, Attempt.lesson_id == lesson_id)
        .group_by(Attempt.question_id)
    )
    return {r.question_id: r for r in db.scalars(select(Attempt).where(Attempt.id.in_(newest)))}


@dataclass
class LessonProgress:
    lesson: Lesson
    version: int
    parts_done: int
    parts_total: int
    seconds: int
    questions_correct: int
    questions_total: int
    resume_part: str
    started: bool = False  # any trace of the learner in the lesson: a part opened, an answer, a try, time

    @property
    def percent(self) -> int:
        return round(100 * self.parts_done / self.parts_total) if self.parts_total else 0

    @property
    def minutes(self) -> int:
        return round(self.seconds / 60)

    @property
    def time_spent(self) -> str:
        """Reading time as the home page says it: "" when none was counted (time comes once a minute while a
        part is open, so a learner can answer questions before any), "under a minute", else "N min"."""
        if not self.seconds:
            return ""
        return f"{self.minutes} min" if self.minutes else "under a minute"


# The home page's reads in one round trip, written out once (see _LESSON_STATE below for why text): every
# part row of the learner; each question they tried, per lesson, with n = 1 when one of its tries was right or
# a written answer (status correct or answered); and, per lesson, how many written answers they saved (pauses
# have no attempts, yet answering one is progress). GROUP BY, not DISTINCT: under DISTINCT PostgreSQL types
# the bare NULLs as text, which no longer unions with the timestamps above.
_DASHBOARD = text(
    """
    SELECT 'p' AS kind, lesson_id, part_id AS key, done_at AS t1, last_seen_at AS t2, seconds_spent AS n
      FROM part_progress WHERE user_id = :user_id
    UNION ALL
    SELECT 'a', lesson_id, question_id, NULL, NULL,
           MAX(CASE WHEN status IN ('correct', 'answered') THEN 1 ELSE 0 END)
      FROM attempts WHERE user_id = :user_id
     GROUP BY lesson_id, question_id
    UNION ALL
    SELECT 'r', lesson_id, NULL, NULL, NULL, COUNT(*)
      FROM responses WHERE user_id = :user_id
     GROUP BY lesson_id
    """
).columns(kind=String, lesson_id=String, key=String, t1=UTCDateTime, t2=UTCDateTime, n=Integer)


def dashboard(db: Session, *, user: Person, lessons: list[tuple[Lesson, int]]) -> list[LessonProgress]:
    """Progress per lesson for the home page: one query however many lessons there are. A lesson is
    `started` once the learner left any trace in it (a part opened, a try, a written answer, reading time)."""
    rows: dict[str, dict[str, ProgressView]] = {}
    answered: dict[str, set[str]] = {}
    touched: set[str] = set()  # lessons with an attempt or a written answer of the learner
    for kind, lesson_id, key, done_at, last_seen_at, n in db.execute(_DASHBOARD, {"user_id": user.id}):
        if kind == "p":
            rows.setdefault(lesson_id, {})[key] = ProgressView(key, done_at, last_seen_at, n or 0)
            continue
        touched.add(lesson_id)
        if kind == "a" and n:
            answered.setdefault(lesson_id, set()).add(key)
    out = []
    for lesson, version in lessons:
        mine = rows.get(lesson.id, {})
        part_ids = {p.id for p in lesson.parts}
        known = [r for r in mine.values() if r.part_id in part_ids]
        out.append(
            LessonProgress(
                lesson=lesson,
                version=version,
                parts_done=sum(1 for r in known if r.done_at),
                parts_total=len(lesson.parts),
                seconds=sum(r.seconds_spent for r in mine.values()),
                # only the lesson's questions: the steps of multi-step problems are attempts of their own
                questions_correct=len(answered.get(lesson.id, set()) & set(lesson.questions)),
                questions_total=len(lesson.questions),
                resume_part=max(known, key=lambda r: r.last_seen_at).part_id if known else lesson.parts[0].id,
                started=bool(mine) or lesson.id in touched,
            )
        )
    return out


# ---------------------------------------------------------------- what a lesson page shows, in one query


class ProgressView(NamedTuple):
    part_id: str
    done_at: datetime | None
    last_seen_at: datetime
    seconds_spent: int
    version_seen: int | None = None  # the lesson page's state carries it; the dashboard has no use for it


class ResponseView(NamedTuple):
    item_id: str
    text: str
    created_at: datetime
    id: int  # a self-check names the answer it judges by this id


class AttemptView(NamedTuple):
    question_id: str
    status: str
    created_at: datetime
    id: int = 0  # rows are append-only: the newest id names the learner's latest state (app/web/views/lesson_pages.py)


class LessonState(NamedTuple):
    """A learner's trail through one lesson: part progress, the latest written answer per item and the
    latest attempt per question (read-only views; the rows themselves are append-only), and, when asked for,
    the id of the learner's newest succeeded job of each lab they ran."""

    progress: dict[str, ProgressView]
    responses: dict[str, ResponseView]
    attempts: dict[str, AttemptView]
    runs: dict[str, int]


# Written out once as SQL that SQLite and PostgreSQL both read: building the equivalent SQLAlchemy
# expression per request cost ~2 ms (construction and cache-key walks) against ~0.1 ms for the query.
_STATE_SQL = """
    SELECT 'p' AS kind, part_id AS key, done_at AS t1, last_seen_at AS t2, seconds_spent AS n,
           NULL AS body, 0 AS id, version_seen AS v
      FROM part_progress WHERE user_id = :user_id AND lesson_id = :lesson_id
    UNION ALL
    SELECT 'r', item_id, created_at, NULL, NULL, text, id, NULL
      FROM responses WHERE user_id = :user_id AND lesson_id = :lesson_id
    UNION ALL
    SELECT 'a', question_id, created_at, NULL, NULL, status, id, NULL
      FROM attempts WHERE user_id = :user_id AND lesson_id = :lesson_id
    {runs}
    ORDER BY id
    """
# Parts that show the learner's own runs (sections' `your_run:`) ask for them in the same round trip: each
# lab's newest succeeded job id, through the owner's index (the same plan as jobs.latest_succeeded); the
# ORM query of its own was a fifth of such a part's time. Other parts never touch the jobs table.
_RUNS_SQL = """
    UNION ALL
    SELECT 'j', lab, NULL, NULL, NULL, NULL, MAX(id), NULL
      FROM jobs WHERE owner_id = :user_id AND status = 'succeeded' GROUP BY lab
    """
_COLUMNS = dict(kind=String, key=String, t1=UTCDateTime, t2=UTCDateTime, n=Integer, body=Text, id=Integer, v=Integer)
_LESSON_STATE = text(_STATE_SQL.format(runs="")).columns(**_COLUMNS)
_LESSON_STATE_RUNS = text(_STATE_SQL.format(runs=_RUNS_SQL)).columns(**_COLUMNS)


def lesson_state(db: Session, *, user: Person, lesson_id: str, runs: bool = False) -> LessonState:
    """Everything a lesson page shows of the learner, in one round trip and without ORM objects: every part
    page asks, and three ORM queries with their identity-map bookkeeping were a fifth of a page's time.
    Rows come ordered by id, so the latest answer per item wins. `runs`: also the newest succeeded job id
    per lab (LessonState.runs), for parts that show the learner's own runs."""
    state = LessonState({}, {}, {}, {})
    for kind, key, first, second, n, body, row_id, seen in db.execute(
        _LESSON_STATE_RUNS if runs else _LESSON_STATE, {"user_id": user.id, "lesson_id": lesson_id}
    ):
        if kind == "p":
            state.progress[key] = ProgressView(key, first, second, n or 0, seen)
        elif kind == "r":
            state.responses[key] = ResponseView(key, body, first, row_id)
        elif kind == "a":
            state.attempts[key] = AttemptView(key, body, first, row_id)
        else:
            state.runs[key] = row_id
    return state
