"""Run in a fresh interpreter by test_add_a_lab.py, with COURSE_LAB_PATH naming the folder that holds the new lab
`squares`: write its golden bundle with its tiny run, then see it where a learner, the API and a grader see a lab.

    COURSE_LAB_PATH=DIR python -m tests.app.add_a_lab DATA_DIR     (prints one JSON object)
"""

from __future__ import annotations

import html
import json
import sys

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.config import Settings
from app.core.models import Job
from app.web.factory import create_app
from labs import api, catalog
from tests.app import labruns
from tests.conftest import Browserless

LAB = "squares"


def main(data_dir: str) -> dict:
    seen: dict = {"names": catalog.names(), "folder": str(catalog.folder(LAB))}

    # its golden bundle: `python -m labs run squares` with its tiny params, kept in its folder
    labruns.write_golden([LAB])
    bundle = labruns.bundle(LAB)
    result = json.loads((bundle / "result.json").read_text())
    seen["result"] = result

    settings = Settings.from_env({"COURSE_ENV": "test", "COURSE_DATA_DIR": data_dir}, embedded_workers=0)
    app = create_app(settings)
    with TestClient(app) as tc:
        learner = Browserless(tc)
        assert learner.register("ann@example.org").status_code == 303
        listed = learner.get("/api/v1/labs").json()
        seen["api"] = [lab["name"] for lab in listed]
        seen["api_params"] = list(next(lab for lab in listed if lab["name"] == LAB)["params_schema"]["properties"])
        page = learner.get(f"/labs/{LAB}")
        text = html.unescape(page.text)
        seen["form"] = {
            "status": page.status_code,
            "title": catalog.get(LAB).title in text,
            "field": 'name="n"' in text and "Squares to add" in text,
        }
        r = learner.post(f"/labs/{LAB}/jobs", {"n": "7", "backend": "auto"}, follow_redirects=False)
        with app.state.sessions() as db:
            job = db.scalars(select(Job)).one()
            seen["submitted"] = {"status": r.status_code, "lab": job.lab, "params": job.params}

    def read(name: str) -> bytes:
        a = next(a for a in result["artifacts"] if a["name"] == name)
        return (bundle / a["path"]).read_bytes()

    source = api.checks.Source("bundle", 1, result, root=bundle, read_artifact=read)
    seen["checks"] = api.checks.check_item(slot_kind="evidence", lab=LAB, source=source)
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), default=str))
