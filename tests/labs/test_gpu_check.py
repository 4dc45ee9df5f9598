"""The prepared GPU check, dry-run on this CPU machine from nothing but torch: proves no wheel is missing.

Exactly what a torch-only, offline CUDA box gets: a fresh virtual environment with torch==2.13.0 alone
(from the local wheel; ~70 s), the wheels scripts/gpu-wheels.sh downloads for this Python (PyPI, which CI
reaches), then scripts/gpu-check.sh, which installs them with --no-index and runs to the end with every GPU
step skipping for a stated reason. The HTA-marked test runs for real there (HTA is among the wheels).
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], env: dict, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _glibc() -> str:
    libc, version = platform.libc_ver()
    return version if libc == "glibc" and version else "2.28"


@pytest.mark.slow
def test_gpu_check_runs_to_the_end_from_a_fresh_torch_only_venv(tmp_path):
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    base = getattr(sys, "_base_executable", sys.executable)
    assert _run([base, "-m", "venv", str(venv)], env, 120).returncode == 0
    py = str(venv / "bin" / "python")
    torch = _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "torch==2.13.0"], env, 900)
    assert torch.returncode == 0, torch.stderr[-2000:]

    env |= {"PYTHON": py, "WHL_DIR": str(tmp_path / "whl"), "GPU_CHECK_SITE": str(tmp_path / "site")}
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    wheels = _run(["bash", "scripts/gpu-wheels.sh", version, _glibc()], env, 900)
    assert wheels.returncode == 0, wheels.stderr[-2000:]
    assert "wheels for Python" in wheels.stdout

    out = tmp_path / "out"
    check = _run(["bash", "scripts/gpu-check.sh", str(out)], env, 1500)
    log = check.stdout + check.stderr
    assert check.returncode == 0, log[-4000:]
    assert "gpu-check: finished with status 0" in check.stdout
    assert "installed" in (out / "steps.log").read_text()  # the carried wheels, not this venv's packages
    versions = (out / "versions.txt").read_text()
    assert "hta.trace_analysis" in versions and "nvtx" in versions and "jsonschema" in versions
    probe = json.loads((out / "probe.json").read_text())
    assert probe["device"]["type"] == "cpu" and probe["backend"] == "cpu"
    # Every GPU step skipped, saying why; the HTA cross-check on a Kineto-shaped trace ran and passed.
    pytest_log = (out / "pytest-gpu.log").read_text()
    summary = pytest_log.strip().splitlines()[-1]
    assert re.search(r"\b[1-9]\d* passed", summary) and "failed" not in summary and "error" not in summary, summary
    skipped = [line for line in pytest_log.splitlines() if line.startswith("SKIPPED")]
    assert skipped and not any("test_kernels.py" in line for line in skipped)  # HTA itself ran
    assert all("GPU" in line or "Transformer Engine" in line for line in skipped)  # each skip says why
    assert "skipped: no CUDA GPU" in (out / "bench-fp8.log").read_text()
    assert "skipped: no CUDA GPU" in (out / "bench-tp.log").read_text()
