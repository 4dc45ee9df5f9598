"""Lab bundles for the report and grading tests: committed golden runs, and real runs for other parameters.

`bundle(lab)` is tests/golden/LAB: what `python -m labs run LAB` wrote with the TINY parameters below (the
smallest that still exercise every field the checks read: two TP degrees and two ranks, a few FP8 steps).
`python -m tests.app.labruns` writes them again; tests/app/test_golden_bundles.py fails when a lab's output
no longer has a golden bundle's shape. `run(lab, params_json)` runs a lab for other parameters.
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

GOLDEN = ROOT / "tests" / "golden"

TINY = {
    "env-check": {},
    "fp8-step": {"steps": 4, "batch": 2, "seq": 8, "d_model": 16, "n_heads": 2, "ffn": 32, "n_layers": 1},
    "tp-sweep": {"degrees": [1, 2], "tokens": 16, "hidden": 32, "ffn": 64, "steps": 1, "warmup": 0},
    "overlap-trace": {"ranks": 2, "tokens": 16, "hidden": 32, "ffn": 64, "window_out": 64, "steps": 1, "warmup": 0},
    "collectives": {
        "ranks": 4,
        "nodes": 2,
        "collectives": ["all-reduce", "all-gather"],
        "min_bytes": 256,
        "max_bytes": 65536,
        "factor": 16,
        "iters": 3,
        "warmup": 1,
        "link_mbit": 20.0,
    },
    "zero-fsdp": {
        "ranks": 2,
        "layers": 1,
        "hidden": 16,
        "heads": 2,
        "vocab": 16,
        "seq": 8,
        "batch": 1,
        "steps": 1,
        "warmup": 1,
    },
    "context-parallel": {"ranks": 2, "seq_len": 32, "heads": 2, "head_dim": 8, "steps": 1, "warmup": 0},
    "pipeline": {
        "ranks": 2,
        "microbatches": 2,
        "layers": 4,
        "width": 16,
        "microbatch_rows": 4,
        "steps": 1,
        "warmup": 0,
    },
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
    """The committed run of `lab` with its TINY parameters (do not modify it)."""
    return GOLDEN / lab


def result(lab: str) -> dict:
    return json.loads((bundle(lab) / "result.json").read_text())


def copy_to(lab: str, dest: Path) -> Path:
    shutil.copytree(bundle(lab), dest)
    return dest


def write_golden() -> None:
    """Run every lab with its TINY parameters and keep the bundles as tests/golden/LAB."""
    for lab, params in TINY.items():
        shutil.rmtree(GOLDEN / lab, ignore_errors=True)
        shutil.copytree(run(lab, json.dumps(params)), GOLDEN / lab)
        print(f"wrote {GOLDEN / lab}")


if __name__ == "__main__":
    write_golden()
