"""Lab pages: parameter forms, job status (polled by htmx), results and artifacts."""

from __future__ import annotations

import mimetypes

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, RedirectResponse

from app.deps import CurrentUser, DbInt, SessionDep, csrf_protect
from app.services import jobs as job_service
from app.services import labforms
from app.services.artifacts import artifact_path
from app.web import is_htmx, render
from labs import catalog

router = APIRouter(dependencies=[Depends(csrf_protect)])

ARTIFACT_HEADERS = {
    # Artifacts may come from uploaded bundles: never let one run script or be sniffed as HTML.
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
    "X-Content-Type-Options": "nosniff",
}


def _lab_or_404(lab: str):
    if lab not in catalog.LABS:
        raise HTTPException(404, f"There is no lab called {lab!r}. Labs: {', '.join(catalog.names())}.")
    return catalog.get(lab)


@router.get("/labs")
def labs_index(request: Request, user: CurrentUser):
    labs = [{"name": s.name, "title": s.title} for s in catalog.LABS.values()]
    return render(request, "labs/index.html", {"labs": labs})


@router.get("/labs/{lab}")
def lab_page(request: Request, lab: str, user: CurrentUser, db: SessionDep):
    module = _lab_or_404(lab)
    ctx = {
        "lab": lab,
        "module": module,
        "fields": labforms.form_fields(lab),
        "values": {},
        "errors": {},
        "jobs": job_service.list_jobs(db, owner=user, lab=lab, limit=10),
        "lessons": _lessons_using(db, lab),
    }
    return render(request, "labs/lab.html", ctx)


def _lessons_using(db, lab: str) -> list:
    """Lessons whose hands-on lab asks for this lab, so its page can link back to them."""
    from app.services import lessons as lesson_service

    out = []
    for lesson, _ in lesson_service.catalogue(db):
        if lesson.lab is None:
            continue
        used = {e.lab for e in lesson.lab.evidence} | {s.lab for s in lesson.lab.procedure if s.lab}
        if lesson.lab.stretch:
            used.add(lesson.lab.stretch.lab)
        if lab in used:
            out.append(lesson)
    return out


@router.post("/labs/{lab}/jobs")
async def submit_job(request: Request, lab: str, user: CurrentUser, db: SessionDep):
    module = _lab_or_404(lab)
    formdata = await request.form()
    form = {k: v for k, v in formdata.items() if isinstance(v, str)}
    form.update({k: formdata.getlist(k) for k in formdata.keys() if len(formdata.getlist(k)) > 1})
    backend = form.get("backend", "auto")
    params, errors = labforms.parse_form(lab, formdata)
    job = None
    if not errors:
        try:
            job = job_service.create_job(db, owner=user, lab=lab, params=params, backend=backend)
        except job_service.JobInputError as exc:
            errors = {e["field"].split(".")[0]: e["message"] for e in exc.errors}
    if job is None:
        ctx = {
            "lab": lab,
            "module": module,
            "fields": labforms.form_fields(lab),
            "values": form,
            "errors": errors,
            "jobs": job_service.list_jobs(db, owner=user, lab=lab, limit=10),
        }
        response = render(request, "labs/lab.html", ctx, block="lab_form", status_code=422)
        if is_htmx(request):  # errors go back into the form, next to their fields
            response.headers["HX-Retarget"] = "#lab-form-wrap"
            response.headers["HX-Reswap"] = "innerHTML"
        return response
    if is_htmx(request):  # the caller's hx-target decides where the new job card goes
        return render(request, "jobs/job.html", {"job": job}, block="job_card", status_code=201)
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


def _job_for(db, job_id: DbInt, user) -> job_service.Job:
    job = job_service.get_job_for(db, job_id=job_id, user=user)
    if job is None:  # not yours and not a grader: the same answer as a missing job, leaking nothing
        raise HTTPException(404, f"No job {job_id} that you can see.")
    return job


@router.get("/jobs")
def my_jobs(request: Request, user: CurrentUser, db: SessionDep):
    return render(request, "jobs/list.html", {"jobs": job_service.list_jobs(db, owner=user, limit=100)})


@router.get("/jobs/{job_id}")
def job_page(request: Request, job_id: DbInt, user: CurrentUser, db: SessionDep):
    job = _job_for(db, job_id, user)
    return render(request, "jobs/job.html", {"job": job}, block="job_card")


@router.get("/jobs/{job_id}/artifacts/{name}")
def job_artifact(job_id: DbInt, name: str, user: CurrentUser, db: SessionDep, request: Request):
    job = _job_for(db, job_id, user)
    path, media_type = artifact_path(request.app.state.settings, job, name)
    return FileResponse(path, media_type=media_type or mimetypes.guess_type(path.name)[0], headers=ARTIFACT_HEADERS)
