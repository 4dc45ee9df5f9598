"""Lab pages: parameter forms built from the lab catalog, job submission, job status with its place in the
fair queue and an ETA (followed by each page's one poll), and cancel.

    GET  /labs/{lab}                      the form, the learner's runs and two side by side (?a=ID&b=ID):
                                          app/web/views/lab_page.py
    GET  /labs/{lab}/runs                 the last result and earlier-runs list (htmx refreshes them after a
                                          submission and when a polling card sees its run finish)
    GET  /labs/{lab}/compare?a=ID&b=ID    the comparison alone (htmx), or the whole page
    POST /labs/{lab}/jobs                 submit; every invalid field comes back next to its input at once
    GET  /jobs, /jobs/{id}                the learner's jobs; one job's card
    GET  /jobs/live                       the page's one job-status poll: the cards and rows it shows in flight, and
                                          the jobs its session waits for; 304 when none changed
                                          (app/web/views/live_jobs.py)
    POST /jobs/{id}/cancel                cancel; back to the job's card, or to /jobs with next=/jobs

Artifacts of jobs are served by app/web/routes/artifacts.py.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.core.config import Settings
from app.core.models import FINISHED_STATUSES, Job, User
from app.services.errors import NotFound
from app.services.jobs import forms as labforms
from app.services.jobs import lifecycle as job_service
from app.services.jobs import limits as limit_service
from app.services.jobs import queue as queue_service
from app.services.jobs.labhost import HostCapacity
from app.services.learning import lessons as lesson_service
from app.web import notice_session
from app.web.deps import (
    CurrentUser,
    DbInt,
    HostDep,
    PostedForm,
    SessionDep,
    SettingsDep,
    ViewerDep,
    ViewerJob,
    csrf_protect,
)
from app.web.templates import is_htmx, render
from app.web.views import live_jobs as live
from app.web.views.lab_page import LabPage, form_fields
from labs import catalog

router = APIRouter(dependencies=[Depends(csrf_protect)])


def _spec(lab: str) -> catalog.LabSpec:
    if lab not in catalog.LABS:
        raise NotFound(f"There is no lab called {lab!r}. Labs: {', '.join(catalog.names())}.")
    return catalog.get(lab)


def card_context(db: Session, settings: Settings, job: Job, user: User) -> dict:
    return {
        "job": job,
        "estimates": queue_service.estimates(db, settings, [job]),
        "user": user,
        "losses": job_service.losses_of(db, [job]),
        "can_cancel": job_service.may_cancel(db, job, user),
    }


def _gpu_offline(host: HostCapacity, spec: catalog.LabSpec, backend: str) -> bool:
    """A GPU backend was asked for (or `auto` on a lab that could use one) and no GPU is online to run it."""
    return (
        host.capacity.gpus == 0
        and backend in catalog.GPU_BACKENDS
        and any(b in catalog.GPU_BACKENDS for b in spec.backends)
    )


@router.get("/labs")
def labs_index(request: Request, user: CurrentUser, db: SessionDep) -> Response:
    """Each lab with the question it answers, the lessons that use it, and the learner's latest run."""
    latest = job_service.latest_per_lab(db, owner=user)
    labs = [
        {"spec": s, "latest": latest.get(s.name), "lessons": lesson_service.using_lab(db, lab=s.name)}
        for s in catalog.LABS.values()
    ]
    return render(request, "labs/index.html", {"labs": labs})


@router.get("/labs/{lab}")
def lab_page(
    request: Request,
    lab: str,
    user: CurrentUser,
    db: SessionDep,
    host: HostDep,
    settings: SettingsDep,
    a: DbInt | None = None,
    b: DbInt | None = None,
    preset: Annotated[str | None, Query(max_length=64)] = None,
) -> Response:
    page = LabPage.load(db, settings, owner=user, host=host, spec=_spec(lab), a=a, b=b, preset=preset)
    return render(request, "labs/lab.html", page.context())


@router.get("/labs/{lab}/runs")
def lab_runs(
    request: Request, lab: str, user: CurrentUser, db: SessionDep, host: HostDep, settings: SettingsDep
) -> Response:
    page = LabPage.load(db, settings, owner=user, host=host, spec=_spec(lab))
    return render(request, "labs/lab.html", page.context(), block="earlier_runs")


