"""Lab reports: a learner's draft (evidence picked from own jobs or bundles, written answers) and the
append-only versions they submit, each with its automatic checks.

A report has one working draft, overwritten as the learner edits it; submitting copies it into a new
ReportVersion that is never changed again (only its checks are re-run on regrade). Evidence is a
reference ({"job": id} or {"bundle": id}); job results and bundles are immutable once finished.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.content.schema import Lesson
from app.core.config import Settings
from app.core.digits import whole_number
from app.core.models import Bundle, Job, LabReport, ReportVersion, User, utcnow
from app.services.grading.evidence import Slot, fits, params_words, pick_run, run_checks, slots

__all__ = ["Gap", "ReportError", "Slot", "slots"]  # Slot and slots re-exported: a report is made of its lesson's slots

MAX_ANSWER_CHARS = 20_000


class ReportError(ValueError):
    """A refused change; `errors` maps a form field to its message."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(errors.values()))
        self.errors = errors


# ---------------------------------------------------------------- the draft


def get_report(db: Session, *, owner: User, lesson_id: str) -> LabReport | None:
    return db.scalar(select(LabReport).where(LabReport.owner_id == owner.id, LabReport.lesson_id == lesson_id))


def get_or_create(db: Session, *, owner: User, lesson_id: str) -> LabReport:
    report = get_report(db, owner=owner, lesson_id=lesson_id)
    if report:
        return report
    report = LabReport(owner_id=owner.id, lesson_id=lesson_id, status="draft", draft={"evidence": {}, "answers": {}})
    db.add(report)
    try:
        db.commit()
    except IntegrityError:  # the same learner opened it twice at once: theirs is the one that won
        db.rollback()
        won = get_report(db, owner=owner, lesson_id=lesson_id)
        assert won is not None, "a unique-constraint conflict means the other row exists"
        return won
    return report


def candidates(db: Session, *, owner: User, lab: str, slot: Slot | None = None) -> list[tuple[str, str]]:
    """(reference, description) of the learner's finished jobs and uploaded bundles for a lab, newest first.

    A description tells runs apart the way a learner does: its number, its parameters in words, where it ran
    and when ("Job 6 · outlier at step 20, 40 steps, delayed scaling · CPU · 2 Dec 15:37"); a failed run says
    so. With `slot`, the runs that are what the slot asks for (evidence.ASKS) start with "✓ ".
    Reads the few fields each description needs (parameters, environment.emulated / backend) in SQL, not the
    results themselves: a result can be megabytes, and the report page lists 40 candidates per slot."""
    emulated, ran = Job.result[("environment", "emulated")], Job.result[("environment", "backend")]
    jobs = db.execute(
        select(Job.id, Job.status, Job.backend, Job.finished_at, Job.params, ran.as_string(), emulated.as_boolean())
        .where(Job.owner_id == owner.id, Job.lab == lab, Job.status.in_(("succeeded", "failed")))
        .order_by(Job.id.desc())
        .limit(20)
    ).all()
    now = utcnow()
    out = []
    for job_id, status, backend, finished_at, params, result_backend, is_emulated in jobs:
        # emulated is exactly the cpu backend (labs/env.py); a failed job has no result, so no backend it ran on
        where = "CPU" if is_emulated else (backend if result_backend is not None else "")
        parts = [
            f"Job {job_id}",
            "failed" if status == "failed" else "",
            params_words(lab, params),
            where,
            _menu_time(finished_at, now),
        ]
        mark = "✓ " if slot is not None and status == "succeeded" and fits(slot, lab, params) else ""
        out.append((f"job:{job_id}", mark + " · ".join(p for p in parts if p)))
    b_emulated, b_backend = Bundle.result[("environment", "emulated")], Bundle.result[("environment", "backend")]
    bundles = db.execute(
        select(Bundle.id, Bundle.filename, b_emulated.as_boolean(), b_backend.as_string(), Bundle.result["params"])
        .where(Bundle.owner_id == owner.id, Bundle.lab == lab)
        .order_by(Bundle.id.desc())
        .limit(20)
    ).all()
    for bundle_id, filename, is_emulated, backend, params in bundles:
        params = params if isinstance(params, dict) else None
        parts = [
            f"Upload {bundle_id}",
            _clip(filename, MENU_FILENAME_CHARS),
            params_words(lab, params) if params else "",
            f"{'CPU' if is_emulated else backend or 'no backend'}, self-reported",
        ]
        mark = "✓ " if slot is not None and params and fits(slot, lab, params) else ""
        out.append((f"bundle:{bundle_id}", mark + " · ".join(p for p in parts if p)))
    return out


MENU_FILENAME_CHARS = 24  # an upload's name in the run menu: enough to recognise "fp8-laptop-run.zip", not a path


