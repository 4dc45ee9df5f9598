"""Notices kept in the learner's signed session cookie: the jobs they wait for and what to tell them.

    watch(session, job_id)      a job was submitted (or its page opened): follow it until it finishes
    forget(session, job_id)     the learner saw the job finish (its card, its page): nothing to announce
    job_notice(job)             what to say when a followed job finished out of sight
    poll_trigger(session)       the htmx trigger of the notices poll on this page (grades), or None for no poll
    pending(session)            the notices to show now, [{key, kind, text, href, link}]

Only ids, short texts and timestamps live here (the cookie holds about 4 KB); the queries are in
app/services/learning/notices.py and the routes in app/web/routes/pages.py. The jobs watched here are followed by
the page's one job-status poll (app/web/views/live_jobs.py, GET /jobs/live), which adds their notices.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from typing import Any

from app.services.learning.notices import GRADE_CHECK_S, MAX_NOTICES

WATCH, NOTICES, GRADES_SEEN, CHECKED = "watch_jobs", "notices", "grades_seen", "notices_checked"
MAX_WATCHED = 10

Session = MutableMapping[str, Any]


def watch(session: Session, job_id: int) -> None:
    ids = [i for i in session.get(WATCH, []) if i != job_id]
    session[WATCH] = [*ids, job_id][-MAX_WATCHED:]


def watched(session: Session) -> list[int]:
    return [int(i) for i in session.get(WATCH, [])]


def forget(session: Session, job_id: int) -> None:
    if job_id in session.get(WATCH, []):
        session[WATCH] = [i for i in session[WATCH] if i != job_id]
    dismiss(session, f"job-{job_id}")


def add(session: Session, notice: dict) -> None:
    kept = [n for n in session.get(NOTICES, []) if n.get("key") != notice["key"]]
    session[NOTICES] = [*kept, notice][-MAX_NOTICES:]


def dismiss(session: Session, key: str) -> None:
    if any(n.get("key") == key for n in session.get(NOTICES, [])):
        session[NOTICES] = [n for n in session[NOTICES] if n.get("key") != key]


def pending(session: Session) -> list[dict]:
    return list(session.get(NOTICES, []))


def grades_due(session: Session, now: float | None = None) -> bool:
    return (now or time.time()) - float(session.get(CHECKED, 0)) >= GRADE_CHECK_S


def poll_trigger(session: Session) -> str | None:
    """Once on load when a grade check is due, else not at all (jobs in flight are the job-status poll's)."""
    return "load" if grades_due(session) else None


def job_notice(job: Any) -> dict:
    """The notice of a followed job that finished (succeeded or failed) while its learner was elsewhere."""
    ok = job.status == "succeeded"
    return {
        "key": f"job-{job.id}",
        "kind": job.status,
        "text": f"Your {job.lab} run (job {job.id}) {'finished' if ok else 'failed'}.",
        "href": f"/jobs/{job.id}",
        "link": "See the result" if ok else "See why",
    }
