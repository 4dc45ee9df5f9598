"""JSON API under /api/v1 for scripts and the interactive tools (OpenAPI at /api/v1/openapi.json).

Authentication is the same signed session cookie as the pages (state-changing calls then send the session's
CSRF token in the X-CSRF-Token header; GET /api/v1/me returns it), or a personal API token as
`Authorization: Bearer …` (no CSRF token). A token acts as the learner it belongs to, whatever the account's
roles: it reaches that account's own jobs, results, artifacts and uploads only (another's answer 404), and what
an instructor or grader may do with other people's work needs their browser login (app/web/deps.py
`acts_as_learner`, `token_refused`).

The body of POST /api/v1/jobs is documented per lab: `job_request_models` turns each catalog entry into a model
whose `lab` is its name and whose `params` is its parameters model, and app/web/openapi.py publishes their union,
keyed by `lab`. The route itself reads the loose `JobIn` and leaves each lab's parameters to the job service,
which validates them with the same models and answers every bad field in the user's terms.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from functools import cache
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, create_model

from app.core.models import Job
from app.services.classes import registry as class_registry
from app.services.errors import Conflict
from app.services.jobs import lifecycle as job_service
from app.services.jobs import limits as limit_service
from app.services.jobs import queue as queue_service
from app.web import problems
from app.web.csrf import csrf_token_for
from app.web.deps import CurrentUser, HostDep, SessionDep, SettingsDep, ViewerJob, csrf_protect
from labs import catalog

api = APIRouter(prefix="/api/v1", dependencies=[Depends(csrf_protect)])


class JobOptions(BaseModel):
    """What a job request says besides its lab and parameters, the same for every lab."""

    model_config = ConfigDict(extra="forbid")
    backend: str = Field(
        "auto",
        description="auto: the best backend this course's workers have; the job records the one that runs",
        json_schema_extra={"enum": list(catalog.BACKEND_CHOICES)},  # the catalog's names; checked on submit
    )
    replace_queued: bool = Field(
        False, description="cancel your still-queued runs of this lab first (running ones are left alone)"
    )


class JobIn(JobOptions):
    """A job request as the route reads it: any lab name and a free object of parameters, checked by the job
    service (an unknown lab or a bad parameter is a 422 naming it). The document shows `job_request_models`."""

    lab: str = Field(description="lab name, e.g. fp8-step")
    params: dict[str, Any] = Field(default_factory=dict, description="the lab's parameters; see GET /api/v1/labs")


def _camel(name: str) -> str:
    """A lab's name as a model's: "fp8-step" -> "Fp8Step"."""
    return "".join(word[:1].upper() + word[1:] for word in re.split(r"[^A-Za-z0-9]+", name) if word)


@cache
def _request_model(name: str, title: str, params: type[BaseModel]) -> type[BaseModel]:
    """The request for one lab, named after it (a generated client's class names come from these names); kept per
    catalog entry, so building an app again makes no new classes."""
    named = create_model(f"{_camel(name)}Params", __base__=params, __doc__=params.__doc__ or f"{name}'s parameters")
    options = {key: (info.annotation, info) for key, info in JobOptions.model_fields.items()}
    return create_model(  # type: ignore[call-overload]
        f"{_camel(name)}Job",
        __config__=JobOptions.model_config,
        __doc__=f"A run of the {name} lab: {title}.",
        lab=(Literal[name], Field(description="the lab to run")),
        params=(
            named,
            Field(
                default_factory=named,
                description="the lab's parameters; a field left out takes its default (GET /api/v1/labs lists them)",
            ),
        ),
        **options,
    )


def job_request_models(specs: Iterable[catalog.LabSpec]) -> list[type[BaseModel]]:
    """One request model per lab of `specs`, in their order: the union POST /api/v1/jobs documents."""
    return [_request_model(spec.name, spec.title, spec.params) for spec in specs]


class JobOut(BaseModel):
    id: int
    lab: str
    params: dict = Field(description="the parameters it runs with, every field filled in (the lab's model in JobIn)")
    backend: str
    status: str
    progress: float
    message: str
    attempts: int
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result_url: str | None
    label: str | None = Field(description="the honesty label of the backend that ran, once finished")
    queue_position: int | None = Field(None, description="queued jobs that start before this one (0: next)")
    eta_start_s: float | None = Field(
        None,
        description="estimated seconds until it starts (queued jobs); null when no start can be estimated, e.g. no "
        "lab node that runs it is online, with the reason in eta_basis",
    )
    eta_done_s: float | None = Field(None, description="estimated seconds until it finishes")
    eta_basis: str | None = Field(None, description="what the estimate is made from")
    node: str | None = Field(None, description="the host that ran (or runs) the last attempt")


def job_out(job: Job, est: queue_service.Estimate | None = None) -> JobOut:
    env = (job.result or {}).get("environment", {})
    return JobOut(
        queue_position=est.position if est else None,
        eta_start_s=est.start_in_s if est else None,
        eta_done_s=est.done_in_s if est else None,
        eta_basis=est.basis if est else None,
        node=job.node,
        id=job.id,
        lab=job.lab,
        params=job.params,
        backend=job.backend,
        status=job.status,
        progress=job.progress,
        message=job.message,
        attempts=job.attempts,
        error=job.error,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        result_url=f"/api/v1/jobs/{job.id}/result" if job.status == "succeeded" else None,
        label=env.get("label"),
    )


@api.get("/me", operation_id="get_me", summary="Who you are, and your CSRF token", tags=["account"])
def me(request: Request, user: CurrentUser, db: SessionDep) -> dict:
    """`roles`: site roles (admin, author); `classes`: each class you are in, with your role there."""
    return {
        "id": user.id,
        "email": user.email,
        "display_name": user.display_name,
        "roles": sorted(user.roles),
        "classes": [
            {"slug": m.klass.slug, "title": m.klass.title, "role": m.role}
            for m in class_registry.memberships(db, user_id=user.id)
            if not m.left
        ],
        "csrf_token": csrf_token_for(request.session),
    }


@api.get("/labs", operation_id="list_labs", summary="The labs and their parameters", tags=["labs"])
def list_labs(user: CurrentUser, host: HostDep) -> list[dict]:
    """Every lab of the catalog: its parameters' JSON Schema, its backends, and what `auto` runs here."""
    return [
        {
            "name": spec.name,
            "title": spec.title,
            "question": spec.question,
            "backends": list(spec.backends),
            "auto_backend": host.resolve(spec, "auto"),
            "params_schema": spec.params.model_json_schema(),
        }
        for spec in catalog.LABS.values()
    ]


@api.post(
    "/jobs",
    status_code=201,
    response_model=JobOut,
    operation_id="submit_job",
    summary="Submit a lab job",
    tags=["jobs"],
    responses=problems.responses(s429="At one of your limits (`limit` names it); Retry-After when known"),
)
def submit(
    body: JobIn, user: CurrentUser, db: SessionDep, host: HostDep, settings: SettingsDep
) -> JobOut | JSONResponse:
    """Queue a job. 422 names each bad field; when no GPU is online for a GPU backend the body's `offer` lists the
    alternatives; 429 (with Retry-After when known) when you are at one of your limits, naming it."""
    try:
        job = job_service.create_job(
            db,
            owner=user,
            lab=body.lab,
            params=body.params,
            backend=body.backend,
            host=host,
            replace_queued=body.replace_queued,
        )
    except job_service.JobInputError as exc:
        content: dict = {"detail": str(exc), "errors": exc.errors}
        if host.capacity.gpus == 0 and any(e["field"] == "backend" for e in exc.errors):
            content["offer"] = {
                "backend": "cpu",
                "cpu_label": "CPU emulation: ranks run as CPU processes and FP8, where the lab uses it, is emulated in "
                "software; timings are CPU timings, not GPU measurements",
                "bundle_upload": "/api/v1/bundles",
            }
        return JSONResponse(content, status_code=422)
    except limit_service.LimitReached as exc:
        retry = exc.retry_after_s()
        return JSONResponse(
            {
                "detail": exc.message,
                "limit": exc.limit,
                "frees_at": exc.frees_at.isoformat() if exc.frees_at else None,
            },
            status_code=429,
            headers={"Retry-After": str(retry)} if retry else None,
        )
    return job_out(job, queue_service.estimates(db, settings, [job]).get(job.id))


@api.get(
    "/jobs", response_model=list[JobOut], operation_id="list_jobs", summary="Your jobs, newest first", tags=["jobs"]
)
def jobs(user: CurrentUser, db: SessionDep, settings: SettingsDep) -> list[JobOut]:
    mine = job_service.list_jobs(db, owner=user, limit=100)
    est = queue_service.estimates(db, settings, mine)
    return [job_out(j, est.get(j.id)) for j in mine]


@api.get("/jobs/{job_id}", response_model=JobOut, operation_id="get_job", summary="A job's status", tags=["jobs"])
def job_status(job: ViewerJob, db: SessionDep, settings: SettingsDep) -> JobOut:
    return job_out(job, queue_service.estimates(db, settings, [job]).get(job.id))


@api.delete(
    "/jobs/{job_id}",
    response_model=JobOut,
    operation_id="cancel_job",
    summary="Cancel a job",
    tags=["jobs"],
    responses=problems.responses(s403="Not yours to cancel"),
)
def cancel_job(job: ViewerJob, user: CurrentUser, db: SessionDep, settings: SettingsDep) -> JobOut | JSONResponse:
    """Cancel a queued job (at once) or a running one (its worker stops it within a heartbeat: poll until it
    reads `cancelled`). 409 once it has finished; 403 for a grader, who may look but not cancel. With an API
    token only the token's own account's jobs exist here (404 otherwise): staff actions need the browser login."""
    if not job_service.may_cancel(db, job, user):
        return JSONResponse({"detail": "Only the job's owner or an instructor can cancel it."}, status_code=403)
    job = job_service.cancel(db, job=job, by=user)
    return job_out(job, queue_service.estimates(db, settings, [job]).get(job.id))


@api.get(
    "/jobs/{job_id}/result",
    operation_id="get_job_result",
    summary="A finished job's result.json",
    tags=["jobs"],
    responses=problems.responses(s409="The job has not succeeded (yet)"),
)
def job_result(job: ViewerJob) -> dict:
    if job.status != "succeeded" or job.result is None:
        raise Conflict(f"Job {job.id} is {job.status}; its result exists once it has succeeded.")
    return job.result