def _menu_time(dt: datetime | None, now: datetime) -> str:
    """'2 Dec 15:37' (UTC, like every time on the site); the year only when it is not this one."""
    if dt is None:
        return ""
    year = f" {dt.year}" if dt.year != now.year else ""
    return f"{dt.day} {dt:%b}{year} {dt:%H:%M}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_ref(value: str) -> dict | None:
    """'job:12' -> {"job": 12}; '' -> None; anything else raises ValueError."""
    if not value:
        return None
    kind, _, ident = value.partition(":")
    number = whole_number(ident)
    if kind not in ("job", "bundle") or number is None:
        raise ValueError(value)
    return {kind: number}


def _check_ref(db: Session, owner: User, slot: Slot, ref: dict) -> str | None:
    """Why `ref` cannot go into `slot`, or None. Only the learner's own finished work is accepted."""
    if "job" in ref:
        job = db.get(Job, ref["job"])
        if job is None or job.owner_id != owner.id:
            return f"{slot.title}: job {ref['job']} is not one of your jobs"
        if job.lab != slot.lab:
            return f"{slot.title}: needs a {slot.lab} job; job {job.id} ran {job.lab}"
        if not job.finished:
            return f"{slot.title}: job {job.id} is still {job.status}; attach it once it has finished"
    else:
        bundle = db.get(Bundle, ref["bundle"])
        if bundle is None or bundle.owner_id != owner.id:
            return f"{slot.title}: upload {ref['bundle']} is not one of your uploads"
        if bundle.lab != slot.lab:
            return f"{slot.title}: needs a {slot.lab} result; upload {bundle.id} is from {bundle.lab}"
    return None


def save_draft(
    db: Session, *, report: LabReport, owner: User, lesson: Lesson, evidence: dict[str, str], answers: dict[str, str]
) -> None:
    """Replace the draft's evidence picks and answers; ReportError (nothing changed) naming each bad field."""
    errors: dict[str, str] = {}
    picked: dict[str, dict] = {}
    for slot in slots(lesson):
        raw = (evidence.get(slot.id) or "").strip()
        try:
            ref = parse_ref(raw)
        except ValueError:
            errors[f"evidence-{slot.id}"] = f"{slot.title}: {raw[:40]!r} is not a job or upload reference"
            continue
        if ref is None:
            continue
        problem = _check_ref(db, owner, slot, ref)
        if problem:
            errors[f"evidence-{slot.id}"] = problem
        else:
            picked[slot.id] = ref
    written: dict[str, str] = {}
    for q in lesson.lab.report_questions if lesson.lab else []:
        text = answers.get(q.id, "")
        if len(text) > MAX_ANSWER_CHARS:
            errors[f"answer-{q.id}"] = f"answer to “{q.id}”: {len(text)} characters; at most {MAX_ANSWER_CHARS}"
        elif text.strip():
            written[q.id] = text
    if errors:
        raise ReportError(errors)
    report.draft = {"evidence": picked, "answers": written}
    report.updated_at = utcnow()
    db.commit()


def attach(db: Session, *, report: LabReport, owner: User, lesson: Lesson, slot_id: str, ref: dict) -> None:
    slot = next((s for s in slots(lesson) if s.id == slot_id), None)
    if slot is None:
        raise ReportError({"slot": f"slot: {slot_id!r} is not an evidence item of this lab"})
    problem = _check_ref(db, owner, slot, ref)
    if problem:
        raise ReportError({f"evidence-{slot.id}": problem})
    draft = dict(report.draft or {})
    draft["evidence"] = {**draft.get("evidence", {}), slot.id: ref}
    report.draft = draft
    report.updated_at = utcnow()
    db.commit()


@dataclass(frozen=True)
class Attached:
    """What "Attach my latest runs" did: the slots it filled, and per slot it left empty for want of a run that can
    show what the item asks, why (the slot's empty, its learner has runs of its lab, none of them fits)."""

    filled: list[str]
    passed_over: dict[str, str]


RUNS_LOOKED_AT = 50  # per item, the newest finished runs of its lab "Attach my latest runs" considers


def attach_latest(db: Session, *, report: LabReport, owner: User, lesson: Lesson) -> Attached:
    """Fill each empty slot with the learner's newest succeeded job of its lab that can show what the slot asks
    (evidence.pick_run); a slot none of whose runs can stays empty, with the reason."""
    evidence = dict((report.draft or {}).get("evidence", {}))
    filled, passed_over = [], {}
    for slot in slots(lesson):
        if slot.id in evidence or slot.kind == "fallback":
            continue
        jobs = list(
            db.scalars(
                select(Job)
                .where(Job.owner_id == owner.id, Job.lab == slot.lab, Job.status == "succeeded")
                .order_by(Job.id.desc())
                .limit(RUNS_LOOKED_AT)
            )
        )
        job, why = pick_run(slot, jobs)
        if job is not None:
            evidence[slot.id] = {"job": job.id}
            filled.append(slot.id)
        elif why:
            passed_over[slot.id] = why
    report.draft = {**(report.draft or {}), "evidence": evidence}
    report.updated_at = utcnow()
    db.commit()
    return Attached(filled, passed_over)


