"""Lab bundles for the report and grading tests: committed golden runs, and real runs for other parameters.

`bundle(lab)` is the golden bundle in the lab's folder (labs/<lab>/golden): what `python -m labs run LAB` wrote with
the lab's tiny parameters (its spec's `tiny`, here as TINY[lab]). `python -m tests.app.labruns [LAB ...]` writes them
again; tests/app/test_golden_bundles.py fails when a lab's output no longer has a golden bundle's shape.
`run(lab, params_json)` runs a lab for other parameters.
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

from labs import catalog

ROOT = Path(__file__).resolve().parents[2]

# The labs' smallest runs that still exercise every field the checks read (LabSpec.tiny: two TP degrees and two
# ranks, a few FP8 steps), by lab in catalog order.
TINY = {name: dict(spec.tiny) for name, spec in catalog.LABS.items()}


def golden_dir(lab: str) -> Path:
    """Where the lab's golden bundle is committed: golden/ in the lab's folder (labs/<lab>/golden)."""
    return catalog.folder(lab) / "golden"


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
    """The committed run of `lab` with its TINY parameters (do not modify it)."""
    return golden_dir(lab)


def result(lab: str) -> dict:
    return json.loads((bundle(lab) / "result.json").read_text())


def copy_to(lab: str, dest: Path) -> Path:
    shutil.copytree(bundle(lab), dest)
    return dest


def write_golden(labs: list[str]) -> None:
    """Run each of `labs` (every lab when empty) with its TINY parameters and keep the bundles as its golden/."""
    for lab in labs or list(TINY):
        shutil.rmtree(golden_dir(lab), ignore_errors=True)
        shutil.copytree(run(lab, json.dumps(TINY[lab])), golden_dir(lab))
        print(f"wrote {golden_dir(lab)}")


if __name__ == "__main__":
    write_golden(sys.argv[1:])
