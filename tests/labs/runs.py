"""Real lab runs shared by tests/labs: each (lab, params) runs once per test session (once across its
pytest-xdist workers too), through the command line the worker uses, with the peak memory of its whole process
tree measured (labs.memwatch)."""

from __future__ import annotations

import atexit
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from labs import catalog
from labs.memwatch import Measured, run_measured

ROOT = Path(__file__).resolve().parents[2]


def _shared_dir() -> Path:
    """Where this session's runs live. Under pytest-xdist every worker of one session sees the same folder (named
    by PYTEST_XDIST_TESTRUNUID), so a run one worker made is read, not repeated, by the other; workers finish at
    different times, so that folder is left behind and swept by a later session once it is a day old."""
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not uid:
        tmp = Path(tempfile.mkdtemp(prefix="labs-test-runs-"))
        atexit.register(shutil.rmtree, tmp, True)
        return tmp
    base = Path(tempfile.gettempdir())
    for old in base.glob("labs-test-runs-x-*"):
        try:
            if time.time() - old.stat().st_mtime > 24 * 3600:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    tmp = base / f"labs-test-runs-x-{uid}"
    tmp.mkdir(exist_ok=True)
    return tmp


_TMP = _shared_dir()

# Each lab's small run (LabSpec.small, else its tiny one): seconds on a shared 2-core machine, every code path.
SMALL = {name: dict(spec.tiny if spec.small is None else spec.small) for name, spec in catalog.LABS.items()}


# A host with little memory gets a small default per-job budget (a quarter of it); these runs are sized to
# finish quickly, not to test that budget (tests/labs/test_resources.py does, through spec.problems).
ENV = os.environ | {"COURSE_JOB_MEMORY_MB": "16384"}


@dataclass(frozen=True)
class LabRun:
    lab: str
    params: dict
    out: Path
    measured: Measured

    @property
    def result(self) -> dict:
        return json.loads((self.out / "result.json").read_text())


@cache
def _run(lab: str, params_json: str, backend: str = "cpu") -> LabRun:
    key = hashlib.sha256(f"{lab} {params_json} {backend}".encode()).hexdigest()[:16]
    out, done = _TMP / f"{lab}-{key}", _TMP / f"{lab}-{key}.measured.json"
    with open(_TMP / f"{lab}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits for a run in progress, then reads it
        if done.exists():
            return LabRun(lab, json.loads(params_json), out, Measured(**json.loads(done.read_text())))
        shutil.rmtree(out, ignore_errors=True)  # a run that failed or was killed part way
        out.mkdir()
        argv = [
            sys.executable,
            "-m",
            "labs",
            "run",
            lab,
            "--params",
            params_json,
            "--out",
            str(out),
            "--backend",
            "cpu",
        ]
        measured = run_measured(argv, cwd=ROOT, env=ENV, timeout_s=600)
        assert measured.returncode == 0, f"{lab} {params_json} failed:\n{measured.stderr[-3000:]}"
        done.write_text(json.dumps(dataclasses.asdict(measured)))
        return LabRun(lab, json.loads(params_json), out, measured)


def run(lab: str, params: dict | None = None, *, backend: str = "cpu") -> LabRun:
    """The lab run with `params` (default: SMALL[lab]) on `backend` (the GPU check's tests pass torch-cuda), run at
    most once per session."""
    return _run(lab, json.dumps(SMALL[lab] if params is None else params, sort_keys=True), backend)


def golden(lab: str) -> Path:
    """The lab's committed golden bundle (labs/<lab>/golden: its tiny run, which tests/app/labruns.py writes); do
    not modify it. Here, not only in tests/app, because the GPU check collects tests/labs without the app."""
    return catalog.folder(lab) / "golden"


def golden_result(lab: str) -> dict:
    return json.loads((golden(lab) / "result.json").read_text())
