"""A learner's own lab runs: which of them a page shows in full, and what they did, told beside a lesson's
worked example.

`latest_runs` picks the runs a page shows in full: the newest run, and under it, when that one has no result
(queued, running, cancelled, failed), the newest that has, so a stopped retry never hides the last good result.
The lab page (/labs/<lab>) and the lesson's lab page (its env-check card) show the same pair.

A section names a lab in `your_run:`; once the learner has a succeeded job of it, the section says what their
run did, in the worked example's terms and read from that run alone (its recipe, shape, fit and counts), with
the backend's honesty label and a link to the job. Until then it says plainly that there is no run yet and nudges
them to run the lab. The numbers come from the job's result.json (labs/<lab>/result.py describes them), told and
nudged in the lab's own words (its spec's `words`, labs/<lab>/describe.py); a lab result that carries a
one-sentence `answer` has it shown first.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.models import Job, Person
from app.services.jobs import lifecycle as job_service
from labs import catalog

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
        tell = catalog.get(job.lab).words.sentences if job.lab in catalog.LABS else None
        sentences = tell(results, result.get("params") or {}) if tell is not None else []
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
    hint = catalog.get(lab).words.nudge
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
