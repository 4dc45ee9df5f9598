"""Lab reports: a learner's draft (evidence picked from own jobs or bundles, written answers) and the
append-only versions they submit, each with its automatic checks.

A report has one working draft, overwritten as the learner edits it; submitting copies it into a new
ReportVersion that is never changed again (only its checks are re-run on regrade). Evidence is a
reference ({"job": id} or {"bundle": id}); job results and bundles are immutable once finished.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import case, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import Settings
from app.content.schema import Lesson
from app.models import Bundle, Job, LabReport, ReportVersion, User, utcnow
from app.services import checks as checks_service
from app.services import lessons as lesson_service
from app.services.artifacts import Artifact, in_folder, resolve_artifact
from app.services.errors import NotFound

MAX_ANSWER_CHARS = 20_000


@dataclass(frozen=True)
class Slot:
    """One thing a report can carry: an evidence item of lab.yaml, or its stretch challenge."""

    id: str
    title: str
    description: str
    lab: str
    kind: str  # evidence | fallback | stretch

    @property
    def optional(self) -> bool:
        return self.kind != "evidence"


class ReportError(ValueError):
    """A refused change; `errors` maps a form field to its message."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(errors.values()))
        self.errors = errors


def slots(lesson: Lesson) -> list[Slot]:
    lab = lesson.lab
    if lab is None:
        return []
    out = [Slot(e.id, e.title, e.description, e.lab, "fallback" if e.fallback else "evidence") for e in lab.evidence]
    if lab.stretch:
        out.append(Slot(lab.stretch.id, "Stretch: TP sweep", lab.stretch.text, lab.stretch.lab, "stretch"))
    return out


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


def candidates(db: Session, *, owner: User, lab: str) -> list[tuple[str, str]]:
    """(reference, description) of the learner's finished jobs and uploaded bundles for a lab, newest first."""
    jobs = db.scalars(
        select(Job)
        .where(Job.owner_id == owner.id, Job.lab == lab, Job.status.in_(("succeeded", "failed")))
        .order_by(Job.id.desc())
        .limit(20)
    ).all()
    out = []
    for j in jobs:
        label = (
            "CPU emulation"
            if ((j.result or {}).get("environment") or {}).get("emulated")
            else (j.backend if j.result else "")
        )
        out.append(
            (
                f"job:{j.id}",
                f"Job {j.id} · {j.status}" + (f" · {label}" if label else "") + f" · {_short(j.finished_at)}",
            )
        )
    bundles = db.scalars(
        select(Bundle).where(Bundle.owner_id == owner.id, Bundle.lab == lab).order_by(Bundle.id.desc()).limit(20)
    ).all()
    for b in bundles:
        env = (b.result or {}).get("environment") or {}
        out.append(
            (
                f"bundle:{b.id}",
                f"Upload {b.id} · {b.filename} · {'CPU emulation' if env.get('emulated') else env.get('backend', '')}",
            )
        )
    return out


def _short(dt) -> str:
    return dt.strftime("%Y-%m-%d %H:%M") if dt else ""


def parse_ref(value: str) -> dict | None:
    """'job:12' -> {"job": 12}; '' -> None; anything else raises ValueError."""
    if not value:
        return None
    kind, _, ident = value.partition(":")
    if kind not in ("job", "bundle") or not ident.isdigit() or int(ident) >= 2**31:
        raise ValueError(value)
    return {kind: int(ident)}


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


def attach_latest(db: Session, *, report: LabReport, owner: User, lesson: Lesson) -> list[str]:
    """Fill each empty slot with the learner's newest succeeded job of its lab; returns the slots filled."""
    evidence = dict((report.draft or {}).get("evidence", {}))
    filled = []
    for slot in slots(lesson):
        if slot.id in evidence:
            continue
        job = db.scalar(
            select(Job)
            .where(Job.owner_id == owner.id, Job.lab == slot.lab, Job.status == "succeeded")
            .order_by(Job.id.desc())
            .limit(1)
        )
        if job is not None and slot.kind != "fallback":
            evidence[slot.id] = {"job": job.id}
            filled.append(slot.id)
    report.draft = {**(report.draft or {}), "evidence": evidence}
    report.updated_at = utcnow()
    db.commit()
    return filled


# ---------------------------------------------------------------- sources and checks


