"""What an operator meets at the command line: a Ray node's commands without the web tier's settings, `users create`
on an existing account, `graders assign` with a lesson that does not exist, a bad database or a taken port at
start-up (one `configuration error:` line, exit 2, before anything starts), and settings that must refuse
nonsense out loud."""

from __future__ import annotations

import io
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from app.cli.commands import main
from app.core import migrate
from app.core.config import Settings, SettingsError
from app.core.db import make_engine, make_sessionmaker
from app.core.models import GraderAssignment
from app.services.accounts import users
from labs.resources import MIB
from tests.conftest import ROOT, free_port

LONG_KEY = "k" * 48


def _env(tmp_path: Path, **extra: str) -> dict:
    """This process's environment without any course setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_") and k != "DATABASE_URL"}
    env.update({"COURSE_ENV": "test", "COURSE_DATA_DIR": str(tmp_path / "data"), **extra})
    return env


def _run(env: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _one_config_error(out: subprocess.CompletedProcess, starts: str) -> str:
    """Exit 2 and exactly one stderr line, `configuration error: <starts>...` (no traceback)."""
    assert out.returncode == 2, out.stderr[-3000:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"configuration error: {starts}"), out.stderr[-3000:]
    return lines[0]


# ---------------------------------------------------------------- a Ray node has no secret key


def test_ray_node_flags_run_in_production_without_a_secret_key(tmp_path):
    """The ray-cpu/ray-gpu containers: the image's COURSE_ENV=production, no secret key, no database."""
    env = _env(tmp_path, COURSE_ENV="production")
    out = _run(env, "ray-node-flags")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("--num-cpus=") and "--num-gpus=" in out.stdout
    assert not (tmp_path / "data").exists()  # a node touches no data dir
    # a setting the node does read is still checked
    bad = _run({**env, "COURSE_JOB_MEMORY_MB": "8G"}, "ray-node-flags")
    _one_config_error(bad, "COURSE_JOB_MEMORY_MB: got '8G'")


@pytest.mark.parametrize("command", ["ray-node-health", "dispatcher-health"])
def test_health_checks_do_not_ask_for_a_secret_key(tmp_path, command):
    out = _run(_env(tmp_path, COURSE_ENV="production"), command)
    assert "configuration error" not in out.stderr
    assert out.returncode in (0, 1)  # healthy or not: this machine runs no raylet or dispatcher


def test_the_web_tier_still_needs_its_key():
    with pytest.raises(SettingsError, match="COURSE_SECRET_KEY: must be set in production"):
        Settings.from_env({"COURSE_ENV": "production"})
    assert Settings.from_env({"COURSE_ENV": "production"}, signs_sessions=False).secret_key  # random, never used


# ---------------------------------------------------------------- users create on an existing account


@pytest.fixture
def cli_env(tmp_path, monkeypatch) -> Path:
    """`main()` in this process, on a fresh SQLite data dir; returns the database file."""
    for name in [k for k in os.environ if k.startswith("COURSE_") or k == "DATABASE_URL"]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("COURSE_ENV", "test")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # nothing to read: no terminal, nothing piped
    return tmp_path / "data" / "course.db"


def _roles(db_file: Path, email: str) -> set[str] | None:
    """The account's roles as stored: its site roles, and "ROLE of CLASS" for each class; None: no such account."""
    from app.services.classes import registry as class_registry

    engine = make_engine(f"sqlite:///{db_file}")
    try:
        with make_sessionmaker(engine)() as db:
            user = users.get_by_email(db, email=email)
            if user is None:
                return None
            in_classes = {f"{m.role} of {m.klass.slug}" for m in class_registry.memberships(db, user_id=user.id)}
            return set(user.roles) | in_classes
    finally:
        engine.dispose()


def _can_log_in(db_file: Path, email: str, password: str) -> bool:
    engine = make_engine(f"sqlite:///{db_file}")
    try:
        with make_sessionmaker(engine)() as db:
            return users.authenticate(db, email=email, password=password) is not None
    finally:
        engine.dispose()


