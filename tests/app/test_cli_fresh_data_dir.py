"""`python -m app users create` works on a fresh data dir: it creates the dir and migrates."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def test_users_create_on_a_fresh_data_dir(tmp_path):
    data = tmp_path / "never-made" / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_") and k != "DATABASE_URL"}
    env.update(COURSE_ENV="test", COURSE_DATA_DIR=str(data))
    out = subprocess.run(
        [sys.executable, "-m", "app", "users", "create", "--email", "prof@example.org", "--password", "long enough"]
        + ["--role", "instructor"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    # the migration made the class "default", the only one: a class role needs no --class
    assert "created prof@example.org with instructor of default" in out.stdout
    assert (data / "course.db").is_file()
