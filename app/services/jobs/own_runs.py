"""A learner's own lab runs: which of them a page shows in full, and what they did, told beside a lesson's
worked example.

`latest_runs` picks the runs a page shows in full: the newest run, and under it, when that one has no result
(queued, running, cancelled, failed), the newest that has, so a stopped retry never hides the last good result.
The lab page (/labs/<lab>) and the lesson's lab page (its env-check card) show the same pair.

A section names a lab in `your_run:`; once the learner has a succeeded job of it, the section says what their
run did, in the worked example's terms ("your run clipped 15 values at step 3, and the scale adapted at step
4"), with the backend's honesty label and a link to the job. Until then it nudges them to run the lab.
The numbers come from the job's result.json (labs/<lab>/result.py describes them); a lab result that carries
a one-sentence `answer` has it shown first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.models import Job, Person
from app.services.jobs import lifecycle as job_service
from labs import catalog
from labs.api import number, percent

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LatestRuns:
    jobs: list[Job]  # the learner's runs of the lab, newest first, at most `limit` + 1 of them
    latest: Job | None  # the newest run, whatever its status
    last_result: Job | None  # the newest succeeded run, only when `latest` is not one

    @property
    def shown(self) -> list[Job]:
        """The runs to show in full, newest first."""
        return [j for j in (self.latest, self.last_result) if j is not None]


def latest_runs(db: Session, *, owner: Person, lab: str, limit: int) -> LatestRuns:
    """The owner's `limit` + 1 newest runs of `lab` and the ones shown in full (one query; two when the last
    success lies further back than the runs read)."""
    jobs = job_service.list_jobs(db, owner=owner, lab=lab, limit=limit + 1)
    latest = jobs[0] if jobs else None
    last_result = None
    if latest is not None and latest.status != "succeeded":
        last_result = next((j for j in jobs if j.status == "succeeded"), None)
        if last_result is None and len(jobs) > limit:  # past the runs read
            last_result = job_service.latest_succeeded(db, owner=owner, labs=[lab]).get(lab)
    return LatestRuns(jobs=jobs, latest=latest, last_result=last_result)


@dataclass(frozen=True)
class RunNote:
    lab: str
    title: str  # the lab's title, from the catalog
    job_id: int | None  # None: the learner has not run it yet (the note is a nudge)
    finished_at: datetime | None
    sentences: tuple[str, ...]
    honesty: str | None  # the environment's label when what ran was emulated or timed on CPU
    answer: str | None  # the lab's own one-sentence answer, when its result has one

    @property
    def ran(self) -> bool:
        return self.job_id is not None


# What to set when running the lab so the run shows what the section teaches.
NUDGES = {
    "fp8-step": "with an outlier step set (say step 20 of 40) to watch a stale scale clip a spike and then adapt",
    "overlap-trace": "to see how much of the all-gather your windowed schedule hides, against waiting at once",
    "tp-sweep": "with a few degrees (1, 2, 4) to see where your own step stops getting faster",
}


def _pct(x: float | None) -> str:
    return "—" if x is None else percent(x, 0)


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{number(x, 3)} ms"


def _fp8_step(r: dict) -> list[str]:
    out: list[str] = []
    spike = r.get("outlier")
    if spike and spike.get("clipped_at_spike") is not None:
        k = spike["step"]
        said = f"Your run clipped {number(spike['clipped_at_spike'])} values at step {k}, where the activation spiked {number(spike['scale_factor'])}×"  # fmt: skip
        before, after = spike.get("scale_at_spike"), spike.get("scale_after")
        if before is not None and after is not None and after != before:
            said += (
                f", and the scale adapted at step {k + 1}: {number(before)} → {number(after)}, because the spike's amax "
                f"had entered the history"
            )
            if spike.get("clipped_after") is not None:
                said += f" (step {k + 1} clipped {number(spike['clipped_after'])})"
        out.append(said + ".")
    else:
        clip = r.get("clipping") or {}
        total, steps = clip.get("total_clipped"), clip.get("steps_with_clipping") or []
        if total:
            out.append(f"Your run clipped {number(total)} values in {len(steps)} of {r['steps']} steps (first at step {steps[0]}).")  # fmt: skip
        elif total == 0:
            out.append(f"Your run clipped nothing in {r['steps']} steps: no spike met a stale scale.")
    ref, fp8 = r["runs"]["reference"]["final_loss"], r["runs"]["fp8"]["final_loss"]
    if ref is not None and fp8 is not None:
        out.append(
            f"Final loss {number(fp8)} with the FP8 recipe against {number(ref)} for the higher-precision reference."
        )
    elif fp8 is None:
        out.append("The FP8 run diverged (its loss became NaN or infinite); the job page shows at which step.")
    return out


def _overlap_trace(r: dict) -> list[str]:
    s = r["schedules"]
    out: list[str] = []
    if "windowed" in s:
        w = s["windowed"]
        said = f"Your windowed schedule hid {_pct(w['overlap_ratio'])} of the all-gather under independent compute, leaving {_ms(w['exposed_comm_ms'])} exposed per step"  # fmt: skip
        if "immediate" in s:
            said += f"; waiting at once hid {_pct(s['immediate']['overlap_ratio'])} ({_ms(s['immediate']['exposed_comm_ms'])} exposed)"  # fmt: skip
        out.append(said + ".")
    if "dependent" in s:
        out.append("The dependent schedule reads the gathered tensor, so it had to wait: nothing of it can overlap.")
    return out


def _tp_sweep(r: dict) -> list[str]:
    rows = sorted(r["degrees"], key=lambda d: d["degree"])
    out = ["Your sweep's step per degree: " + ", ".join(f"TP {d['degree']} {_ms(d['step_ms'])}" for d in rows) + "."]
    slower = next((b for a, b in zip(rows, rows[1:]) if b["step_ms"] >= a["step_ms"]), None)
    comm = next((d for d in rows if d["degree"] > 1 and d["collective_ms"] >= d["local_gemm_ms"]), None)
    if slower is not None:
        out.append(f"It stopped getting faster at TP {slower['degree']}.")
    elif len(rows) > 1:
        out.append(f"It got faster at every degree up to TP {rows[-1]['degree']}.")
    if comm is not None:
        out.append(
            f"From TP {comm['degree']} the all-reduces ({_ms(comm['collective_ms'])}) outweighed the local GEMMs "
            f"({_ms(comm['local_gemm_ms'])}): the crossover."
        )
    p = r.get("predicted") or {}
    if p:
        where = (
            f"from TP {p['oversharding_from']}" if p.get("oversharding_from") else "nowhere up to the largest degree"
        )
        out.append(f"For the same shape the cost model predicts over-sharding {where} on {p['node']} (a prediction).")
    if not all(d["parity"]["within_tolerance"] for d in rows):
        out.append("Some degree did not match TP 1 within tolerance: see the job's parity table.")
    return out


SUMMARIES: dict[str, Callable[[dict], list[str]]] = {
    "fp8-step": _fp8_step,
    "overlap-trace": _overlap_trace,
    "tp-sweep": _tp_sweep,
}


def _honesty(result: dict) -> str | None:
    env = result.get("environment") or {}
    label = env.get("label")
    if env.get("backend") == "cpu" or env.get("emulated"):
        return label or "Ran on CPU: timings are CPU timings, not GPU measurements."
    return None


def note_for(job: Job) -> RunNote:
    """What `job` (a succeeded run) did, in sentences; a result this code cannot read gets a plain pointer."""
    result = job.result or {}
    results = result.get("results") or {}
    try:
        sentences = SUMMARIES[job.lab](results) if job.lab in SUMMARIES else []
    except (KeyError, TypeError, IndexError, ValueError):  # an older result shape: never break the lesson
        log.warning("job %s: result of %s not summarised for the lesson", job.id, job.lab, exc_info=True)
        sentences = []
    if not sentences:
        sentences = ["Your latest run finished; its numbers are on the job's page."]
    answer = results.get("answer")
    return RunNote(
        lab=job.lab,
        title=catalog.get(job.lab).title,
        job_id=job.id,
        finished_at=job.finished_at,
        sentences=tuple(sentences),
        honesty=_honesty(result),
        answer=answer if isinstance(answer, str) and answer.strip() else None,
    )


def _nudge(lab: str) -> RunNote:
    hint = NUDGES.get(lab, "")
    return RunNote(lab, catalog.get(lab).title, None, None, (hint,) if hint else (), None, None)


def notes(
    db: Session, *, user: Person, labs: Collection[str], newest: Mapping[str, int] | None = None
) -> dict[str, RunNote]:
    """A note per lab in `labs`: the learner's latest succeeded run, or a nudge to run it. One query.

    `newest`: each lab's newest succeeded job id when the caller read them already (a lesson page reads them
    with the learner's answers, learning.lesson_state); then only those jobs are read, and nothing when the
    learner has run none of the labs."""
    if not labs:
        return {}
    if newest is None:
        latest = job_service.latest_succeeded(db, owner=user, labs=labs)
    else:
        ids = sorted(newest[lab] for lab in labs if lab in newest)
        rows = db.scalars(select(Job).where(Job.id.in_(ids), Job.owner_id == user.id)) if ids else ()
        latest = {job.lab: job for job in rows}
    return {lab: note_for(latest[lab]) if lab in latest else _nudge(lab) for lab in labs}
