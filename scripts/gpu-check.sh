#!/usr/bin/env bash
# The one prepared GPU check, for a CUDA machine that may have only torch and no network (the lent H200:
# one GPU, Python 3.12), run from the repository root:
#   scripts/gpu-wheels.sh 3.12          # here, once: the wheels it needs into .whl/ (carry .whl to the box)
#   bash scripts/gpu-check.sh [OUT_DIR]  # there
# It installs the carried wheels offline into a private folder (the box's own packages stay untouched),
# checks that the labs and their imports load, runs the `gpu`- and `hta`-marked lab tests and the GPU
# benchmarks, and keeps every log under OUT_DIR. Steps that need a GPU (or 2 GPUs, or Transformer Engine)
# skip with the reason and do not fail the check; anything that does not install or import fails it.
# tests/labs/test_gpu_check.py runs all of this on a CPU machine from a fresh torch-only venv.
# Environment: PYTHON (default python3), WHL_DIR (default .whl), GPU_CHECK_SITE (default /tmp/gpu-check-site).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
out=${1:-${OUT:-gpu-check-out}}
whl=${WHL_DIR:-.whl}
site=${GPU_CHECK_SITE:-/tmp/gpu-check-site}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
status=0
say() { echo "gpu-check: $*" | tee -a "$out/steps.log"; }
fail() { say "FAILED: $*"; status=1; }

if ls "$whl"/*.whl >/dev/null 2>&1; then
  rm -rf "$site"
  # --target installs every requirement from the carried wheels alone (pip ignores what the box has), so a
  # dependency missing from .whl/ stops the check here rather than on the first import.
  if ! "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$whl" --no-compile \
    --no-cache-dir --target "$site" -r scripts/gpu-check-requirements.txt >"$out/pip.log" 2>&1 \
    || ! "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$whl" --no-compile \
      --no-cache-dir --no-deps --target "$site" -r scripts/gpu-check-nodeps.txt >>"$out/pip.log" 2>&1; then
    fail "the carried wheels in $whl do not install offline (see $out/pip.log)"
    tail -5 "$out/pip.log"
    exit 1
  fi
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  say "installed $(ls "$whl"/*.whl | wc -l) carried wheels into $site"
else
  say "no wheels in $whl: using the packages $PY already has"
fi

"$PY" - >"$out/versions.txt" 2>&1 <<'PYEOF' || fail "an import the labs need is missing (see $out/versions.txt)"
import importlib, platform
print("python", platform.python_version())
for name in ("torch", "pydantic", "jsonschema", "pytest", "nvtx", "pandas", "plotly", "hta.trace_analysis"):
    mod = importlib.import_module(name)
    print(name, getattr(mod, "__version__", "(no __version__)"))
PYEOF
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -L >"$out/nvidia-smi.txt" 2>&1 || fail "nvidia-smi"
else
  say "skipped nvidia-smi: no NVIDIA driver on this machine"
fi
"$PY" -m labs probe >"$out/probe.json" 2>"$out/probe.err" || fail "python -m labs probe (see $out/probe.err)"
"$PY" -m labs check >"$out/labs-check.log" 2>&1 || fail "a lab runner does not import (see $out/labs-check.log)"
say "probe: $("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["backend"], "-", r["device"]["name"], "-", r["label"])' "$out/probe.json" 2>&1)"

# The tests need no database: --noconftest leaves out the app's fixtures.
"$PY" -m pytest -q -p no:cacheprovider --noconftest -m "gpu or hta" -rs tests/labs 2>&1 | tee "$out/pytest-gpu.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "gpu/hta tests (see $out/pytest-gpu.log)"
timeout 300 "$PY" bench/fp8_step_gpu.py 2>&1 | tee "$out/bench-fp8.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "bench/fp8_step_gpu.py"
timeout 420 "$PY" bench/tp_overlap_gpu.py --out "$out/tp-bundles" 2>&1 | tee "$out/bench-tp.log"
[ "${PIPESTATUS[0]}" = 0 ] || fail "bench/tp_overlap_gpu.py"
say "finished with status $status; logs in $out"
exit $status
