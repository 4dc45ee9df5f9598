"""A lab's page (templates/labs/lab.html), as one typed object: the form, the learner's runs, two side by side.

    page = LabPage.load(db, settings, owner=user, host=host, spec=spec, a=a, b=b, preset=preset)
    render(request, "labs/lab.html", page.context())

The form is built from the lab's catalog entry and prefilled from the latest run ("Change and run again") or a
preset. The latest run is shown in full (and, when it has no result, the last run that has one), earlier runs in
a compact list, and two finished runs side by side (`a`, `b`; default: the last two). A refused submission is the
same page with the learner's own values and the errors next to their fields (`refused`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from sqlalchemy.orm import Session

from app.content.schema import Lesson
from app.core.config import Settings
from app.core.models import Job, User
from app.services.errors import NotFound
from app.services.jobs import forms as labforms
from app.services.jobs import lifecycle as job_service
from app.services.jobs import own_runs
from app.services.jobs import queue as queue_service
from app.services.jobs.labhost import HostCapacity
from app.services.learning import lessons as lesson_service
from app.web.views import result_view
from labs import catalog

RUNS_SHOWN = 20  # earlier runs listed on a lab page; /jobs lists more


@dataclass(frozen=True)
class Comparison:
    """The two runs set side by side (A older, B newer by default) and their comparison, or why there is none."""

    choices: list[Job]  # the runs that can be compared: finished, with a result
    a: Job | None
    b: Job | None
    comparison: Any  # result_view.compare's table, when both runs are there
    compare_error: str


@dataclass(frozen=True)
class LabPage:
    lab: str
    module: catalog.LabSpec
    fields: list  # the form's fields: the lab's parameters, then the backend choice
    values: dict[str, Any]  # what the form shows in them
    preset: str | None
    presets: list
    duration: str  # how long a run of what the form shows should take, in words
    errors: dict[str, str]
    latest: Job | None
    last_result: Job | None
    earlier: list[Job]
    more_runs: bool
    estimates: dict[int, queue_service.Estimate]  # job id -> its place in the queue and ETA
    losses: dict  # job id -> what the course lost on the way (attempts requeued), for the cards in full
    has_queued: bool
    gpu_offline: bool  # a GPU run was asked for and no GPU is online: offer the CPU instead
    lessons: list[Lesson]  # the lessons that use this lab
    compared: Comparison
    error_details: dict[str, str] = field(default_factory=dict)  # field -> the arithmetic behind its refusal

    def context(self) -> dict[str, Any]:
        """The template's variables: one per field, the comparison's spread out (a shallow copy)."""
        ctx = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "compared"}
        return ctx | {f.name: getattr(self.compared, f.name) for f in fields(self.compared)}

    def refused(
        self, values: dict[str, Any], errors: dict[str, str], gpu_offline: bool, details: dict[str, str] | None = None
    ) -> LabPage:
        """The page answering a refused submission: the values as sent, each error next to its field (and the
        arithmetic behind one, where its lab gives it, under the field's row)."""
        return replace(self, values=values, errors=errors, gpu_offline=gpu_offline, error_details=details or {})

    @classmethod
    def load(
        cls,
        db: Session,
        settings: Settings,
        *,
        owner: User,
        host: HostCapacity,
        spec: catalog.LabSpec,
        a: int | None = None,
        b: int | None = None,
        preset: str | None = None,
    ) -> LabPage:
        """NotFound for a preset the lab does not have."""
        runs = own_runs.latest_runs(db, owner=owner, lab=spec.name, limit=RUNS_SHOWN)
        jobs, latest, last_result = runs.jobs, runs.latest, runs.last_result
        form = form_fields(spec, host)
        has_queued = any(j.status == "queued" for j in jobs)
        values = _prefill(form, latest, has_queued)
        if preset:
            try:
                values = labforms.preset_values(spec.name, preset) | ({"replace_queued": "on"} if has_queued else {})
            except KeyError as exc:
                raise NotFound(str(exc.args[0])) from None
        backend = host.resolve(spec, "auto")
        sized = dict(spec.preset(preset).params) if preset else (latest.params if latest else {})
        estimate = queue_service.run_estimate(db, lab=spec.name, backend=backend, params=sized)
        return cls(
            lab=spec.name,
            module=spec,
            fields=form,
            values=values,
            preset=preset,
            presets=labforms.preset_links(spec.name, preset),
            duration=labforms.duration_text(estimate.seconds, backend, estimate.basis) if estimate else "",
            errors={},
            latest=latest,
            last_result=last_result,
            earlier=[j for j in jobs[1 : RUNS_SHOWN + 1] if j is not last_result],
            more_runs=len(jobs) > RUNS_SHOWN,
            estimates=queue_service.estimates(db, settings, jobs[: RUNS_SHOWN + 1]),
            losses=job_service.losses_of(db, runs.shown),  # the cards in full say what was lost on the way
            has_queued=has_queued,
            gpu_offline=False,
            lessons=lesson_service.using_lab(db, lab=spec.name),
            compared=_comparison(jobs, a, b),
        )


def form_fields(spec: catalog.LabSpec, host: HostCapacity) -> list:
    """The lab form's fields: the lab's parameters, then the backend choice this host can offer."""
    return [*labforms.form_fields(spec.name), labforms.backend_field(spec.name, host)]


def _comparison(jobs: list[Job], a: int | None, b: int | None) -> Comparison:
    done = [j for j in jobs if j.status == "succeeded" and j.result]
    by_id = {j.id: j for j in done}
    if a is None and b is None:
        if len(done) < 2:
            return Comparison(done, None, None, None, "")
        a, b = done[1].id, done[0].id
    ja, jb = by_id.get(a or -1), by_id.get(b or -1)
    if ja is None or jb is None:
        missing = a if ja is None else b
        why = f"Run {missing} is not one of your finished runs of this lab; pick two from the lists."
        return Comparison(done, ja, jb, None, why)
    assert ja.result is not None and jb.result is not None  # `done` holds only runs with a result
    return Comparison(done, ja, jb, result_view.compare(ja.result, jb.result), "")


def _prefill(form: list, job: Job | None, has_queued: bool) -> dict:
    """The form's values for "Change and run again": the latest run's parameters as the form shows them (a
    list "1, 2, 4", none as empty, a multiple choice as its ticked values), so one change and Run repeats
    it with that change. Empty before the first run: the form shows the lab's defaults."""
    if job is None:
        return {}
    params = job.params or {}
    values: dict = {"replace_queued": "on"} if has_queued else {}
    for f in form:
        if f.name == "backend":
            if job.backend in f.choices:
                values["backend"] = job.backend
        elif f.name in params:
            v = params[f.name]
            if f.kind == "multi_choice":
                values[f.name] = [str(c) for c in (v or [])]
            elif f.kind == "bool":
                values[f.name] = bool(v)
            else:
                # as the form writes a default (labforms.FormField.default_text), so an unchanged value reads as one
                values[f.name] = "" if v is None else ", ".join(map(str, v)) if isinstance(v, list) else str(v)
    return values
