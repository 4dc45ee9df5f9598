"""JSON API under /api/v1 for scripts and the interactive tools (OpenAPI at /api/v1/openapi.json).

Authentication is the same signed session cookie as the pages; state-changing calls must send
the session's CSRF token in the X-CSRF-Token header (GET /api/v1/me returns it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from app.deps import CurrentUser, DbInt, SessionDep, csrf_protect
from app.routes.labs import ARTIFACT_HEADERS, _job_for
from app.security import csrf_token_for
from app.services import jobs as job_service
from app.services.artifacts import artifact_path
from labs import catalog

router = APIRouter(prefix="/api/v1", tags=["api"], dependencies=[Depends(csrf_protect)])


class JobIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lab: str = Field(description="lab name, e.g. fp8-step")
    params: dict[str, Any] = Field(default_factory=dict, description="the lab's parameters; see GET /api/v1/labs")
    backend: Literal["auto", "te", "torch-cuda", "cpu"] = "auto"


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


def job_out(job) -> JobOut:
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


@router.get("/me")
def me(request: Request, user: CurrentUser):
    return {
        "id": user.id,
        "email": user.email,
        "display_name": user.display_name,
        "roles": sorted(user.roles),
        "csrf_token": csrf_token_for(request.session),
    }


@router.get("/labs")
def list_labs(user: CurrentUser):
    out = []
    for spec in catalog.LABS.values():
        out.append(
            {
                "name": spec.name,
                "title": spec.title,
                "backends": list(spec.backends),
                "params_schema": spec.params.model_json_schema(),
            }
        )
    return out


@router.post("/jobs", status_code=201, response_model=JobOut)
def submit(body: JobIn, user: CurrentUser, db: SessionDep):
    try:
        job = job_service.create_job(db, owner=user, lab=body.lab, params=body.params, backend=body.backend)
    except job_service.JobInputError as exc:
        return JSONResponse({"detail": str(exc), "errors": exc.errors}, status_code=422)
    return job_out(job)


@router.get("/jobs", response_model=list[JobOut])
def jobs(user: CurrentUser, db: SessionDep):
    return [job_out(j) for j in job_service.list_jobs(db, owner=user, limit=100)]


@router.get("/jobs/{job_id}", response_model=JobOut)
def job_status(job_id: DbInt, user: CurrentUser, db: SessionDep):
    return job_out(_job_for(db, job_id, user))


@router.get("/jobs/{job_id}/result")
def job_result(job_id: DbInt, user: CurrentUser, db: SessionDep):
    job = _job_for(db, job_id, user)
    if job.status != "succeeded":
        raise HTTPException(409, f"Job {job.id} is {job.status}; its result exists once it has succeeded.")
    return job.result


@router.get("/jobs/{job_id}/artifacts/{name}")
def job_artifact(job_id: DbInt, name: str, user: CurrentUser, db: SessionDep, request: Request):
    job = _job_for(db, job_id, user)
    path, media_type = artifact_path(request.app.state.settings, job, name)
    return FileResponse(path, media_type=media_type, headers=ARTIFACT_HEADERS)
