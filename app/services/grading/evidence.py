"""A lab report's evidence: the slots a lesson's lab asks for, the result behind each attached job or
upload, its automatic checks, and what a submitted version shows (per slot, and its artifact files).

Evidence is a reference, {"job": id} or {"bundle": id}; a job that failed, or files missing on the server,
make the evidence not gradable (never the learner's fault), as labs/checks decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.schema import Lesson
from app.core.config import Settings
from app.core.models import Bundle, Job, LabReport, ReportVersion
from app.services.errors import NotFound
from app.services.jobs.artifacts import Artifact, in_folder, resolve_artifact
from app.services.learning import lessons as lesson_service
from labs import api, catalog
from labs.api import checks as checks_service


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


def slots(lesson: Lesson) -> list[Slot]:
    lab = lesson.lab
    if lab is None:
        return []
    out = [Slot(e.id, e.title, e.description, e.lab, "fallback" if e.fallback else "evidence") for e in lab.evidence]
    if lab.stretch:
        out.append(Slot(lab.stretch.id, "Stretch: TP sweep", lab.stretch.text, lab.stretch.lab, "stretch"))
    return out


# ---------------------------------------------------------------- a run in words, and the run an item asks for


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    if isinstance(v, float):
        return api.number(v)
    return "none" if v is None else str(v)


MAX_OTHER_WORDS = 0  # further changed parameters a run menu names before "…": the closed menu fits a laptop's column


def _with_defaults(lab: str, params: dict | None) -> dict:
    """The run's parameters as the lab read them (its model fills defaults and settles what depends on what);
    parameters an older lab version accepted and this one refuses are read over the defaults as they are."""
    spec = catalog.LABS.get(lab)
    if spec is None:
        return dict(params or {})
    try:
        return spec.params.model_validate(params or {}).model_dump()
    except ValueError:  # pydantic's ValidationError: a run from before a limit changed
        return {**{k: f.default for k, f in spec.params.model_fields.items()}, **(params or {})}


def params_words(lab: str, params: dict | None) -> str:
    """A run's parameters as a learner tells runs apart: "spike at step 20, 40 steps, delayed", then
    up to MAX_OTHER_WORDS more that differ from the lab's defaults ("seed 3"); "default settings" for a lab
    without key parameters run as it comes."""
    spec = catalog.LABS.get(lab)
    full = _with_defaults(lab, params)
    keys = spec.words.key_params if spec else ()
    out = spec.words.params_words(full) if spec else []
    fields = spec.params.model_fields if spec else {}
    others = [
        f"{(fields[k].title or k.replace('_', ' ')).lower() if k in fields else k} {_value(v)}"
        for k, v in (params or {}).items()
        if k not in keys and k in fields and fields[k].default != v
    ]
    out += others[:MAX_OTHER_WORDS] + (["…"] if len(others) > MAX_OTHER_WORDS else [])
    return ", ".join(out) if out else "default settings"


def ask_for(slot: Slot) -> catalog.Ask | None:
    """What run `slot` asks for beyond being of its lab (its lab's LabSpec.words.asks), None when it asks nothing."""
    spec = catalog.LABS.get(slot.lab)
    return spec.words.asks.get(slot.kind) if spec else None


def fits(slot: Slot, lab: str, params: dict | None) -> bool:
    """Whether a run of `lab` with `params` is the run `slot` asks for (False for a slot that asks nothing)."""
    ask = ask_for(slot)
    return ask is not None and lab == slot.lab and ask.fits(_with_defaults(lab, params))


def pick_run(slot: Slot, jobs: list[Job]) -> tuple[Job | None, str]:
    """The newest of `jobs` (finished runs of the slot's lab, newest first) that can show what the slot asks, or
    None and why none can, in the learner's words: what the item asks, and what their newest run was instead."""
    ask = ask_for(slot)
    if not jobs or ask is None:
        return (jobs[0] if jobs else None), ""
    for job in jobs:
        if ask.fits(_with_defaults(job.lab, job.params)) and not (ask.shows and ask.shows(job.result or {})):
            return job, ""
    newest = jobs[0]
    fitted = ask.fits(_with_defaults(newest.lab, newest.params))
    why = (ask.shows(newest.result or {}) if ask.shows else "") if fitted else "it is not such a run"
    run = f"job {newest.id} ({params_words(newest.lab, newest.params)})"
    if len(jobs) == 1:
        return None, f"This item asks for {ask.text}. Your one {slot.lab} run, {run}, cannot show that: {why}."
    return None, (
        f"This item asks for {ask.text}. None of your {len(jobs)} {slot.lab} runs can show that: your newest, "
        f"{run}, {why}."
    )


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
    v = db.scalar(select(ReportVersion).where(ReportVersion.report_id == report.id, ReportVersion.number == number))
    ref = (v.evidence or {}).get(slot_id) if v else None
    if ref is None:
        raise NotFound(f"No evidence {slot_id!r} in a report version you can see.")
    src = source_for(db, settings, ref)
    if src.problem or src.root is None or src.result is None:
        raise NotFound(f"Evidence {slot_id!r}: {src.problem or 'no result'}.")
    return in_folder(src.root, src.result, name, f"Evidence {slot_id!r}")
