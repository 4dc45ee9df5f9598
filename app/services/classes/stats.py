"""Statistics across one class: how each practice question and each lab went for its learners.

    question_stats(db, scope=…, lesson=…)  -> [QuestionStats]: tries, learners, first-try right, mean tries, the numeric
                                     answers' spread and the most common wrong answers (and whether a known-
                                     mistake rule of the question's generator already names each)
    lab_stats(db, scope=…, labs=…)         -> [LabStats]: runs, failures (the infrastructure's vs the run's own), median
                                     duration, and the spread of each numeric headline of the result summary

A parameterized question gives each learner their own numbers, so its answers are compared as a ratio to the
learner's own right answer: "2× the answer" is the same slip in every variant of the family, and is what an
author writes a known-mistake rule for. A fixed question's ratio is its plain value divided by the answer.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content import make_variant
from app.content.practice.answers import convert, parse_number
from app.content.schema import Lesson, Numeric, SingleChoice
from app.core.models import Attempt, Job, JobLoss
from app.services.classes.scopes import Scope
from labs import api as labs_api
from labs.api import number

TOP_WRONG = 5  # the most common wrong answers a question lists
MIN_GROUP = 2  # a wrong answer given by fewer learners than this is noise, not a pattern worth a rule


@dataclass(frozen=True)
class WrongAnswer:
    shown: str  # "2× the answer (e.g. 24 GB)" or the option id "B"
    learners: int  # how many learners gave it
    caught: bool  # a known-mistake rule (or an option's own feedback) already explains it
    ratio: float | None = None  # numeric: the answer over the learner's own right answer


@dataclass
class QuestionStats:
    id: str
    label: str
    kind: str
    parameterized: bool
    tries: int = 0
    learners: int = 0
    first_try_right: int | None = None  # None: not graded right or wrong (a written answer)
    spread: tuple[float, float, float] | None = None  # numeric: quartiles of answer / right answer
    wrong: list[WrongAnswer] = field(default_factory=list)

    @property
    def mean_tries(self) -> float:
        return self.tries / self.learners if self.learners else 0.0


def _value(q: Numeric, raw: str) -> float | None:
    """The answer as a number in the question's unit, or None when it is not one (never recorded as a try)."""
    raw = raw.strip()
    if q.answer_in and raw.lower().endswith(q.answer_in.lower()):
        raw = raw[: -len(q.answer_in)]
    try:
        value, unit = parse_number(raw)
        return float(convert(value, unit, q.unit))
    except ValueError:
        return None


def _close(value: float, target: float, q: Numeric) -> bool:
    # the question's own tolerance, as its grading uses it
    tol = q.tolerance
    if tol.abs is not None:
        return abs(value - target) <= tol.abs + 1e-12
    return abs(value - target) <= (tol.rel or 0.0) * abs(target) + 1e-12


def _ratio_key(ratio: float) -> float:
    """Ratios to 3 significant digits, so 2.001× and 1.999× are one wrong answer."""
    if ratio == 0 or not math.isfinite(ratio):
        return ratio
    return float(f"{ratio:.3g}")


def question_stats(db: Session, *, scope: Scope, lesson: Lesson) -> list[QuestionStats]:
    attempts = db.scalars(
        select(Attempt)
        .where(
            Attempt.lesson_id == lesson.id,
            Attempt.status.in_(("correct", "incorrect", "answered")),
            Attempt.user_id.in_(scope.learners()),
        )
        .order_by(Attempt.id)
    )
    by_q: dict[str, list[Attempt]] = defaultdict(list)
    for a in attempts:
        by_q[a.question_id].append(a)
    out = []
    for qid, question in lesson.questions.items():
        body = question.body
        stats = QuestionStats(
            qid,
            body.label or qid,
            body.kind,
            isinstance(body, Numeric) and body.generator is not None,
        )
        rows = by_q.get(qid, [])
        stats.tries = len(rows)
        firsts: dict[int, Attempt] = {}
        for a in rows:
            firsts.setdefault(a.user_id, a)
        stats.learners = len(firsts)
        if isinstance(body, Numeric | SingleChoice):  # a written answer is "answered", never right or wrong
            stats.first_try_right = sum(1 for a in firsts.values() if a.status == "correct")
        if isinstance(body, Numeric):
            _numeric(stats, question, body, rows)
        elif isinstance(body, SingleChoice):
            who: dict[str, set[int]] = defaultdict(set)
            for a in rows:
                if a.status == "incorrect":
                    who[a.answer.strip().upper()].add(a.user_id)
            ranked = sorted(who.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:TOP_WRONG]
            stats.wrong = [WrongAnswer(opt, len(users), True) for opt, users in ranked]
        out.append(stats)
    return out


