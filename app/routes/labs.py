"""Lab pages: parameter forms built from the lab catalog, job submission, job status (polled by htmx).

Artifacts of jobs are served by app/routes/artifacts.py.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from app.deps import CurrentUser, HostDep, PostedForm, SessionDep, ViewerJob, csrf_protect
from app.models import User
from app.services import jobs as job_service
from app.services import labforms
from app.services import lessons as lesson_service
from app.services.errors import NotFound
from app.web import is_htmx, render
from labs import catalog

router = APIRouter(dependencies=[Depends(csrf_protect)])


def _spec(lab: str) -> catalog.LabSpec:
    if lab not in catalog.LABS:
        raise NotFound(f"There is no lab called {lab!r}. Labs: {', '.join(catalog.names())}.")
    return catalog.get(lab)


def _lab_context(db: SessionDep, user: User, host: HostDep, spec: catalog.LabSpec) -> dict:
    return {
        "lab": spec.name,
        "module": spec,
        "fields": [*labforms.form_fields(spec.name), labforms.backend_field(spec.name, host)],
        "values": {},
        "errors": {},
        "jobs": job_service.list_jobs(db, owner=user, lab=spec.name, limit=10),
        "lessons": lesson_service.using_lab(db, lab=spec.name),
    }


@router.get("/labs")
def labs_index(request: Request, user: CurrentUser) -> Response:
    labs = [{"name": s.name, "title": s.title, "question": s.question} for s in catalog.LABS.values()]
    return render(request, "labs/index.html", {"labs": labs})


@router.get("/labs/{lab}")
def lab_page(request: Request, lab: str, user: CurrentUser, db: SessionDep, host: HostDep) -> Response:
    return render(request, "labs/lab.html", _lab_context(db, user, host, _spec(lab)))


@router.post("/labs/{lab}/jobs")
def submit_job(
    request: Request, lab: str, user: CurrentUser, db: SessionDep, host: HostDep, formdata: PostedForm
) -> Response:
    spec = _spec(lab)
    form: dict = {k: v for k, v in formdata.items() if isinstance(v, str)}
    form.update({k: formdata.getlist(k) for k in formdata.keys() if len(formdata.getlist(k)) > 1})
    params, errors = labforms.parse_form(lab, formdata)
    job = None
    if not errors:
        try:
            job = job_service.create_job(
                db, owner=user, lab=lab, params=params, backend=str(form.get("backend", "auto")), host=host
            )
        except job_service.JobInputError as exc:
            for e in exc.errors:  # the first message per field sits next to it
                errors.setdefault(e["field"].split(".")[0], e["message"])
    if job is None:
        ctx = {**_lab_context(db, user, host, spec), "values": form, "errors": errors}
        response = render(request, "labs/lab.html", ctx, block="lab_form", status_code=422)
        if is_htmx(request):  # errors go back into the form, next to their fields
            response.headers["HX-Retarget"] = "#lab-form-wrap"
            response.headers["HX-Reswap"] = "innerHTML"
        return response
    if is_htmx(request):  # the caller's hx-target decides where the new job card goes
        return render(request, "jobs/job.html", {"job": job}, block="job_card", status_code=201)
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


@router.get("/jobs")
def my_jobs(request: Request, user: CurrentUser, db: SessionDep) -> Response:
    return render(request, "jobs/list.html", {"jobs": job_service.list_jobs(db, owner=user, limit=100)})


@router.get("/jobs/{job_id}")
def job_page(request: Request, job: ViewerJob) -> Response:
    return render(request, "jobs/job.html", {"job": job}, block="job_card")
