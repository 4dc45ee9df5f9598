"""bench/page_breakdown.py still runs against the app as it is: every row answers 200 and is printed.

A bench that rots unnoticed is worse than none; this runs it with a handful of calls and asserts nothing
about time (the figures are the bench's to print, not a test's to judge)."""

import re
import subprocess
import sys

from tests.conftest import ROOT


def test_the_breakdown_runs_and_prints_every_row():
    out = subprocess.run(
        [sys.executable, "bench/page_breakdown.py", "--rounds", "1", "--calls", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line.split()[0] for line in out.stdout.splitlines()[2:]]
    assert rows == ["floor", "deps", "login", "home", "practice", "part"], out.stdout
    saved = re.search(r"learner with (\d+) saved answers", out.stdout)
    assert saved and int(saved.group(1)) > 0, out.stdout