@router.get("/labs/{lab}/compare")
def lab_compare(
    request: Request,
    lab: str,
    user: CurrentUser,
    db: SessionDep,
    host: HostDep,
    settings: SettingsDep,
    a: DbInt | None = None,
    b: DbInt | None = None,
) -> Response:
    page = LabPage.load(db, settings, owner=user, host=host, spec=_spec(lab), a=a, b=b)
    return render(request, "labs/lab.html", page.context(), block="compare")


@router.post("/labs/{lab}/jobs")
def submit_job(
    request: Request,
    lab: str,
    user: CurrentUser,
    db: SessionDep,
    host: HostDep,
    settings: SettingsDep,
    formdata: PostedForm,
) -> Response:
    spec = _spec(lab)
    form: dict = {k: v for k, v in formdata.items() if isinstance(v, str)}
    form.update({k: formdata.getlist(k) for k in formdata.keys() if len(formdata.getlist(k)) > 1})
    params, errors = labforms.parse_form(lab, formdata)
    # "Run it on CPU instead", offered when no GPU is online, re-sends the form with this button
    backend = "cpu" if form.get("fallback") == "cpu" else str(form.get("backend", "auto"))
    job = None
    gpu_offline = False
    details: dict[str, str] = {}
    if not errors:
        try:
            job = job_service.create_job(
                db,
                owner=user,
                lab=lab,
                params=params,
                backend=backend,
                host=host,
                replace_queued=form.get("replace_queued") == "on",
            )
        except job_service.JobInputError as exc:
            for e in exc.errors:  # the first message per field sits next to it
                name = e["field"].split(".")[0]
                if name not in errors and e.get("detail"):
                    details[name] = e["detail"]
                errors.setdefault(name, e["message"])
            gpu_offline = "backend" in errors and _gpu_offline(host, spec, host.resolve(spec, backend))
        except limit_service.LimitReached as exc:
            errors["limit"] = exc.message
    if job is None:
        page = LabPage.load(db, settings, owner=user, host=host, spec=spec).refused(form, errors, gpu_offline, details)
        response = render(request, "labs/lab.html", page.context(), block="lab_form", status_code=422)
        if is_htmx(request):  # errors go back into the form, next to their fields
            response.headers["HX-Retarget"] = "#lab-form-wrap"
            response.headers["HX-Reswap"] = "innerHTML"
        return response
    notice_session.watch(request.session, job.id)  # whatever page the learner is on hears when it is done
    if is_htmx(request):  # the caller's hx-target decides where the new job card goes
        ctx = card_context(db, settings, job, user)
        if form.get("had_errors"):  # the form still shows the refused try's errors: it comes along, without them
            ctx |= {
                "form_oob": True,
                "lab": spec.name,
                "module": spec,
                "fields": form_fields(spec, host),
                "values": form,
            }
        response = render(request, "jobs/job.html", ctx, block="job_card", status_code=201)
        # replaced cards refresh themselves; the lab page refreshes its list of earlier runs
        response.headers["HX-Trigger"] = "job-submitted, lab-runs-changed"
        return response
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


@router.get("/jobs")
def my_jobs(request: Request, user: CurrentUser, db: SessionDep, settings: SettingsDep) -> Response:
    """The learner's jobs, newest first; while any is queued or running the list polls itself (htmx) and those
    rows have a Cancel button."""
    jobs = job_service.list_jobs(db, owner=user, limit=100)
    ctx = {
        "jobs": jobs,
        "estimates": queue_service.estimates(db, settings, jobs),
        "in_flight": any(not j.finished for j in jobs),
    }
    return render(request, "jobs/list.html", ctx, block="jobs")


