"""`python -m app dispatcher-health` as compose runs it, for the tests of what it reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def dispatcher_health(tmpdir: Path) -> subprocess.CompletedProcess:
    """The health check on the host (here: the temp dir) of one or more dispatchers."""
    return subprocess.run(
        [sys.executable, "-m", "app", "dispatcher-health"],
        cwd=ROOT,
        env=dict(os.environ, TMPDIR=str(tmpdir)),
        capture_output=True,
        text=True,
        timeout=60,
    )
