"""Real lab bundles for the report and grading tests, made once per test process by `python -m labs run`.

The parameters are the smallest that still exercise every field the checks read (two TP degrees and
two ranks, a few FP8 steps), so the four runs take about half a minute on two cores.
"""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

from tests.conftest import ROOT

TINY = {
    "env-check": {},
    "fp8-step": {"steps": 4, "batch": 2, "seq": 8, "d_model": 16, "n_heads": 2, "ffn": 32, "n_layers": 1},
    "tp-sweep": {"degrees": [1, 2], "tokens": 16, "hidden": 32, "ffn": 64, "steps": 1, "warmup": 0},
    "overlap-trace": {"ranks": 2, "tokens": 16, "hidden": 32, "ffn": 64, "window_out": 64, "steps": 1, "warmup": 0},
}


@cache
def run(lab: str, params_json: str) -> Path:
    """A folder holding result.json and artifacts of a real CPU run of `lab` with these parameters (JSON text,
    so runs are cached per lab and parameters; do not modify it)."""
    out = Path(tempfile.mkdtemp(prefix=f"labrun-{lab}-")) / "out"
    atexit.register(shutil.rmtree, out.parent, True)  # kept for the whole test run, then gone
    proc = subprocess.run(
        [sys.executable, "-m", "labs", "run", lab, "--params", params_json, "--out", str(out), "--backend", "cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def bundle(lab: str) -> Path:
    """The run of `lab` with its TINY parameters."""
    return run(lab, json.dumps(TINY[lab]))


def result(lab: str) -> dict:
    return json.loads((bundle(lab) / "result.json").read_text())


def copy_to(lab: str, dest: Path) -> Path:
    shutil.copytree(bundle(lab), dest)
    return dest
