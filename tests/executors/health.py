"""`python -m app dispatcher-health` as compose runs it, for the tests of what it reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def dispatcher_health(tmpdir: Path, alive_s: int | None = None) -> subprocess.CompletedProcess:
    """The health check on the host (here: the temp dir) of one or more dispatchers; `alive_s`, its
    COURSE_DISPATCHER_ALIVE_SECONDS where a test cannot wait the default 30 s."""
    extra = {"COURSE_DISPATCHER_ALIVE_SECONDS": str(alive_s)} if alive_s else {}
    return subprocess.run(
        [sys.executable, "-m", "app", "dispatcher-health"],
        cwd=ROOT,
        env=dict(os.environ, TMPDIR=str(tmpdir), **extra),
        capture_output=True,
        text=True,
        timeout=60,
    )