@router.get("/jobs/live")
async def live_jobs(
    request: Request,
    viewer: ViewerDep,
    db: SessionDep,
    settings: SettingsDep,
    live_job: Annotated[list[DbInt], Query(max_length=MAX_FOLLOWED)] = [],  # noqa: B006 (FastAPI copies it)
    live_row: Annotated[list[DbInt], Query(max_length=MAX_FOLLOWED)] = [],  # noqa: B006
) -> Response:
    """Reads on the event loop, like the lesson pages (app/web/deps.py Viewer): the login, then the followed jobs by
    primary key; the queue's places and ETAs come from the process's snapshot. Unchanged: 304. Anything that may
    read more (a snapshot due a check, a card to draw, a staff member's view of another's job) runs in a worker
    thread."""
    user = await viewer.required()
    session = request.session
    watched = notice_session.watched(session)
    rows = job_service.live_rows(db, ids={*live_job, *live_row, *watched})
    mine = {r.id: r for r in rows if r.owner_id == user.id}
    others = [r for r in rows if r.owner_id != user.id and r.id in {*live_job, *live_row}]
    if others:  # staff roles are per class: the job page's own rule decides, in a worker thread
        seen = await run_in_threadpool(_visible, db, user.id, [r.id for r in others])
        mine |= {r.id: r for r in others if r.id in seen}
    ests = queue_service.kept_estimates(db, list(mine.values()))
    if ests is None:
        ests = await run_in_threadpool(queue_service.estimates, db, settings, list(mine.values()), check=False)

    def items(cards: list[int], rows_: list[int], followed: list[int]) -> list[live.Item]:
        return (
            [live.Item("card", mine[i], ests.get(i)) for i in cards if i in mine]
            + [live.Item("row", mine[i], ests.get(i)) for i in rows_ if i in mine]
            + [live.Item("watched", mine[i], ests.get(i)) for i in followed if i in mine]
        )

    asked = live.Follow.of(items(live_job, live_row, watched))
    if asked.etag and asked.etag == request.headers.get("if-none-match"):
        return Response(status_code=304, headers={"ETag": asked.etag, "Cache-Control": "no-store"})
    # Something changed. A followed job that finished: seen if the page shows it, else a notice.
    shown = {*live_job, *live_row}
    before = notice_session.pending(session)
    for i in watched:
        job = mine.get(i)
        if job is None or job.status in FINISHED_STATUSES:
            notice_session.forget(session, i)
            if job is not None and i not in shown and job.status != "cancelled":
                notice_session.add(session, notice_session.job_notice(job))
    finished = [i for i in shown if i in mine and mine[i].status in FINISHED_STATUSES]
    going = [i for i in live_job if i in mine and i not in finished]
    rows_going = [i for i in live_row if i in mine and i not in finished]
    after = live.Follow.of(items(going, rows_going, notice_session.watched(session)))
    cards = await run_in_threadpool(_cards, db, [i for i in live_job if i in mine])
    ctx = {
        "live": after,
        "cards": cards,
        "estimates": ests,
        "losses": job_service.losses_of(db, cards) if any(c.attempts > 1 for c in cards) else {},
        "notices_changed": notice_session.pending(session) != before,
    }
    response = render(request, "jobs/live.html", ctx)
    response.headers["Cache-Control"] = "no-store"
    if after.etag:
        response.headers["ETag"] = after.etag
    events = (["lab-runs-changed"] if any(i in finished for i in live_job) else []) + (
        ["jobs-changed"] if live_row else []
    )
    if events:
        response.headers["HX-Trigger"] = ", ".join(events)
    return response


MAX_FOLLOWED = 50  # cards and rows one page follows: /jobs lists 100 jobs, a learner has a few in flight


def _visible(db: Session, user_id: int, ids: list[int]) -> set[int]:
    """Which of another learner's jobs a member of staff may see (the job page's own rule)."""
    user = db.get(User, user_id)
    return {i for i in ids if user is not None and job_service.get_job_for(db, job_id=i, user=user) is not None}


def _cards(db: Session, ids: list[int]) -> list[Job]:
    return job_service.jobs_by_id(db, ids=ids) if ids else []


@router.get("/jobs/{job_id}")
def job_page(request: Request, job: ViewerJob, user: CurrentUser, db: SessionDep, settings: SettingsDep) -> Response:
    if job.finished:  # seen finishing (its page, or its card polling on a lab page): nothing left to announce
        notice_session.forget(request.session, job.id)
    response = render(request, "jobs/job.html", card_context(db, settings, job, user), block="job_card")
    if job.finished and is_htmx(request):  # a polling card's last answer: the lab page's last result is this now
        response.headers["HX-Trigger"] = "lab-runs-changed"
    return response


@router.post("/jobs/{job_id}/cancel")
def cancel_job(
    request: Request, job: ViewerJob, user: CurrentUser, db: SessionDep, settings: SettingsDep, formdata: PostedForm
) -> Response:
    if not job_service.may_cancel(db, job, user):
        raise HTTPException(403, "Only the job's owner, an instructor of their class or a site admin can cancel it.")
    job = job_service.cancel(db, job=job, by=user)
    if job.finished:  # cancelled at once (it was queued): nothing to follow, nothing to announce
        notice_session.forget(request.session, job.id)
    if formdata.get("next") == "/jobs":  # the list's button: back to the list (htmx follows, selecting #jobs)
        return RedirectResponse("/jobs", status_code=303)
    if is_htmx(request):
        return render(request, "jobs/job.html", card_context(db, settings, job, user), block="job_card")
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)
