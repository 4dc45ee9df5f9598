"""labs/api.py, the app's door into the labs: everything it names is there, and opening it imports no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from labs import api

ROOT = Path(__file__).resolve().parents[2]  # not tests.conftest: the GPU check collects tests/labs with torch only


def test_every_name_the_door_lists_is_there():
    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert missing == []
    assert api.exits.STOPPED == 3 and api.MIB == 2**20 and api.count(2, "rank") == "2 ranks"


def test_the_door_imports_no_torch():
    code = "import labs.api, sys; assert 'torch' not in sys.modules, 'torch was imported'"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
