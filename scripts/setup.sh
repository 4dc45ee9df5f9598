#!/usr/bin/env bash
# Prepare this checkout: a virtual environment with the project installed.
#   scripts/setup.sh          what `make run` needs
#   scripts/setup.sh --test   also the test tools and the system packages the tests use
#                             (Chromium for the browser tests, PostgreSQL for the database tests)
#   scripts/setup.sh --bench  also what the web benchmarks drive the server with (Debian's wrk)
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
want_bench=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1 ;;
    --bench) want_bench=1 ;;
    *) echo "setup: unknown option $arg (expected --test or --bench)" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: Python 3.11 or newer is needed as '$PY' (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi

apt_install() {
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing Debian packages: $*"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null
}

if [ "$want_test" = 1 ]; then
  need=()
  [ -x /usr/bin/chromium ] || need+=(chromium)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  # the test Ray cluster's network namespace: unshare and nsenter (util-linux), ip and ss (iproute2)
  { command -v ip && command -v ss; } >/dev/null 2>&1 || need+=(iproute2)
  { command -v unshare && command -v nsenter; } >/dev/null 2>&1 || need+=(util-linux)
  [ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
fi
if [ "$want_bench" = 1 ] && ! command -v wrk >/dev/null 2>&1; then
  apt_install wrk
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
extras=""
[ "$want_test" = 1 ] && extras="[dev,ray]"  # the tests start a local Ray cluster
stamp=".venv/.installed${extras}"
# Reinstall only when the dependency list changed: keeps `make run` and `make test` quick.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  echo "setup: installing Python packages (torch pinned by constraints.txt)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c constraints.txt -e ".${extras}"
  touch "$stamp"
fi
