"""Every artifact download, pages and API alike: a job's files, an upload's files, a report's evidence.

GET /jobs/{id}/artifacts/{name}                                      job owner, graders, instructors
GET /api/v1/jobs/{id}/artifacts/{name}                               the same, for scripts
GET /bundles/{id}/artifacts/{name}                                   an upload, for its owner (and instructors)
GET /api/v1/bundles/{id}/artifacts/{name}                            the same, for scripts
GET /reports/{rid}/versions/{n}/evidence/{slot}/artifacts/{name}    a report's evidence, for its owner and graders

`name` is an artifact's name or its `path` from result.json (a path may hold slashes), or `result.json`.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse

from app.services import artifacts
from app.services import evidence as evidence_service
from app.services.artifacts import Artifact
from app.web.deps import DbInt, OwnedBundle, SessionDep, SettingsDep, ViewerJob, ViewerReport, csrf_protect

router = APIRouter(dependencies=[Depends(csrf_protect)])
api = APIRouter(prefix="/api/v1", tags=["api"], dependencies=[Depends(csrf_protect)])

HEADERS = {
    # Artifacts may come from uploaded bundles: never let one run script or be sniffed as HTML.
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
    "X-Content-Type-Options": "nosniff",
}


def _file(artifact: Artifact) -> FileResponse:
    return FileResponse(artifact.path, media_type=artifact.media_type, headers=HEADERS)


@router.get("/jobs/{job_id}/artifacts/{name:path}")
def job_artifact(job: ViewerJob, name: str, settings: SettingsDep) -> FileResponse:
    return _file(artifacts.of_job(settings, job, name))


@api.get("/jobs/{job_id}/artifacts/{name:path}")
def api_job_artifact(job: ViewerJob, name: str, settings: SettingsDep) -> FileResponse:
    return _file(artifacts.of_job(settings, job, name))


@router.get("/bundles/{bundle_id}/artifacts/{name:path}")
def bundle_artifact(bundle: OwnedBundle, name: str, settings: SettingsDep) -> FileResponse:
    return _file(artifacts.of_bundle(settings, bundle, name))


@api.get("/bundles/{bundle_id}/artifacts/{name:path}")
def api_bundle_artifact(bundle: OwnedBundle, name: str, settings: SettingsDep) -> FileResponse:
    return _file(artifacts.of_bundle(settings, bundle, name))


@router.get("/reports/{report_id}/versions/{number}/evidence/{slot_id}/artifacts/{name:path}")
def evidence_artifact(
    report: ViewerReport, number: DbInt, slot_id: str, name: str, db: SessionDep, settings: SettingsDep
) -> FileResponse:
    return _file(
        evidence_service.evidence_artifact(db, settings, report=report, number=number, slot_id=slot_id, name=name)
    )
