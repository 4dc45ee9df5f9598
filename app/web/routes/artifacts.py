"""Every artifact download, pages and API alike: a job's files, an upload's files, a report's evidence.

GET /jobs/{id}/artifacts/{name}                                      job owner, graders, instructors
GET /api/v1/jobs/{id}/artifacts/{name}                               the same, for scripts
GET /bundles/{id}/artifacts/{name}                                   an upload, for its owner (and instructors)
GET /api/v1/bundles/{id}/artifacts/{name}                            the same, for scripts
GET /reports/{rid}/versions/{n}/evidence/{slot}/artifacts/{name}    a report's evidence, for its owner and graders

`name` is an artifact's name or its `path` from result.json (a path may hold slashes), or `result.json`.
A Chrome trace comes as an attachment named `<lab>-job<N>-<schedule>.json` (so "Download" saves a file a
learner can drop on ui.perfetto.dev); `?as=timeline` answers the same trace as the page's timeline viewer
reads it (app/services/jobs/timelines.py), and `?as=chart` a chart SVG as the page's plot draws it, planned
by the code that drew the SVG (app/services/jobs/charts.py). On a job, `?as=chart&with=ID` plans the same
chart of two runs on one axis (the lab page's comparison), when the viewer may see both.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import FileResponse, JSONResponse, Response

from app.services.errors import NotFound
from app.services.grading import evidence as evidence_service
from app.services.jobs import artifacts, charts, timelines
from app.services.jobs import lifecycle as job_service
from app.services.jobs.artifacts import Artifact
from app.web.deps import (
    CurrentUser,
    DbInt,
    OwnedBundle,
    SessionDep,
    SettingsDep,
    ViewerJob,
    ViewerReport,
    csrf_protect,
)

router = APIRouter(dependencies=[Depends(csrf_protect)])
api = APIRouter(prefix="/api/v1", dependencies=[Depends(csrf_protect)])
# What the document says an artifact download answers: the file, in its own media type.
FILE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the file",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}

HEADERS = {
    # Artifacts may come from uploaded bundles: never let one run script or be sniffed as HTML.
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
    "X-Content-Type-Options": "nosniff",
}


# `?as=timeline`: the trace as the viewer reads it; `?as=chart`: a chart as the plot draws it; absent: the file.
AsView = Annotated[
    Literal["timeline", "chart"] | None,
    Query(alias="as", description="`timeline`: the timeline viewer's JSON; `chart`: the interactive plot's JSON"),
]
# `?as=chart&with=ID`: this chart of another job, on one axis with this job's.
WithJob = Annotated[DbInt | None, Query(alias="with", description="another job whose chart of this name to overlay")]


def _file(artifact: Artifact, as_view: str | None = None, title: str = "") -> Response:
    if as_view == "timeline":
        return JSONResponse(timelines.timeline(artifact, title=title), headers=HEADERS)
    if as_view == "chart":
        return JSONResponse(charts.panels(artifact), headers=HEADERS)
    if artifact.download_name:
        # FileResponse writes Content-Disposition itself (RFC 6266, quoted) from filename=
        return FileResponse(
            artifact.path, media_type=artifact.media_type, headers=HEADERS, filename=artifact.download_name
        )
    return FileResponse(artifact.path, media_type=artifact.media_type, headers=HEADERS)


def _title(result: dict | None, where: str, name: str) -> str:
    """What Perfetto's tab and the viewer call a trace: "overlap-trace · job 5 · windowed"."""
    return f"{(result or {}).get('lab', 'lab')} · {where} · {name.removeprefix('trace_')}"


@router.get("/jobs/{job_id}/artifacts/{name:path}")
def job_artifact(
    job: ViewerJob,
    name: str,
    settings: SettingsDep,
    db: SessionDep,
    user: CurrentUser,
    as_view: AsView = None,
    with_job: WithJob = None,
) -> Response:
    artifact = artifacts.of_job(settings, job, name)
    if with_job is None or as_view != "chart":
        return _file(artifact, as_view, _title(job.result, f"job {job.id}", name))
    other = job_service.get_job_for(db, job_id=with_job, user=user)
    if other is None:
        raise NotFound(f"No job {with_job} that you can see.")
    runs = [(f"A · #{job.id}", artifact), (f"B · #{other.id}", artifacts.of_job(settings, other, name))]
    return JSONResponse(charts.overlaid(runs), headers=HEADERS)


@api.get(
    "/jobs/{job_id}/artifacts/{name:path}",
    operation_id="get_job_artifact",
    summary="A file a job wrote (or result.json)",
    tags=["jobs"],
    response_class=Response,
    responses=FILE,
)
def api_job_artifact(job: ViewerJob, name: str, settings: SettingsDep) -> Response:
    return _file(artifacts.of_job(settings, job, name))


@router.get("/bundles/{bundle_id}/artifacts/{name:path}")
def bundle_artifact(bundle: OwnedBundle, name: str, settings: SettingsDep, as_view: AsView = None) -> Response:
    return _file(
        artifacts.of_bundle(settings, bundle, name), as_view, _title(bundle.result, f"upload {bundle.id}", name)
    )


@api.get(
    "/bundles/{bundle_id}/artifacts/{name:path}",
    operation_id="get_bundle_artifact",
    summary="A file of an uploaded bundle (or result.json)",
    tags=["bundles"],
    response_class=Response,
    responses=FILE,
)
def api_bundle_artifact(bundle: OwnedBundle, name: str, settings: SettingsDep) -> Response:
    return _file(artifacts.of_bundle(settings, bundle, name))


@router.get("/reports/{report_id}/versions/{number}/evidence/{slot_id}/artifacts/{name:path}")
def evidence_artifact(
    report: ViewerReport,
    number: DbInt,
    slot_id: str,
    name: str,
    db: SessionDep,
    settings: SettingsDep,
    as_view: AsView = None,
) -> Response:
    found = evidence_service.evidence_artifact(db, settings, report=report, number=number, slot_id=slot_id, name=name)
    return _file(found, as_view, f"report {report.id} · {slot_id} · {name.removeprefix('trace_')}")
