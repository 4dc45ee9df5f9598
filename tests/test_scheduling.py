"""`--dist loadgroup` with tests/scheduling.py: every file that uses the Ray cluster lands in one xdist process and
every other file stays whole in one, on a throwaway tree run by a real pytest-xdist with two workers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict

from tests.conftest import ROOT

RAY_TEST = "def test_a(ray_cluster):\n    pass\n\n\ndef test_b(ray_cluster):\n    pass\n"
PLAIN_TEST = "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n\n\ndef test_c():\n    pass\n"


def test_the_ray_files_share_one_process_and_each_other_file_stays_whole(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture(scope='session')\ndef ray_cluster():\n    return None\n"
    )
    for i in range(3):
        (tmp_path / f"test_ray{i}.py").write_text(RAY_TEST)
    for i in range(4):
        (tmp_path / f"test_plain{i}.py").write_text(PLAIN_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COURSE_TEST_RUN"))}
    env["PYTHONPATH"] = str(ROOT)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.leftovers", "-p", "tests.scheduling", "-p", "no:cacheprovider"]
        + ["-n", "2", "--dist", "loadgroup", "-v", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers = defaultdict(set)  # file -> the workers that ran its tests
    for worker, file in re.findall(r"\[(gw\d)\][^\n]*?PASSED (?:\S*/)?(test_\w+\.py)::", run.stdout):
        workers[file].add(worker)
    assert len(workers) == 7 and all(len(w) == 1 for w in workers.values()), dict(workers)
    assert len({next(iter(workers[f"test_ray{i}.py"])) for i in range(3)}) == 1, dict(workers)
    assert len({next(iter(w)) for w in workers.values()}) == 2  # and the other files went to both processes
