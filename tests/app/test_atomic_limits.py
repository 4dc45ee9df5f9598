"""The jobs-in-flight limit and the storage quota hold when a learner's requests arrive at once: the check and the insert are one step
under the learner's lock (app/services/jobs/limits.py `hold`), on SQLite and PostgreSQL. Unlocked, 30 submits with a
limit of 10 each counted the same few jobs and 12 to 15 were accepted."""

from __future__ import annotations

import io
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.core.db import make_engine, make_sessionmaker
from app.core.models import Bundle, Job, User
from app.services.jobs import bundles
from app.services.jobs import lifecycle as job_service
from app.services.jobs import limits as limit_service
from tests.app import labruns
from tests.app.reporting import LOCAL

pytestmark = pytest.mark.both_backends  # row locks (PostgreSQL) and the write lock (SQLite) differ
AT_ONCE = 30
LIMIT = 10


def _course_limit(db, by: User) -> None:
    values = {name: None for name in limit_service.FIELDS} | {"max_in_flight": LIMIT}
    limit_service.set_limits(db, by=by, user_id=None, values=values)


def test_thirty_submits_at_once_with_a_limit_of_ten_create_exactly_ten(settings, db, make_user):
    ann = make_user("ann@example.org")
    _course_limit(db, ann)
    engine = make_engine(settings.db_url, pool_size=AT_ONCE, max_overflow=0)
    sessions = make_sessionmaker(engine)
    start = threading.Barrier(AT_ONCE)

    def submit(_: int) -> str:
        with sessions() as s:
            owner = s.get(User, ann.id)
            assert owner is not None
            s.commit()
            start.wait(timeout=30)  # all thirty reach the check together
            try:
                job_service.create_job(s, owner=owner, lab="env-check", params={}, backend="cpu", host=LOCAL)
            except limit_service.LimitReached as exc:
                assert exc.limit == "jobs in flight"
                return "refused"
            return "created"

    with ThreadPoolExecutor(AT_ONCE) as pool:
        outcomes = list(pool.map(submit, range(AT_ONCE)))
    engine.dispose()
    assert outcomes.count("created") == LIMIT and outcomes.count("refused") == AT_ONCE - LIMIT
    db.expire_all()
    assert db.query(Job).filter(Job.owner_id == ann.id).count() == LIMIT


def test_thirty_api_submits_at_once_are_answered_ten_201_and_twenty_429(client, db, make_user):
    prof = make_user("prof@example.org", roles=("instructor",))
    _course_limit(db, prof)
    client.register("ann@example.org")
    headers = {"X-CSRF-Token": client.api_token()}
    start = threading.Barrier(AT_ONCE)

    def submit(_: int) -> tuple[int, str]:
        start.wait(timeout=30)
        r = client.client.post("/api/v1/jobs", json={"lab": "env-check", "backend": "cpu"}, headers=headers)
        return r.status_code, r.text

    with ThreadPoolExecutor(AT_ONCE) as pool:
        answers = list(pool.map(submit, range(AT_ONCE)))
    codes = sorted(code for code, _ in answers)
    assert codes == [201] * LIMIT + [429] * (AT_ONCE - LIMIT), answers
    assert all(f"limit of jobs in flight ({LIMIT})" in text for code, text in answers if code == 429)
    db.expire_all()
    assert db.query(Job).count() == LIMIT


def test_uploads_at_once_pass_the_count_quota_only_as_far_as_it_allows(client, db, make_user, settings):
    """The storage quota is checked and the upload's row inserted under the same lock: five uploads at once
    with room for two keep two, and the other three are 409s that stored nothing."""
    prof = make_user("prof@example.org", roles=("instructor",))
    values = {name: None for name in limit_service.FIELDS} | {"max_stored_bundles": 2}
    limit_service.set_limits(db, by=prof, user_id=None, values=values)
    client.register("ann@example.org")
    headers = {"X-CSRF-Token": client.api_token()}
    data = (labruns.bundle("env-check") / "result.json").read_bytes()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("result.json", data)
    start = threading.Barrier(5)

    def upload(_: int) -> int:
        start.wait(timeout=30)
        files = {"bundle": ("env.zip", buf.getvalue(), "application/zip")}
        return client.client.post("/api/v1/bundles", files=files, headers=headers).status_code

    with ThreadPoolExecutor(5) as pool:
        codes = sorted(pool.map(upload, range(5)))
    assert codes == [201, 201, 409, 409, 409]
    db.expire_all()
    assert db.query(Bundle).count() == 2
    assert len([p for p in bundles.bundles_dir(settings).iterdir() if not p.name.startswith(".")]) == 2
