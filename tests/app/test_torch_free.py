"""The web tier never imports torch: not at import, not while rendering any page or submitting a job.

torch is what the labs need; the web processes only read the torch-free catalog (labs/catalog.py) and
ask `python -m labs check|probe` about the host in subprocesses.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.app import labruns
from tests.conftest import ROOT


def test_importing_the_app_imports_no_torch():
    code = "import app.web.factory, sys; assert 'torch' not in sys.modules, 'torch was imported'"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_every_page_and_a_job_submission_import_no_torch(tmp_path):
    bundle = labruns.bundle("env-check")  # made by `python -m labs run` in its own process
    out = subprocess.run(
        [sys.executable, "-m", "tests.app.torch_free", str(tmp_path / "data"), str(bundle)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["skipped"] == []  # every GET route had its path parameters filled
    pages = [r for r in report["rendered"] if r.startswith("page ")]
    for expected in (
        "page anonymous /login",
        "page learner /",
        "page learner /lessons/transformer-scaling/deep-dives",
        "page learner /labs/tp-sweep",
        "page learner /lessons/transformer-scaling/report",
        "page staff /classes/default/grader",
        "page staff /classes/default/roster",
        "page staff /instructor/lessons/transformer-scaling/edit",
        "page staff /instructor/lessons/transformer-scaling/draft/preview",
    ):
        assert any(p.startswith(expected) for p in pages), (expected, pages)
    assert report["torch"] is False, "a page or the job submission imported torch into the web process"
