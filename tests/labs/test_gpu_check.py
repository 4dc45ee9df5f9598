"""The prepared GPU check (scripts/gpu-check.sh). Cheap: what `--quick --plan` says it will run and skip, on this
machine and on an H200's probe with and without Transformer Engine. Slow: the dry run on this CPU machine from
nothing but torch, which proves no wheel is missing.

Exactly what a torch-only, offline CUDA box gets: a fresh virtual environment with torch==2.13.0 alone
(from the local wheel, not byte-compiled: ~5 s), the wheels scripts/gpu-wheels.sh downloads for this Python (PyPI, which CI
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


def _plan(tmp_path, probe: dict | None = None, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPU_CHECK_PROBE")}
    env |= {"PYTHON": sys.executable, "WHL_DIR": str(tmp_path / "no-wheels")}
    if probe is not None:
        (tmp_path / "probe.json").write_text(json.dumps(probe))
        env["GPU_CHECK_PROBE"] = str(tmp_path / "probe.json")
    return _run(["bash", "scripts/gpu-check.sh", *args, str(tmp_path / "out")], env, 120)


def _h200(te_version: str | None) -> dict:
    """`python -m labs probe` on one H200 (cc 9.0, CUDA 12.9), with or without Transformer Engine."""
    ok = {"supported": True, "reason": None}
    mx = {"supported": False, "reason": "Device compute capability 10.0 or higher required for MXFP8 execution."}
    return {
        "device": {"type": "cuda", "name": "NVIDIA H200", "compute_capability": "9.0", "count": 1},
        "versions": {"torch": "2.13.0", "cuda": "12.9", "transformer_engine": te_version, "nccl": "2.27.3"},
        "transformer_engine": {
            "available": te_version is not None,
            "reason": None if te_version else "Transformer Engine is not importable (ModuleNotFoundError: x)",
        },
        "fp8_recipes": {"delayed": ok, "current": ok, "block": ok, "mxfp8": mx},
    }


def test_the_quick_plan_says_up_front_that_te_is_missing_and_what_skips(tmp_path):
    check = _plan(tmp_path, None, "--quick", "--plan")
    assert check.returncode == 0, check.stdout + check.stderr
    said = check.stdout
    assert "gpu-check: Transformer Engine: does not import (ModuleNotFoundError" in said
    assert "GPU: none" in said and "fp8-step on te will run: no recipe" in said
    assert "will skip: TE's fused scale update against the emulation (no CUDA GPU)" in said
    assert "will skip: bench/tp_overlap_gpu.py" in said and "nothing was run" in said
    assert not (tmp_path / "out" / "pytest-gpu.log").exists()  # --plan runs nothing


def test_on_an_h200_with_te_each_supported_recipe_runs_and_mxfp8_must_be_refused(tmp_path):
    said = _plan(tmp_path, _h200("2.9.0"), "--quick", "--plan").stdout
    assert "Transformer Engine: imports (version 2.9.0)" in said
    assert "fp8-step on te will run: delayed, current, block" in said
    assert "fp8-step on te must refuse mxfp8 with exit 2: Device compute capability 10.0" in said
    assert "will skip: TE's" not in said and "will skip: the FP8 benchmark" not in said
    assert (
        "will skip: the two-rank checks (overlap-trace, tp-sweep TP=2 and up, and the collectives, zero-fsdp, "
        "pipeline and context-parallel runs on NCCL) (1 GPU visible, they need 2)" in said
    )
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["recipes_run"] == ["delayed", "current", "block"] and plan["recipes_refused"] == ["mxfp8"]


def test_on_a_torch_only_h200_every_te_check_is_named_as_skipped(tmp_path):
    said = _plan(tmp_path, _h200(None), "--quick", "--plan").stdout
    assert "Transformer Engine: does not import (Transformer Engine is not importable" in said
    assert "fp8-step on te will run: no recipe" in said and "must refuse" not in said
    for what in ("TE's fused scale update", "fp8-step on te, per recipe", "tp-sweep's TE block", "the FP8 benchmark"):
        assert f"will skip: {what}" in said


def test_a_wrong_option_or_a_borrowed_probe_without_plan_is_refused(tmp_path):
    wrong = _plan(tmp_path, None, "--fast")
    assert wrong.returncode == 2 and "unknown option '--fast' (allowed: --quick, --plan, --help)" in wrong.stderr
    borrowed = _plan(tmp_path, _h200("2.9.0"), "--quick")
    assert borrowed.returncode == 2 and "GPU_CHECK_PROBE" in borrowed.stderr and "--plan only" in borrowed.stderr


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
    # --no-compile: the same files a box's torch has; pip byte-compiles all of torch (9 s of its 14 s here), while
    # Python compiles only what the check imports, as it imports it (the test: 43 s -> 40 s).
    install = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile", "torch==2.13.0"]
    torch = _run(install, env, 900)
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
    assert "gpu-check: Transformer Engine: does not import" in check.stdout  # said before anything ran
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


def _fake_dist(site: Path, name: str, version: str, files: list[str]) -> None:
    """A wheel's install as pip --target leaves it: its files and a dist-info whose RECORD lists them."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    record = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in record))
    for f in files:
        (site / f).parent.mkdir(parents=True, exist_ok=True)
        (site / f).write_text("# carried\n")


def test_carried_numpy_steps_aside_for_the_box_s_own_and_what_the_box_lacks_stays(tmp_path):
    # This venv plays the box: it has numpy (the project's dependency) and no package called labcarried.
    site = tmp_path / "site"
    _fake_dist(site, "numpy", "0.0.1", ["numpy/__init__.py", "numpy/core/x.py", "bin/f2py"])
    _fake_dist(site, "labcarried", "1.0", ["labcarried/__init__.py", "bin/labtool"])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "scripts/gpu_check_prefer_image.py", str(site), "numpy", "labcarried", "pandas"]
    done = _run(cmd, env, 60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("numpy: this Python's own ") and "the carried 0.0.1 set aside" in lines[0]
    assert lines[1] == "labcarried: the carried 1.0 (this Python has none)" and lines[2] == "pandas: not carried"
    assert not (site / "numpy").exists() and not (site / "numpy-0.0.1.dist-info").exists()
    assert (site / "labcarried" / "__init__.py").exists() and (site / "bin" / "labtool").exists()
    assert not (site / "bin" / "f2py").exists()


def test_the_whole_quick_check_is_budgeted(tmp_path):
    # With no budget left, every bounded command (the plan among them) is skipped, not run past the limit.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPU_CHECK_PROBE")}
    env |= {"PYTHON": sys.executable, "WHL_DIR": str(tmp_path / "no-wheels"), "GPU_CHECK_BUDGET_S": "0"}
    done = _run(["bash", "scripts/gpu-check.sh", "--quick", str(tmp_path / "out")], env, 120)
    log = (tmp_path / "out" / "steps.log").read_text()
    assert "the 0 s budget of --quick is spent" in log
    assert "skipped gpu/hta tests" in log and "skipped timing loop and precision on this GPU" in log
    assert not (tmp_path / "out" / "pytest-gpu.log").exists() and (tmp_path / "out" / "probe.json").read_text() == ""
    assert "finished with status" in done.stdout