def test_users_create_on_an_existing_account_never_prompts(tmp_path):
    """As reported: an existing email, no --role, stdin closed. It crashed (TypeError, after an EOFError prompt)."""
    env = _env(tmp_path)
    made = _run(env, "users", "create", "--email", "ta@example.org", "--password", "first password")
    assert made.returncode == 0, made.stderr
    assert f"created ta@example.org with no roles in SQLite file {tmp_path / 'data' / 'course.db'}" in made.stdout
    again = _run(env, "users", "create", "--email", "ta@example.org")
    assert again.returncode == 0, again.stderr
    assert "Password" not in again.stdout + again.stderr
    assert "ta@example.org: nothing changed" in again.stdout and "now no roles" in again.stdout


def test_users_create_adds_roles_and_sets_a_given_password(cli_env, capsys):
    assert main(["users", "create", "--email", "ta@example.org", "--password", "first password"]) == 0
    # a role in a class: the class is the server's only one (--class names it where there are several); one role
    # per class, the strongest named; a site role beside it
    assert main(["users", "create", "--email", "ta@example.org", "--role", "grader", "--role", "learner"]) == 0
    out = capsys.readouterr().out
    assert "ta@example.org: now grader of default; now grader of default in SQLite file" in out
    assert _roles(cli_env, "ta@example.org") == {"grader of default"}
    assert main(["users", "create", "--email", "ta@example.org", "--role", "author"]) == 0
    assert "added roles author; now site roles author; grader of default" in capsys.readouterr().out
    assert main(["users", "create", "--email", "ta@example.org", "--role", "grader", "--class", "nope"]) == 2
    assert capsys.readouterr().err.strip() == "--class: no class 'nope'; classes: default"
    assert _can_log_in(cli_env, "ta@example.org", "first password")  # no --password: the password stays

    assert main(["users", "create", "--email", "ta@example.org", "--password", "second password"]) == 0
    assert "ta@example.org: set a new password (ended 0 session(s))" in capsys.readouterr().out
    assert _can_log_in(cli_env, "ta@example.org", "second password")
    assert not _can_log_in(cli_env, "ta@example.org", "first password")


def test_a_refused_password_changes_nothing(cli_env, capsys):
    assert main(["users", "create", "--email", "ta@example.org", "--password", "first password"]) == 0
    assert main(["users", "create", "--email", "ta@example.org", "--password", "short", "--role", "grader"]) == 2
    assert capsys.readouterr().err.strip() == "--password: use 8 to 256 characters (you gave 5)"
    assert _roles(cli_env, "ta@example.org") == set()  # the role was not added either
    assert _can_log_in(cli_env, "ta@example.org", "first password")


def test_a_new_account_without_a_password_is_refused_or_read_from_stdin(cli_env, capsys, monkeypatch):
    assert main(["users", "create", "--email", "new@example.org"]) == 2
    assert "--password: required (no terminal to ask on, and nothing on stdin)" in capsys.readouterr().err
    assert _roles(cli_env, "new@example.org") is None
    monkeypatch.setattr(sys, "stdin", io.StringIO("piped password\n"))
    assert main(["users", "create", "--email", "new@example.org"]) == 0
    assert _can_log_in(cli_env, "new@example.org", "piped password")


# ---------------------------------------------------------------- graders assign checks the lesson


