"""Run in a fresh interpreter by test_torch_free.py: create the app, render every HTML page as a role that may
see it, submit a job, and report what was rendered and whether torch was ever imported.

    python -m tests.app.torch_free DATA_DIR BUNDLE_DIR     (prints one JSON object)
"""

from __future__ import annotations

import io
import itertools
import json
import re
import sys
import zipfile
from pathlib import Path

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.config import Settings
from app.core.models import Bundle, Grade, LabReport
from app.services.accounts import resets, users
from app.services.classes import registry as class_registry
from app.services.grading import reports as report_service
from app.services.learning import lessons as lesson_service
from app.services.learning.tools import TOOLS
from app.web.factory import PAGE_ROUTERS, create_app
from labs import catalog
from tests.app.reporting import grade_form
from tests.conftest import Browserless, user_with_roles

LESSON = "transformer-scaling"
METRICS_TOKEN = "torch-free-metrics-token"


def _zip(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path in folder.rglob("*"):
            if path.is_file():
                zf.write(path, path.relative_to(folder).as_posix())
    return buf.getvalue()


def main(data_dir: str, bundle_dir: str) -> dict:
    settings = Settings.from_env(
        {"COURSE_ENV": "test", "COURSE_DATA_DIR": data_dir, "COURSE_METRICS_TOKEN": METRICS_TOKEN}, embedded_workers=0
    )
    app = create_app(settings)
    with TestClient(app) as tc_learner, TestClient(app) as tc_staff, TestClient(app) as tc_anon:
        learner, staff, anon = Browserless(tc_learner), Browserless(tc_staff), Browserless(tc_anon)
        assert learner.register("ann@example.org").status_code == 303
        with app.state.sessions() as db:
            user_with_roles(db, "prof@example.org", ["instructor", "grader"])
        assert staff.login("prof@example.org").status_code == 303

        # a job, submitted through the form as a learner does
        r = learner.post("/labs/env-check/jobs", {"backend": "auto"}, follow_redirects=False)
        assert r.status_code == 303, r.text[:2000]
        job_id = int(r.headers["location"].rsplit("/", 1)[1])
        # an upload attached to the report and submitted, so the report and grader pages have content
        files = {"bundle": ("env.zip", _zip(Path(bundle_dir)), "application/zip")}
        token = learner.csrf(f"/lessons/{LESSON}/report")
        r = learner.client.post(f"/lessons/{LESSON}/report/bundles", data={"csrf_token": token}, files=files)
        assert r.status_code == 200, r.text[:2000]
        with app.state.sessions() as db:
            bundle = db.scalars(select(Bundle)).one()
            cur = lesson_service.current(db, lesson_id=LESSON)
        assert cur is not None and cur.lesson.lab is not None
        slot = next(s for s in report_service.slots(cur.lesson) if s.lab == bundle.lab)
        # one item of four and no answers: handed in knowingly, confirming each gap the report page would list
        gaps = [g.field for g in report_service.gaps(cur.lesson, {"evidence": {slot.id: {"bundle": bundle.id}}})]
        r = learner.post(
            f"/lessons/{LESSON}/report",
            {"action": "submit-incomplete", f"evidence-{slot.id}": f"bundle:{bundle.id}", "missing-ok": gaps},
        )
        assert "Submitted as version 1" in r.text, r.text[:2000]
        with app.state.sessions() as db:
            report = db.scalars(select(LabReport)).one()
            # a reset link an instructor issued for someone else, so /reset/{token} renders its form
            other = user_with_roles(db, "bob@example.org", ["learner"])
            other_id = other.id
            staff_user = users.get_by_email(db, email="prof@example.org")
            invite_code = class_registry.by_slug(db, slug="default").invite_code
            _, reset_token = resets.issue(db, user=other, issued_by=staff_user, lifetime_s=3600)
        # graded, so the grade's notice link has a grade to open
        assert staff.post(f"/classes/default/grader/reports/{report.id}/claim").status_code == 200
        assert staff.post(f"/classes/default/grader/reports/{report.id}/grade", grade_form()).status_code == 200
        with app.state.sessions() as db:
            grade = db.scalars(select(Grade)).one()
            published = lesson_service.latest_row(db, lesson_id=LESSON)
            assert published is not None
            draft_base, draft_text = published.version, published.files["lesson.yaml"]
        # a draft saved in the editor, so its preview pages have one to show
        r = staff.post(
            f"/instructor/lessons/{LESSON}/draft",
            {"path": "lesson.yaml", "base_version": str(draft_base), "text": draft_text + "\n"},
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text[:2000]

        values = {
            "lesson_id": [LESSON],
            "part_id": [p.id for p in cur.lesson.parts] + ["atlas", "lab", "references"],
            "lab": catalog.names(),
            "job_id": [job_id],
            "bundle_id": [bundle.id],
            "report_id": [report.id],
            "number": [1],
            "slot_id": [slot.id],
            "name": ["result.json"],
            "tool": list(TOOLS),
            "token": [reset_token],
            "grade_id": [grade.id],
            "token_id": [1],  # GET of the revoke form's address only leads back to /account
            "version": [1],
            "user_id": [other_id],  # an instructor's page of one learner
            "slug": ["default"],  # the class every account of this walk is in
            "code": [invite_code],
        }
        # where a route takes fewer values than its parameter's name does elsewhere: a draft's preview shows only
        # its parts, not the published lesson's atlas, lab and references pages
        values_at = {"/instructor/lessons/{lesson_id}/draft/preview/{part_id}": {"part_id": values["part_id"][:-3]}}

        rendered: list[str] = []
        skipped: list[str] = []
        for route in (r for router in PAGE_ROUTERS for r in router.routes):
            if not isinstance(route, APIRoute) or "GET" not in route.methods:
                continue
            if route.endpoint.__module__ == "app.web.routes.artifacts":  # files, not pages (the job has not run)
                continue
            names = re.findall(r"{(\w+)}", route.path)
            if any(n not in values for n in names):
                skipped.append(route.path)
                continue
            chosen = values | values_at.get(route.path, {})
            for combo in itertools.product(*(chosen[n] for n in names)):
                path = route.path
                for n, v in zip(names, combo):
                    path = path.replace("{" + n + "}", str(v))
                served = []
                for who, client in (("anonymous", anon), ("learner", learner), ("staff", staff)):
                    # the Prometheus scrape answers whoever carries its token, whatever their session
                    auth = {"Authorization": f"Bearer {METRICS_TOKEN}"} if path == "/metrics" else {}
                    r = client.get(path, follow_redirects=False, headers=auth)
                    if r.status_code == 200:
                        kind = "page" if r.headers["content-type"].startswith("text/html") else "file"
                        served.append(f"{kind} {who} {path}")
                    elif r.status_code == 204 and who != "anonymous":  # /notices: nothing new to swap in
                        served.append(f"empty {who} {path}")
                    elif r.status_code == 303 and who != "anonymous":  # e.g. /lessons/{id} resumes at a part
                        served.append(f"redirect {who} {path}")
                assert served, f"{path}: no role got a page ({r.status_code}: {r.text[:300]})"
                rendered += served
    return {"rendered": rendered, "skipped": skipped, "torch": "torch" in sys.modules}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
