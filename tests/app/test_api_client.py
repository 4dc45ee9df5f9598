"""A Python client generated from /api/v1/openapi.json by openapi-python-client (offline, from the served document)
submits a job with a personal API token against a real server, and reads its status and result.

The server is `python -m app serve` (tests/app/live.py) on the test's database and data folder; the test's worker
runs the job, as in tests/app/test_tokens.py.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.app.labruns import TINY
from tests.app.live import course_server

PACKAGE = "parallel_horizons_client"


def _token(client) -> str:
    r = client.post("/account/tokens", {"name": "generated client"})
    assert r.status_code == 200
    return re.search(r'id="new-token" class="token">([^<]+)<', r.text).group(1)


def _generate(document: dict, where: Path) -> Path:
    """Run the generator on `document`; fail on any warning (a part of the API it could not express)."""
    spec = where / "openapi.json"
    spec.write_text(json.dumps(document), encoding="utf-8")
    config = where / "generator.json"
    # post_hooks: none, so the generator runs no formatter (ruff) over its output: the test needs only its imports
    config.write_text(json.dumps({"package_name_override": PACKAGE, "post_hooks": []}), encoding="utf-8")
    out = where / "generated" / PACKAGE
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(spec),
            "--config",
            str(config),
            "--meta",
            "none",
            "--output-path",
            str(out),
            "--fail-on-warning",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return out.parent


@pytest.fixture
def generated(tmp_path) -> Iterator[Callable[[dict], dict[str, ModuleType]]]:
    """An import function for the generated package's modules; the package leaves sys.modules afterwards."""
    roots: list[str] = []

    def load(document: dict) -> dict[str, ModuleType]:
        root = str(_generate(document, tmp_path))
        sys.path.insert(0, root)
        roots.append(root)
        names = ["", ".api.jobs.submit_job", ".api.jobs.get_job", ".api.jobs.get_job_result", ".api.jobs.cancel_job"]
        return {name.rsplit(".", 1)[-1] or "client": importlib.import_module(PACKAGE + name) for name in names} | {
            "models": importlib.import_module(PACKAGE + ".models")
        }

    yield load
    for root in roots:
        sys.path.remove(root)
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def test_a_generated_client_submits_a_job_and_reads_its_result(client, worker, db_url, tmp_path, generated):
    client.register("ann@example.org")
    token = _token(client)
    with course_server(tmp_path, db_url) as live:
        with urllib.request.urlopen(live.base + "/api/v1/openapi.json", timeout=30) as r:
            document = json.load(r)
        ph = generated(document)
        models = ph["models"]
        with ph["client"].AuthenticatedClient(base_url=live.base, token=token, raise_on_unexpected_status=True) as api:
            job = ph["submit_job"].sync(client=api, body=models.EnvCheckJob(lab="env-check"))
            assert isinstance(job, models.JobOut) and (job.lab, job.status) == ("env-check", "queued")
            assert worker.run_once()
            status = ph["get_job"].sync(client=api, job_id=job.id)
            assert status.status == "succeeded" and "CPU emulation" in status.label
            assert status.result_url == f"/api/v1/jobs/{job.id}/result"
            result = ph["get_job_result"].sync(client=api, job_id=job.id).to_dict()
            assert result["lab"] == "env-check" and result["environment"]["backend"] == "cpu"

            # A lab's parameters are typed: the model the generator made from the lab's own params model.
            params = models.Fp8StepParams.from_dict(TINY["fp8-step"])
            body = models.Fp8StepJob(lab="fp8-step", params=params, backend=models.Fp8StepJobBackend.CPU)
            queued = ph["submit_job"].sync(client=api, body=body)
            assert queued.params.to_dict() | TINY["fp8-step"] == queued.params.to_dict()
            assert ph["cancel_job"].sync(client=api, job_id=queued.id).status == "cancelled"

            # A bad parameter is still the server's 422 naming it (the generated models check no bounds).
            body = models.Fp8StepJob(lab="fp8-step", params=models.Fp8StepParams.from_dict({"steps": 0}))
            refused = ph["submit_job"].sync(client=api, body=body)
            assert isinstance(refused, models.Refusal) and refused.errors[0].field == "steps"
