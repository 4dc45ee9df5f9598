"""How `make test` shares tests out between its pytest-xdist processes (`--dist loadgroup`): each test file runs
whole in one process, as with `--dist loadfile`, and every file whose tests use the session's Ray cluster runs in
one process, so the cluster starts once per run instead of once in each process that drew a Ray file (a start
and wait_nodes took 52 s on the busy 2-core machine it was measured on).

Only the workers know which tests use which fixtures, and pytest-xdist's own `xdist_group` suffix does not reach
the controller with this pytest (a Node's id no longer reads the `_nodeid` xdist rewrites). So each worker, once
it has collected, writes the Ray files to a file named by the run's COURSE_TEST_RUN (tests/leftovers.py), and the
controller, which schedules only after every worker has collected, reads it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from tests.leftovers import MARK

RAY_FIXTURE = "ray_cluster"
RAY_GROUP = "ray-cluster"


def _ray_files_path() -> Path:
    return Path(tempfile.gettempdir()) / f"course-ray-files-{os.environ[MARK]}.json"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")):  # a worker of a loadgroup run
        return
    files = sorted({item.nodeid.split("::", 1)[0] for item in items if RAY_FIXTURE in item.fixturenames})
    path = _ray_files_path()
    tmp = path.with_suffix(f".{os.getpid()}")
    tmp.write_text(json.dumps(files))
    tmp.replace(path)  # every worker collects the same tests, so whichever lands last says the same


@pytest.hookimpl(optionalhook=True)  # the GPU check's pytest runs without pytest-xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileOrRay(LoadScopeScheduling):
        ray_files: set[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.ray_files is None:  # first asked once every worker has collected
                path = _ray_files_path()
                self.ray_files = set(json.loads(path.read_text())) if path.exists() else set()
                path.unlink(missing_ok=True)
            file = nodeid.split("::", 1)[0]
            return RAY_GROUP if file in self.ray_files else file

    return FileOrRay(config, log)
