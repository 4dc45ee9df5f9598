"""The page's one job-status poll: which jobs a page shows live, whether anything its learner would see of them
changed, and when to ask again (templates/jobs/_live.html, GET /jobs/live in app/web/routes/labs.py).

    {{ live_job(job, est) }}            in a job card or a /jobs row that is not finished: its hidden input (the poll
                                        sends it back) and a note on the request of what the page shows
    {% set live = live_poll() %}        at the end of base.html: the poll as this page was drawn (a fragment with a
                                        job in flight brings it along out of band: app/web/templates.py render)
    Follow.of(items, watched=…)        at each poll: the same, from the rows read now

A page polls once, however many cards it shows: its cards' and rows' ids and the jobs its session waits for
(app/web/notice_session.py). The answer is an ETag of everything those would show (status, progress, place, the ETA
as worded, a running job's time so far); the page sends it back as If-None-Match, and an unchanged answer is a 304
after one indexed read. The interval follows what is followed: a running job or the next in line every few
seconds, a job far back in the queue about a tenth of its wait, at most half a minute (a minute for a job followed
only for its notice). Nothing in flight: no poll.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jinja2 import pass_context
from markupsafe import Markup

from app.services.jobs.queue import Estimate
from app.web import filters, notice_session

POLL_MIN_S, POLL_MAX_S = 2, 30  # a job the page shows
WATCH_MIN_S, WATCH_MAX_S = 5, 60  # a job followed only to say when it is done (a notice)
UNKNOWN_S = 10  # a page that waits for a job it does not show: its first poll finds out where it stands
STATE_KEY = "live_jobs"  # request.state: [(kind, job, estimate)] of what this response shows live


@dataclass(frozen=True)
class Item:
    kind: str  # card | row | watched
    job: Any  # a Job, or a row of its columns (lifecycle.live_rows)
    est: Estimate | None


def _state(item: Item) -> tuple:
    """What the page shows of one job: a change here is a change on the page."""
    job, est = item.job, item.est
    if item.kind == "watched":
        return (job.id, job.status)
    drawn: tuple = (
        job.id,
        item.kind,
        job.status,
        round(job.progress or 0.0, 3),
        job.message,
        job.attempts,
        job.cancel_requested_at is not None,
        job.node,
    )
    if est is not None:
        drawn += (est.position, filters.eta(est.start_in_s), filters.eta(est.done_in_s), est.basis)
    if job.status == "running":
        drawn += (filters.job_duration(job),)
    return drawn


def _every(item: Item) -> int:
    job, est = item.job, item.est
    if job.status == "running":
        base = 2.0 if job.cancel_requested_at else (est.done_in_s / 20 if est and est.done_in_s is not None else 3.0)
    elif est is not None and est.start_in_s is not None:
        base = est.start_in_s / 10
    elif est is not None and est.position is not None:
        base = 2.0 + 2 * est.position
    else:
        base = float(UNKNOWN_S)
    lo, hi = (WATCH_MIN_S, WATCH_MAX_S) if item.kind == "watched" else (POLL_MIN_S, POLL_MAX_S)
    return int(min(hi, max(lo, round(base))))


@dataclass(frozen=True)
class Follow:
    """What one page's poll follows, and what it says: `etag` ("" when not all of it is known), `interval_s` (0:
    nothing in flight, no poll)."""

    etag: str
    interval_s: int

    @classmethod
    def of(cls, items: Iterable[Item], *, unknown: bool = False) -> Follow:
        """`unknown`: the page waits for a job it could not see drawn (its first poll answers in full)."""
        followed = [i for i in items if i.job.status in ("queued", "running")]
        if not followed:
            return cls("", UNKNOWN_S if unknown else 0)
        every = min(_every(i) for i in followed)
        if unknown:
            return cls("", min(every, UNKNOWN_S))
        states = sorted({repr(_state(i)) for i in items})  # a job drawn twice counts once
        digest = hashlib.blake2b("\n".join(states).encode(), digest_size=12).hexdigest()
        return cls(f'"{digest}"', every)


def shown(request: Any) -> list[Item]:
    """What this response has drawn live so far."""
    return getattr(request.state, STATE_KEY, [])


@pass_context
def live_job(ctx: Any, job: Any, est: Estimate | None = None, kind: str = "card") -> Markup:
    """The hidden input a card (or a /jobs row, kind="row") in flight carries; the page's poll sends it back."""
    request = ctx.get("request")
    if request is not None:
        drawn = shown(request)
        drawn.append(Item(kind, job, est))
        setattr(request.state, STATE_KEY, drawn)
    name = "live_row" if kind == "row" else "live_job"
    return Markup(f'<input type="hidden" name="{name}" value="{int(job.id)}">')


@pass_context
def live_poll(ctx: Any) -> Follow:
    """The poll of the page being drawn: the jobs it showed live, and the ones its session waits for."""
    request = ctx.get("request")
    if request is None or "session" not in request.scope:
        return Follow("", 0)
    drawn = shown(request)
    waits = notice_session.watched(request.session)
    seen = {i.job.id for i in drawn}
    watched = [Item("watched", i.job, i.est) for i in drawn if i.job.id in waits]
    return Follow.of([*drawn, *watched], unknown=any(j not in seen for j in waits))