def test_graders_assign_refuses_an_unknown_lesson(cli_env, capsys):
    assert main(["users", "create", "--email", "ta@example.org", "--password", "long enough", "--role", "grader"]) == 0
    assert main(["graders", "assign", "--email", "ta@example.org", "--lesson", "no-such-lesson"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("--lesson: no lesson 'no-such-lesson'; known lessons: ")
    assert "transformer-scaling" in err and "_template" not in err
    engine = make_engine(f"sqlite:///{cli_env}")
    with make_sessionmaker(engine)() as db:
        assert db.scalars(select(GraderAssignment)).all() == []
    engine.dispose()
    # a lesson folder counts before the first `serve` has published it
    assert main(["graders", "assign", "--email", "ta@example.org", "--lesson", "transformer-scaling"]) == 0
    assert "ta@example.org now grades transformer-scaling in class default, SQLite file" in capsys.readouterr().out


# ---------------------------------------------------------------- a bad database, in one line


def test_a_data_dir_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "a-file").write_text("")
    env = _env(tmp_path, COURSE_DATA_DIR=str(tmp_path / "a-file" / "data"))
    line = _one_config_error(_run(env, "migrate"), "COURSE_DATA_DIR: cannot create or write")
    assert "point COURSE_DATA_DIR at a folder this user can write" in line


def test_a_sqlite_file_that_cannot_be_opened_is_one_line(tmp_path):
    (tmp_path / "data" / "course.db").mkdir(parents=True)  # root may write anywhere; a folder in its place it cannot
    line = _one_config_error(_run(_env(tmp_path), "users", "create", "--email", "a@example.org"), "COURSE_DATA_DIR")
    assert f"cannot open the SQLite database {tmp_path / 'data' / 'course.db'}: unable to open database file" in line


def test_a_read_only_sqlite_file_in_a_writable_folder_is_one_line(tmp_path):
    """SQLite opens a file it may not write read-only: the connect succeeded, the first write ended in a traceback.
    Root may write any file, so a read-only bind mount of the file, in a private mount namespace, takes that away."""
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs unshare -m (a private mount namespace) to make a file read-only for root")
    migrated = _run(_env(tmp_path), "migrate")
    db = tmp_path / "data" / "course.db"
    assert migrated.returncode == 0 and f"SQLite file {db} is at the latest migration" in migrated.stdout
    script = (
        f'mount --bind "{db}" "{db}" && mount -o remount,bind,ro "{db}" && '
        f'exec "{sys.executable}" -m app users create --email a@example.org --password "long enough"'
    )
    out = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True
    )
    line = _one_config_error(out, f"COURSE_DATA_DIR: the SQLite database {db} is read-only for this user")
    assert line.endswith("give this user write access to it, or point it at a folder this user can write")


def test_a_postgres_scheme_names_the_right_one(tmp_path):
    env = _env(tmp_path, DATABASE_URL="postgres://course:hunter2-secret@db:5432/course")
    line = _one_config_error(_run(env, "serve", "--port", "0"), "DATABASE_URL: no database dialect 'postgres'")
    assert "postgresql+psycopg://user:password@host:5432/dbname" in line and "hunter2" not in line


def test_an_unreachable_postgres_is_one_line_without_the_password(tmp_path):
    port = free_port()  # nothing listens there
    env = _env(tmp_path, DATABASE_URL=f"postgresql+psycopg://course:hunter2-secret@127.0.0.1:{port}/course")
    line = _one_config_error(_run(env, "migrate"), "DATABASE_URL: cannot connect to postgresql+psycopg://course:***@")
    assert "Connection refused" in line and "hunter2" not in line


@pytest.mark.postgres
def test_a_missing_postgres_database_is_named(postgres_server, tmp_path):
    from app.services.startup import check_database

    s = Settings.from_env(_env(tmp_path), database_url=f"{postgres_server}/no_such_database")
    with pytest.raises(SettingsError, match='DATABASE_URL: cannot connect to .*"no_such_database" does not exist'):
        check_database(s)


@pytest.mark.both_backends
def test_a_good_database_passes(settings):
    from app.services.startup import check_database

    check_database(settings)
    migrate.upgrade(settings.db_url)


# ---------------------------------------------------------------- a port in use, before anything starts