def _numeric(stats: QuestionStats, question, body: Numeric, rows: list[Attempt]) -> None:
    variants: dict[int, object] = {}
    ratios: list[float] = []
    who: dict[float, set[int]] = defaultdict(set)
    example: dict[float, float] = {}
    caught: dict[float, bool] = {}
    for a in rows:
        variant = variants.get(a.variant_seed)
        if variant is None:
            variant = variants[a.variant_seed] = make_variant(question, a.variant_seed)
        expected = variant.answer  # type: ignore[attr-defined]
        value = _value(body, a.answer)
        if value is None or not expected:
            continue
        ratio = value / expected
        ratios.append(ratio)
        if a.status != "incorrect":
            continue
        key = _ratio_key(ratio)
        who[key].add(a.user_id)
        example.setdefault(key, value)
        mistakes = variant.values.get("mistakes", ())  # type: ignore[attr-defined]
        hit = any(not _close(float(w), expected, body) and _close(value, float(w), body) for w, _ in mistakes)
        caught[key] = caught.get(key, False) or hit
    if ratios:
        q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else [ratios[0]] * 3
        stats.spread = (q[0], q[1], q[2])
    ranked = sorted(who.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    for key, users in ranked[:TOP_WRONG]:
        if len(users) < MIN_GROUP and len(ranked) > 1:
            continue
        unit = f" {body.unit}" if body.unit else ""
        if stats.parameterized:
            shown = f"{number(key)}× the answer (e.g. {number(example[key])}{unit})"
        else:
            shown = f"{number(example[key])}{unit} ({number(key)}× the answer)"
        stats.wrong.append(WrongAnswer(shown, len(users), caught.get(key, False), key))


# ---------------------------------------------------------------- labs


@dataclass
class Headline:
    label: str
    unit: str
    values: list[float]

    @property
    def quartiles(self) -> tuple[float, float, float]:
        if len(self.values) == 1:
            return (self.values[0],) * 3
        q = statistics.quantiles(self.values, n=4, method="inclusive")
        return (q[0], q[1], q[2])


@dataclass
class LabStats:
    lab: str
    runs: int = 0
    succeeded: int = 0
    failed_infra: int = 0  # the last attempt was lost to infrastructure (a worker or node died, a lease ran out)
    failed_run: int = 0  # the lab itself failed: bad parameters, a crash, a time limit
    cancelled: int = 0
    in_flight: int = 0
    durations: list[float] = field(default_factory=list)
    headlines: list[Headline] = field(default_factory=list)

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.durations) if self.durations else None


MAX_HEADLINES = 6  # numeric summary lines per lab, in the summary's own order


def lab_stats(db: Session, *, scope: Scope, labs_offered: list[str] | None) -> list[LabStats]:
    """The class's learners' runs; of `labs_offered` only (None: every lab, for a class that offers every lesson)."""
    mine = Job.owner_id.in_(scope.learners())
    infra = set(
        db.scalars(select(JobLoss.job_id).join(Job, Job.id == JobLoss.job_id).where(JobLoss.outcome == "failed", mine))
    )
    labs: dict[str, LabStats] = {}
    heads: dict[str, dict[str, Headline]] = defaultdict(dict)
    q = select(Job.id, Job.lab, Job.status, Job.started_at, Job.finished_at, Job.result).where(mine).order_by(Job.id)
    if labs_offered is not None:
        q = q.where(Job.lab.in_(labs_offered or [""]))
    for job_id, lab, status, started, finished, result in db.execute(q):
        s = labs.setdefault(lab, LabStats(lab))
        s.runs += 1
        if status == "succeeded":
            s.succeeded += 1
            if started and finished:
                s.durations.append((finished - started).total_seconds())
            for raw in ((result or {}).get("results") or {}).get("summary") or []:
                item = labs_api.read_summary_item(raw)
                value = item["value"] if item is not None else None
                if (
                    item is None
                    or isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not math.isfinite(value)
                ):
                    continue
                label = item["label"]
                found = heads[lab].get(label)
                if found is None and len(heads[lab]) < MAX_HEADLINES:
                    found = heads[lab][label] = Headline(label, item.get("unit", ""), [])
                if found is not None:
                    found.values.append(float(value))
        elif status == "failed":
            if job_id in infra:
                s.failed_infra += 1
            else:
                s.failed_run += 1
        elif status == "cancelled":
            s.cancelled += 1
        else:
            s.in_flight += 1
    for lab, s in labs.items():
        s.headlines = list(heads[lab].values())
    return sorted(labs.values(), key=lambda s: s.lab)
