"""Finished lab jobs planted in the live server's database, holding real `python -m labs run` output.

The live server's embedded worker would race a test for a queued job, so a planted job is written
already finished (as the worker leaves one: status, result, bundle folder, times) instead of being
claimed. The bundles are real runs of the labs with small parameters, made once per test process.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

from app.core.config import Settings
from app.core.db import make_engine, make_sessionmaker
from app.core.models import Job, JobLoss, User, utcnow
from app.services.accounts import users
from tests.app import labruns
from tests.conftest import user_with_roles


def bundle(lab: str, params_json: str) -> Path:
    """A folder with result.json and artifacts of a real CPU run (shared with tests/app's runs of the same)."""
    return labruns.bundle(lab) if json.loads(params_json) == labruns.TINY[lab] else labruns.run(lab, params_json)


class Seeder:
    """Writes users and finished jobs straight into the database of a live server's data dir."""

    def __init__(self, data_dir: Path):
        self.settings = Settings.from_env({"COURSE_ENV": "test", "COURSE_DATA_DIR": str(data_dir)})
        self.engine = make_engine(self.settings.db_url)
        self.sessions = make_sessionmaker(self.engine)

    def user(self, email: str, roles=("learner",), name: str = "") -> int:
        with self.sessions() as db:
            found = users.get_by_email(db, email=email)
            if found is not None:
                return found.id
            return user_with_roles(db, email, roles, name=name).id

    def job(self, owner_id: int, lab: str, params: dict | None = None, *, seconds: float = 20.0) -> int:
        """A succeeded job of `lab` run with `params` (TINY by default) that took `seconds`."""
        params = labruns.TINY[lab] if params is None else params
        src = bundle(lab, json.dumps(params, sort_keys=True))
        result = json.loads((src / "result.json").read_text())
        with self.sessions() as db:
            finished = utcnow()
            job = Job(
                owner_id=owner_id,
                lab=lab,
                params=result["params"],
                backend="cpu",
                queue="cpu",
                status="succeeded",
                progress=1.0,
                message="finished",
                attempts=1,
                created_at=finished - timedelta(seconds=seconds + 2),
                started_at=finished - timedelta(seconds=seconds),
                finished_at=finished,
                result=result,
            )
            db.add(job)
            db.commit()
            rel = f"jobs/{job.id}/attempt-1"
            shutil.copytree(src, self.settings.data_dir / rel)
            job.bundle_dir = rel
            db.commit()
            return job.id

    def failed_job(self, owner_id: int, lab: str, error: str) -> int:
        with self.sessions() as db:
            now = utcnow()
            job = Job(
                owner_id=owner_id,
                lab=lab,
                params=labruns.TINY[lab],
                backend="cpu",
                queue="cpu",
                status="failed",
                message="failed",
                attempts=1,
                error=error,
                created_at=now - timedelta(seconds=5),
                started_at=now - timedelta(seconds=4),
                finished_at=now,
            )
            db.add(job)
            db.commit()
            return job.id

    def loss(self, job_id: int, reason: str, *, node: str = "gpu-host-a") -> None:
        """A lost attempt of the job, as jobs.lost records one (the cluster page lists it)."""
        with self.sessions() as db:
            db.add(JobLoss(job_id=job_id, attempt=1, node=node, worker_id=None, reason=reason, outcome="queued"))
            db.commit()

    def graded_report(self, owner_id: int, grader_id: int, lesson_id: str = "transformer-scaling") -> int:
        """Attach the owner's latest runs, answer, submit, and have the grader claim and grade it (16 / 20)."""
        from app.services.grading import grades as grading
        from app.services.grading import reports
        from app.services.learning import lessons as lesson_service
        from tests.app.reporting import LEVELS

        with self.sessions() as db:
            owner, grader = db.get(User, owner_id), db.get(User, grader_id)
            current = lesson_service.current(db, lesson_id=lesson_id)
            assert owner is not None and grader is not None and current is not None
            lesson = current.lesson
            report = reports.get_or_create(db, owner=owner, lesson_id=lesson_id)
            reports.attach_latest(db, report=report, owner=owner, lesson=lesson)
            # TINY fp8-step runs have no spike, which the numerics item asks for, so "Attach my latest runs" leaves it
            # empty: the learner picks their newest run from its menu, as the page lets them.
            newest = max(j.id for j in db.query(Job).filter_by(owner_id=owner_id, lab="fp8-step", status="succeeded"))
            reports.attach(
                db, report=report, owner=owner, lesson=lesson, slot_id="bf16-fp8-numerics", ref={"job": newest}
            )
            draft = dict(report.draft or {})
            evidence = {
                k: f"{'job' if 'job' in v else 'bundle'}:{v.get('job') or v.get('bundle')}"
                for k, v in draft.get("evidence", {}).items()
            }
            answers = {
                q.id: "The loss gap stays under 0.1%; the all-reduce outweighs tiny GEMMs."
                for q in lesson.lab.report_questions
            }
            reports.save_draft(db, report=report, owner=owner, lesson=lesson, evidence=evidence, answers=answers)
            version = reports.submit(
                db, settings=self.settings, report=report, lesson=lesson, lesson_version=current.version
            )
            grading.claim(db, report=report, grader=grader)
            grading.save_grade(
                db,
                report=report,
                version=version,
                grader=grader,
                base_revision=0,  # no grade yet
                levels=LEVELS,
                feedback="Clear numbers.\nRead your timeline again: where does rank 1 wait?",
                notes="grader only",
                rubric=lesson.rubric,
                rubric_version=current.version,
            )
            return report.id

    def user_id(self, email: str) -> int:
        with self.sessions() as db:
            return db.query(User).filter_by(email=email).one().id

    def close(self) -> None:
        self.engine.dispose()
