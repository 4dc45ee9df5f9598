#!/usr/bin/env bash
# One prepared GPU check, for a machine with a CUDA GPU (e.g. the lent H200), run from the repo root:
#   bash scripts/gpu-check.sh [OUT_DIR]
# Installs carried wheels from .whl/ (see scripts/gpu-wheels.sh) into /tmp/site when present, then runs
# the `gpu`-marked lab tests and the GPU benchmarks, keeping every log under OUT_DIR. The app's
# conftest (database fixtures) is not needed for these tests, so pytest runs with --noconftest.
set -uo pipefail
out=${1:-${OUT:-gpu-check-out}}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
nvidia-smi -L > "$out/nvidia-smi.txt" 2>&1
python3 -m labs probe > "$out/probe.json" 2> "$out/probe.err"
status=0
python3 -m pytest -q -p no:cacheprovider --noconftest -m gpu tests/labs 2>&1 | tee "$out/pytest-gpu.log" || status=1
timeout 300 python3 bench/fp8_step_gpu.py 2>&1 | tee "$out/bench-fp8.log" || status=1
timeout 300 python3 bench/tp_overlap_gpu.py 2>&1 | tee "$out/bench-tp.log" || status=1
echo "gpu-check finished with status $status; logs in $out"
exit $status