def test_serve_on_a_taken_port_stops_before_starting_anything(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _run(_env(tmp_path), "serve", "--port", str(port), timeout=60)
    line = _one_config_error(out, f"--port: 127.0.0.1:{port} is already in use")
    assert "choose another --port" in line
    assert not (tmp_path / "data").exists()  # not migrated, no worker started


# ---------------------------------------------------------------- settings that took anything


@pytest.mark.parametrize("raw", ["8G", "abc", "0", "-5"])
def test_job_memory_must_be_a_number_of_mib(raw):
    with pytest.raises(SettingsError, match=f"COURSE_JOB_MEMORY_MB: got '?{raw}'?, expected a whole number"):
        Settings.from_env({"COURSE_JOB_MEMORY_MB": raw})
    assert Settings.from_env({"COURSE_JOB_MEMORY_MB": "4096"}).job_memory_bytes == 4096 * MIB


@pytest.mark.parametrize(
    ("raw", "on"), [("0", False), ("false", False), ("No", False), ("OFF", False), ("1", True), ("true", True)]
)
def test_on_off_settings_take_the_usual_spellings(raw, on):
    s = Settings.from_env({"COURSE_DISPATCHER": raw, "COURSE_ACCESS_LOG": raw})
    assert s.dispatcher is on and s.access_log is on


@pytest.mark.parametrize("name", ["COURSE_DISPATCHER", "COURSE_ACCESS_LOG"])
def test_an_on_off_setting_refuses_anything_else(name):
    with pytest.raises(SettingsError, match=f"{name}: got 'nah', expected 1/true/yes/on or 0/false/no/off"):
        Settings.from_env({name: "nah"})


def test_a_short_production_key_is_refused_with_how_to_make_one():
    env = {"COURSE_ENV": "production", "COURSE_SECRET_KEY": "serve-test"}
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(env)
    assert str(caught.value) == (
        "COURSE_SECRET_KEY: got 10 characters, expected at least 32 in production; "
        'make one with `python -c "import secrets; print(secrets.token_urlsafe(48))"`'
    )
    assert Settings.from_env({**env, "COURSE_SECRET_KEY": "x" * 32}).secret_key == "x" * 32
    assert Settings.from_env({"COURSE_ENV": "test", "COURSE_SECRET_KEY": "short"}).secret_key == "short"


def test_several_web_processes_on_sqlite_in_production_warn(caplog):
    from app.cli.serve import warn_sqlite_processes

    base = {"COURSE_ENV": "production", "COURSE_SECRET_KEY": LONG_KEY, "COURSE_WEB_PROCESSES": "4"}
    with caplog.at_level(logging.WARNING, logger="app.cli.serve"):
        warn_sqlite_processes(Settings.from_env(base))
        warn_sqlite_processes(Settings.from_env({**base, "DATABASE_URL": "postgresql+psycopg://u@h/db"}))
        warn_sqlite_processes(Settings.from_env({**base, "COURSE_WEB_PROCESSES": "1"}))
    [record] = caplog.records
    assert record.getMessage().startswith("COURSE_WEB_PROCESSES=4 on SQLite (")
    assert "set DATABASE_URL=postgresql+psycopg://" in record.getMessage()


@pytest.mark.parametrize("command", [["dispatcher"], ["serve", "--port", "0"]])
def test_ray_executor_without_the_ray_package_is_a_configuration_error(tmp_path, command):
    """A web host installed by `make run` has no ray: its dispatcher died in a ModuleNotFoundError traceback, and
    serve restarted it for ever. sys.modules["ray"] = None is how Python marks a package it must not import."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['ray'] = None\n")
    env = _env(tmp_path, COURSE_EXECUTOR="ray", PYTHONPATH=str(site))
    line = _one_config_error(_run(env, *command), "COURSE_EXECUTOR: ray needs the ray package on this host")
    assert "pip install -c constraints.txt -e '.[ray]'" in line
    assert ("COURSE_DISPATCHER=0" in line) == (command[0] == "serve")
    assert not (tmp_path / "data").exists()  # refused before anything was created
