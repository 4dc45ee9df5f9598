#!/usr/bin/env bash
# Development-time: fetch the few pure-Python wheels the labs need that a bare CUDA image may lack
# (Python 3.12, manylinux x86-64) into .whl/, for scripts/gpu-check.sh on a GPU machine without network.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl pydantic pydantic-core annotated-types typing-inspection jsonschema jsonschema-specifications \
  referencing rpds-py
ls -1 .whl