# ---------------------------------------------------------------- submitting


@dataclass(frozen=True)
class Gap:
    """What a complete report has and this draft lacks: a required evidence item with no run attached, or a
    report question with no answer. Optional items (fallback and stretch) never make a gap, and neither does
    an attached run that failed or cannot be graded: the learner chose it, and its checks will say so."""

    field: str  # the form field, and the id of its control on the page: evidence-<slot> | answer-<question>
    kind: str  # evidence | answer
    title: str  # the item's title, or the question's number and first sentence


def gaps(lesson: Lesson, draft: dict | None) -> list[Gap]:
    """The draft's gaps in page order: evidence items first, then the questions."""
    evidence, answers = (draft or {}).get("evidence", {}), (draft or {}).get("answers", {})
    out = [
        Gap(f"evidence-{s.id}", "evidence", s.title) for s in slots(lesson) if not s.optional and s.id not in evidence
    ]
    for n, q in enumerate(lesson.lab.report_questions if lesson.lab else [], start=1):
        if not (answers.get(q.id) or "").strip():
            out.append(Gap(f"answer-{q.id}", "answer", f"Question {n}: {_first_sentence(q.prompt)}"))
    return out


def _first_sentence(text: str) -> str:
    found = re.match(r"\s*(.+?[?.!])(?:\s|$)", text, re.S)
    return " ".join((found.group(1) if found else text).split())


def is_empty(draft: dict | None) -> bool:
    """Nothing attached and nothing written: there is nothing to submit, even knowingly incomplete."""
    return not (draft or {}).get("evidence") and not (draft or {}).get("answers")


def submit(db: Session, *, settings: Settings, report: LabReport, lesson: Lesson, lesson_version: int) -> ReportVersion:
    """Copy the draft into a new version, run its checks, and put the report in the grading queue.

    Refuses only an empty draft. Gaps do not stop it: the report page lists them (`gaps`) and submits an
    incomplete draft only once the learner has confirmed them."""
    draft = report.draft or {}
    evidence, answers = dict(draft.get("evidence", {})), dict(draft.get("answers", {}))
    if is_empty(draft):
        raise ReportError({"report": "Attach at least one piece of evidence or write an answer before submitting."})
    checks = run_checks(db, settings, lesson, evidence)
    for _ in range(3):  # the number is unique per report; a concurrent submit takes the next one
        number = (
            db.scalar(select(func.max(ReportVersion.number)).where(ReportVersion.report_id == report.id)) or 0
        ) + 1
        now = utcnow()
        version = ReportVersion(
            report_id=report.id,
            number=number,
            lesson_version=lesson_version,
            evidence=evidence,
            answers=answers,
            checks=checks,
            checked_at=now,
            submitted_at=now,
        )
        db.add(version)
        try:
            db.flush()
        except IntegrityError:
            db.rollback()
            continue
        # Still claimed: the same grader grades the new version; otherwise it goes back to the queue.
        db.execute(
            update(LabReport)
            .where(LabReport.id == report.id)
            .values(
                status=case((LabReport.claimed_by_id.is_not(None), "claimed"), else_="submitted"),
                submitted_at=now,
                updated_at=now,
                revision=LabReport.revision + 1,
            )
        )
        db.commit()
        db.refresh(report)
        return version
    raise ReportError(
        {"report": "Another submission of this report happened at the same moment; reload and try again."}
    )


def recheck(db: Session, *, settings: Settings, version: ReportVersion, lesson: Lesson) -> ReportVersion:
    """Re-run the automatic checks of a submitted version (regrade); the evidence and answers stay as submitted."""
    version.checks = run_checks(db, settings, lesson, version.evidence or {})
    version.checked_at = utcnow()
    db.commit()
    return version


def versions(db: Session, *, report: LabReport) -> list[ReportVersion]:
    return list(
        db.scalars(
            select(ReportVersion).where(ReportVersion.report_id == report.id).order_by(ReportVersion.number.desc())
        )
    )


def latest_version(db: Session, *, report: LabReport) -> ReportVersion | None:
    return db.scalar(
        select(ReportVersion).where(ReportVersion.report_id == report.id).order_by(ReportVersion.number.desc()).limit(1)
    )


def version(db: Session, *, report: LabReport, number: int) -> ReportVersion | None:
    return db.scalar(select(ReportVersion).where(ReportVersion.report_id == report.id, ReportVersion.number == number))


OPTIONAL_EMPTY = "optional_empty"  # an optional item left empty: said apart, never counted as missing


def summary(checks: dict[str, dict]) -> dict[str, int]:
    """Counts of slot statuses, for the queue and the version list. An optional item (the fallback for hardware
    the learner did not have, the stretch) left empty counts as OPTIONAL_EMPTY, not as missing."""
    out: dict[str, int] = {}
    for item in checks.values():
        status = OPTIONAL_EMPTY if item["status"] == "missing" and item.get("optional") else item["status"]
        out[status] = out.get(status, 0) + 1
    return out
