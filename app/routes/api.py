"""JSON API under /api/v1 for scripts and the interactive tools (OpenAPI at /api/v1/openapi.json).

Authentication is the same signed session cookie as the pages; state-changing calls must send
the session's CSRF token in the X-CSRF-Token header (GET /api/v1/me returns it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from app.deps import CurrentUser, HostDep, SessionDep, ViewerJob, csrf_protect
from app.models import Job
from app.security import csrf_token_for
from app.services import jobs as job_service
from app.services.errors import Conflict
from labs import catalog

api = APIRouter(prefix="/api/v1", tags=["api"], dependencies=[Depends(csrf_protect)])


class JobIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lab: str = Field(description="lab name, e.g. fp8-step")
    params: dict[str, Any] = Field(default_factory=dict, description="the lab's parameters; see GET /api/v1/labs")
    backend: str = Field(
        "auto",
        description="auto: the best backend this course's workers have; the job records the one that runs",
        json_schema_extra={"enum": list(catalog.BACKEND_CHOICES)},  # the catalog's names; checked on submit
    )


class JobOut(BaseModel):
    id: int
    lab: str
    params: dict
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


def job_out(job: Job) -> JobOut:
    env = (job.result or {}).get("environment", {})
    return JobOut(
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


@api.get("/me")
def me(request: Request, user: CurrentUser) -> dict:
    return {
        "id": user.id,
        "email": user.email,
        "display_name": user.display_name,
        "roles": sorted(user.roles),
        "csrf_token": csrf_token_for(request.session),
    }


@api.get("/labs")
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


@api.post("/jobs", status_code=201, response_model=JobOut)
def submit(body: JobIn, user: CurrentUser, db: SessionDep, host: HostDep) -> JobOut | JSONResponse:
    try:
        job = job_service.create_job(db, owner=user, lab=body.lab, params=body.params, backend=body.backend, host=host)
    except job_service.JobInputError as exc:
        return JSONResponse({"detail": str(exc), "errors": exc.errors}, status_code=422)
    return job_out(job)


@api.get("/jobs", response_model=list[JobOut])
def jobs(user: CurrentUser, db: SessionDep) -> list[JobOut]:
    return [job_out(j) for j in job_service.list_jobs(db, owner=user, limit=100)]


@api.get("/jobs/{job_id}", response_model=JobOut)
def job_status(job: ViewerJob) -> JobOut:
    return job_out(job)


@api.get("/jobs/{job_id}/result")
def job_result(job: ViewerJob) -> dict:
    if job.status != "succeeded" or job.result is None:
        raise Conflict(f"Job {job.id} is {job.status}; its result exists once it has succeeded.")
    return job.result
