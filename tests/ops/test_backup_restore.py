"""Backup and restore into a fresh deployment (app/cli/backup.py, docs/operating.md): a learner's written answer
and graded try, a lab run with its stored result, an uploaded bundle, and a second class with its instructor and
its grader's assignment, through `python -m app backup` and
`python -m app restore` as an operator runs them (real processes, `pg_dump` and `psql` on the suite's PostgreSQL,
SQLite's online backup), then read back through the restored server's own pages and API."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.models import Attempt, Bundle, ClassMember, CourseClass, GraderAssignment, Job, Response
from app.services.accounts import users
from app.services.classes import registry as class_registry
from app.services.grading import grades as grading
from app.services.jobs import bundles
from app.services.jobs import lifecycle as jobs
from app.services.learning import answering
from app.services.learning import lessons as lesson_service
from app.web.factory import create_app
from tests.app import labruns
from tests.conftest import ROOT, Browserless, _new_pg_database

WRITTEN = "Shard within the node, replicate across nodes: the all-reduce stays on NVLink."


def _zip(lab: str) -> bytes:
    root = labruns.bundle(lab)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in sorted(root.rglob("*")):
            if p.is_file():
                zf.writestr(p.relative_to(root).as_posix(), p.read_bytes())
    return buf.getvalue()


def _app(args: list[str], data_dir: Path, db_url: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COURSE_ENV="test", COURSE_DATA_DIR=str(data_dir), DATABASE_URL=db_url)
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def _kept(db) -> dict:
    """What must come back: the learner's rows, by value."""
    return {
        "responses": sorted((r.kind, r.item_id, r.text) for r in db.scalars(select(Response))),
        "attempts": sorted((a.question_id, a.status, a.lesson_version) for a in db.scalars(select(Attempt))),
        "jobs": sorted((j.id, j.lab, j.status, j.bundle_dir, j.result["lab"]) for j in db.scalars(select(Job))),
        "bundles": sorted((b.id, b.lab, b.bundle_dir) for b in db.scalars(select(Bundle))),
        "classes": sorted(
            (k.slug, k.title, k.term, k.invite_code, k.open_registration) for k in db.scalars(select(CourseClass))
        ),
        "members": sorted(
            (m.klass.slug, m.user_id, m.role, m.via, m.left_at is None) for m in db.scalars(select(ClassMember))
        ),
        "assignments": sorted((g.class_id, g.user_id, g.lesson_id) for g in db.scalars(select(GraderAssignment))),
    }


@pytest.mark.both_backends
def test_answers_runs_and_uploads_come_back_in_a_fresh_deployment(client, db, settings, db_url, tmp_path, request):
    client.register("ann@example.org")
    ann = users.get_by_email(db, email="ann@example.org")
    lesson, version, _ = lesson_service.current(db, lesson_id="planning-at-scale")
    said = answering.answer_question(db, user=ann, lesson=lesson, current_version=version, question_id="defend-plan",
                                     version=version, answer=WRITTEN, seed=-1)  # fmt: skip
    assert said.error is None
    # a run, stored as a worker stores one: claimed, its output unpacked under jobs/, finished
    job = jobs.create_job(db, owner=ann, lab="fp8-step", params=labruns.TINY["fp8-step"], host=client.client.app.
                          state.host, backend="cpu")  # fmt: skip
    assert jobs.claim(db, job_id=job.id, worker_id="worker-1", lease_s=30) is not None
    rel = f"jobs/{job.id}/attempt-1"
    result = bundles.unpack(_zip("fp8-step"), settings.data_dir / rel)
    assert jobs.finish(db, job_id=job.id, worker_id="worker-1", ok=True, result=result, bundle_dir=rel)
    r = client.client.post("/api/v1/bundles", files={"bundle": ("env.zip", _zip("env-check"), "application/zip")},
                           headers={"X-CSRF-Token": client.api_token()})  # fmt: skip
    assert r.status_code == 201, r.text
    upload = r.json()["id"]
    # a second class, which Ann joined by its invite, taught by Ivy, who also grades a lesson there
    fall = class_registry.create(db, slug="gpu-fall", title="GPU Systems", term="Fall 2026")
    class_registry.enrol(db, klass=fall, user_id=ann.id, role="learner", via="invite")
    ivy = users.create_user(db, email="ivy@example.org", password="correct horse", display_name="Ivy")
    class_registry.enrol(db, klass=fall, user_id=ivy.id, role="instructor", via="admin")
    assert grading.assign(db, klass=fall, grader=ivy, lesson_id="planning-at-scale")
    db.expire_all()
    before = _kept(db)
    assert before["responses"] and before["attempts"] and len(before["jobs"]) == 1 and len(before["bundles"]) == 1
    assert [c[0] for c in before["classes"]] == ["default", "gpu-fall"] and len(before["members"]) == 3

    saved = tmp_path / "backup"
    out = _app(["backup", str(saved)], settings.data_dir, db_url)
    assert out.returncode == 0, out.stderr
    assert "backed up" in out.stdout and "1 jobs, 1 uploads" in out.stdout
    assert {p.name for p in saved.iterdir()} >= {"backup.json", "data.tar.gz"}
    assert saved.stat().st_mode & 0o777 == 0o700  # password hashes inside: the course's own user only
    rows = json.loads((saved / "backup.json").read_text())["rows"]
    assert (rows["classes"], rows["class_members"], rows["grader_assignments"]) == (2, 3, 1)

    new_data = tmp_path / "new-data"
    if db_url.startswith("sqlite"):
        new_url = f"sqlite:///{tmp_path / 'new.db'}"
    else:
        new_url = _new_pg_database(request.getfixturevalue("postgres_server"))  # `createdb`: empty
    out = _app(["restore", str(saved)], new_data, new_url)
    assert out.returncode == 0, out.stderr
    assert "2 classes, 2 users, 1 answers, 1 jobs, 1 uploads, and 2 result and upload folders" in out.stdout, out.stdout
    again = _app(["restore", str(saved)], new_data, new_url)  # never over a deployment that has data
    assert again.returncode == 1 and "already has tables" in again.stderr, again.stderr

    fresh = replace(settings, database_url=new_url, data_dir=new_data)
    with TestClient(create_app(fresh)) as tc:
        c = Browserless(tc)
        assert c.login("ann@example.org").status_code == 303  # her password came back with her
        page = c.get(f"/jobs/{job.id}")
        assert page.status_code == 200 and 'data-status="succeeded"' in page.text
        art = c.get(f"/jobs/{job.id}/artifacts/result.json")
        assert art.status_code == 200 and art.json()["lab"] == "fp8-step"
        assert c.get(f"/api/v1/bundles/{upload}").json()["lab"] == "env-check"
        assert c.get(f"/bundles/{upload}/artifacts/result.json").status_code == 200
        assert {k["slug"]: k["role"] for k in c.get("/api/v1/me").json()["classes"]} == {
            "default": "learner",
            "gpu-fall": "learner",
        }
        teacher = Browserless(tc)
        assert teacher.login("ivy@example.org").status_code == 303
        roster = teacher.get("/classes/gpu-fall/roster")
        assert roster.status_code == 200 and "ann@example.org" in roster.text
        from app.core.db import make_engine, make_sessionmaker

        engine = make_engine(new_url)
        with make_sessionmaker(engine)() as restored:
            assert _kept(restored) == before
        engine.dispose()