def source_for(db: Session, settings: Settings, ref: dict) -> checks_service.Source:
    """The result behind a reference, with an infrastructure reason when it cannot be read."""
    if "job" in ref:
        job = db.get(Job, ref["job"])
        src = checks_service.Source(kind="job", id=ref["job"])
        if job is None:
            src.problem = "the job no longer exists"
        elif job.status == "failed":
            src.problem = f"the job failed: {job.error or 'no reason recorded'}"
        elif job.status != "succeeded" or not job.result:
            src.problem = f"the job is {job.status} and has no result"
        elif not job.bundle_dir or not (settings.data_dir / job.bundle_dir / "result.json").is_file():
            src.problem = "the job's files are missing on the server"
        else:
            src.result, src.root = job.result, settings.data_dir / job.bundle_dir
    else:
        bundle = db.get(Bundle, ref["bundle"])
        src = checks_service.Source(kind="bundle", id=ref["bundle"])
        if bundle is None:
            src.problem = "the upload no longer exists"
        elif not (settings.data_dir / bundle.bundle_dir / "result.json").is_file():
            src.problem = "the uploaded files are missing on the server"
        else:
            src.result, src.root = bundle.result, settings.data_dir / bundle.bundle_dir
    if src.root is not None:
        root, result = src.root, src.result

        def read(name: str, _root=root, _result=result) -> bytes:
            found = resolve_artifact(_root, _result, name)
            if isinstance(found, str):
                raise checks_service.ArtifactUnreadable(found)
            if found[0].stat().st_size > checks_service.MAX_TRACE_BYTES:
                raise checks_service.ArtifactUnreadable(f"{name} is larger than {checks_service.MAX_TRACE_BYTES} bytes")
            return found[0].read_bytes()

        src.read_artifact = read
    return src


def run_checks(db: Session, settings: Settings, lesson: Lesson, evidence: dict[str, dict]) -> dict[str, dict]:
    out = {}
    for slot in slots(lesson):
        ref = evidence.get(slot.id)
        source = source_for(db, settings, ref) if ref else None
        out[slot.id] = checks_service.check_item(slot_kind=slot.kind, lab=slot.lab, source=source)
    return out


def slot_states(db: Session, settings: Settings, lesson: Lesson, evidence: dict[str, dict]) -> dict[str, str]:
    """What the report page shows per slot before submitting: present, emulated, missing or not_gradable."""
    out = {}
    for slot in slots(lesson):
        ref = evidence.get(slot.id)
        if not ref:
            out[slot.id] = "missing"
            continue
        src = source_for(db, settings, ref)
        if src.problem or src.result is None:
            out[slot.id] = "not_gradable"
        else:
            out[slot.id] = "emulated" if (src.result.get("environment") or {}).get("emulated") else "present"
    return out


# ---------------------------------------------------------------- submitting


def submit(db: Session, *, settings: Settings, report: LabReport, lesson: Lesson, lesson_version: int) -> ReportVersion:
    """Copy the draft into a new version, run its checks, and put the report in the grading queue."""
    draft = report.draft or {}
    evidence, answers = dict(draft.get("evidence", {})), dict(draft.get("answers", {}))
    if not evidence and not answers:
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


def summary(checks: dict[str, dict]) -> dict[str, int]:
    """Counts of slot statuses, for the queue and the version list."""
    out: dict[str, int] = {}
    for item in checks.values():
        out[item["status"]] = out.get(item["status"], 0) + 1
    return out


# ---------------------------------------------------------------- what a version shows


def lesson_of_version(db: Session, report: LabReport, version: ReportVersion) -> Lesson:
    """The lesson as it was when the version was submitted (its evidence slots), else the current one."""
    row = lesson_service.version_row(db, lesson_id=report.lesson_id, version=version.lesson_version)
    lesson = lesson_service.build(row) if row else None
    if lesson is None:
        cur = lesson_service.current(db, lesson_id=report.lesson_id)
        if cur is None:
            raise NotFound(f"There is no lesson {report.lesson_id!r}.")
        lesson = cur.lesson
    return lesson


@dataclass
class EvidenceView:
    """One slot of a submitted version: what was attached, its result and its automatic checks."""

    slot: Slot
    ref: dict | None
    source: checks_service.Source | None
    result: dict | None
    check: dict
    report_id: int
    version_number: int


def evidence_views(
    db: Session, settings: Settings, report: LabReport, version: ReportVersion, lesson: Lesson
) -> list[EvidenceView]:
    out = []
    for slot in slots(lesson):
        ref = (version.evidence or {}).get(slot.id)
        src = source_for(db, settings, ref) if ref else None
        out.append(
            EvidenceView(
                slot=slot,
                ref=ref,
                source=src,
                result=src.result if src and not src.problem else None,
                check=(version.checks or {}).get(slot.id) or {"status": "missing", "checks": []},
                report_id=report.id,
                version_number=version.number,
            )
        )
    return out


def evidence_artifact(
    db: Session, settings: Settings, *, report: LabReport, number: int, slot_id: str, name: str
) -> Artifact:
    """Artifact `name` of the evidence in `slot_id` of version `number`; NotFound when any part is absent."""
    v = version(db, report=report, number=number)
    ref = (v.evidence or {}).get(slot_id) if v else None
    if ref is None:
        raise NotFound(f"No evidence {slot_id!r} in a report version you can see.")
    src = source_for(db, settings, ref)
    if src.problem or src.root is None or src.result is None:
        raise NotFound(f"Evidence {slot_id!r}: {src.problem or 'no result'}.")
    return in_folder(src.root, src.result, name, f"Evidence {slot_id!r}")
