#!/usr/bin/env bash
# Development-time: download, for the GPU box's Python, every wheel scripts/gpu-check.sh needs beside torch
# (scripts/gpu-check-requirements.txt with all its dependencies, and scripts/gpu-check-nodeps.txt) into .whl/,
# so the check runs on a CUDA machine that has only torch and no network (the lent H200: Python 3.12):
#   scripts/gpu-wheels.sh 3.12          # then carry .whl to the device (git ignores it)
#   scripts/gpu-wheels.sh 3.11 2.36     # a second argument: the newest glibc (manylinux_2_N) the box has
# Environment: PYTHON (the interpreter whose pip downloads; default python3), WHL_DIR (default .whl).
set -euo pipefail
cd "$(dirname "$0")/.."
py_version=${1:?usage: scripts/gpu-wheels.sh PYTHON_VERSION [GLIBC], e.g. scripts/gpu-wheels.sh 3.12}
glibc=${2:-2.28}
[[ "$py_version" =~ ^3\.[0-9]+$ ]] || { echo "gpu-wheels: PYTHON_VERSION: got '$py_version', expected e.g. 3.12" >&2; exit 2; }
[[ "$glibc" =~ ^2\.[0-9]+$ ]] || { echo "gpu-wheels: GLIBC: got '$glibc', expected e.g. 2.28" >&2; exit 2; }
PY=${PYTHON:-python3}
dir=${WHL_DIR:-.whl}
abi="cp${py_version/./}"

# pip matches platform tags exactly: offer every manylinux tag this glibc can load.
plats=(--platform manylinux1_x86_64 --platform manylinux2010_x86_64 --platform manylinux2014_x86_64)
for ((n = 5; n <= ${glibc#2.}; n++)); do plats+=(--platform "manylinux_2_${n}_x86_64"); done
target=(--only-binary=:all: --python-version "$py_version" --implementation cp --abi "$abi" --abi abi3 --abi none "${plats[@]}")

rm -rf "$dir"
mkdir -p "$dir"
"$PY" -m pip download -q --disable-pip-version-check "${target[@]}" -d "$dir" -r scripts/gpu-check-requirements.txt
"$PY" -m pip download -q --disable-pip-version-check --no-deps "${target[@]}" -d "$dir" -r scripts/gpu-check-nodeps.txt

# Every wheel pip fetched must be pinned in the lists: a dependency resolved on its own would make the
# carried set depend on the day it was downloaded.
norm() { tr '[:upper:]' '[:lower:]' | tr '_.' '--'; }
pinned=$(grep -hE '^[A-Za-z0-9]' scripts/gpu-check-requirements.txt scripts/gpu-check-nodeps.txt | sed 's/ *#.*//' | norm | sort -u)
missing=0
for whl in "$dir"/*.whl; do
  base=$(basename "$whl")
  name=$(echo "${base%%-*}" | norm)
  version=$(echo "$base" | cut -d- -f2 | norm)
  if ! grep -qx "${name}==${version}" <<<"$pinned"; then
    echo "gpu-wheels: $base is not pinned in scripts/gpu-check-requirements.txt (pin ${name}==${version})" >&2
    missing=1
  fi
done
[ "$missing" = 0 ] || exit 1
grep -qx '/.whl/' .gitignore 2>/dev/null || grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
echo "gpu-wheels: $(ls "$dir"/*.whl | wc -l) wheels for Python $py_version (glibc <= $glibc) in $dir, $(du -sh "$dir" | cut -f1)"
