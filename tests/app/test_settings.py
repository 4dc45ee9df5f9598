"""The settings model is the one place a variable's name, default, bounds and reason are written: the error
an operator sees, the values the code reads and docs/settings.md all come from it."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from app.cli.commands import _settings_doc
from app.core.config import CourseEnv, Settings, SettingsError, allowed
from app.core.settings_doc import SETTINGS_DOC, settings_markdown
from labs.resources import MIB
from tests.conftest import ROOT

FIELDS = list(CourseEnv.model_fields.values())
NUMBERS = [f for f in FIELDS if allowed(f).startswith("a whole number")]


def test_the_committed_settings_table_is_the_models():
    committed = (ROOT / SETTINGS_DOC).read_text(encoding="utf-8")
    assert committed == settings_markdown(), "regenerate with `python -m app settings-doc` and commit docs/settings.md"


def test_settings_doc_check_fails_on_a_stale_table_and_rewrites_it(tmp_path, capsys):
    doc = tmp_path / "settings.md"
    doc.write_text(settings_markdown().replace("`512`", "`256`"), encoding="utf-8")
    assert _settings_doc(doc, check=True) == 1
    assert "regenerate it with `python -m app settings-doc`" in capsys.readouterr().err
    assert "`256`" in doc.read_text()  # --check writes nothing
    assert _settings_doc(doc, check=False) == 0
    assert _settings_doc(doc, check=True) == 0


def test_settings_doc_runs_whatever_the_environment_holds():
    """It documents the settings, so a bad one in the shell must not stop it (every other command refuses)."""
    env = {"PATH": "/usr/bin:/bin", "COURSE_WORKERS": "99", "COURSE_ENV": "production"}
    out = subprocess.run(
        [sys.executable, "-m", "app", "settings-doc", "--check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


def test_every_variable_reaches_the_code_and_its_default_is_written_once():
    """Each `Settings` field names the variables it is read from; none carries a default of its own (a second
    default would disagree with the documented one the day either changes)."""
    read = [f for f in dataclasses.fields(Settings) if "reads" in f.metadata]
    assert {name for f in read for name in f.metadata["reads"]} == set(CourseEnv.model_fields)
    assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING for f in read)
    unread = {f.name for f in dataclasses.fields(Settings)} - {f.name for f in read}
    assert unread == {"heartbeat_s", "python"}  # the worker's pace and interpreter: no variable sets them
    defaults = Settings.from_env({})
    assert (defaults.dispatcher_lease_s, defaults.dispatcher_alive_s) == (5.0, 30.0)
    assert Settings.from_env({"COURSE_DISPATCHER_LEASE_SECONDS": "7"}).dispatcher_lease_s == 7.0


def test_every_variable_has_a_name_and_a_reason():
    assert all(f.alias and (f.description or "").strip() for f in FIELDS)
    names = [f.alias for f in FIELDS]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("info", NUMBERS, ids=lambda f: f.alias)
def test_a_number_out_of_bounds_names_the_variable_and_its_range(info):
    expected = allowed(info)
    lo, hi = (int(word) for word in expected.split() if word.isdigit())
    for bad in (lo - 1, hi + 1):
        with pytest.raises(SettingsError) as caught:
            Settings.from_env({info.alias: str(bad)})
        assert str(caught.value) == f"{info.alias}: got {bad}, expected a whole number from {lo} to {hi}"
    Settings.from_env({info.alias: str(lo)})
    Settings.from_env({info.alias: f" {hi} "})


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("COURSE_WORKERS", "two", "COURSE_WORKERS: got 'two', expected a whole number from 0 to 8"),
        ("COURSE_WORKERS", "1.5", "COURSE_WORKERS: got '1.5', expected a whole number from 0 to 8"),
        ("COURSE_ENV", "prod", "COURSE_ENV: got 'prod', expected one of development, test, production"),
        ("COURSE_LOG_LEVEL", "loud", "COURSE_LOG_LEVEL: got 'loud', expected one of DEBUG, INFO, WARNING, ERROR"),
        ("COURSE_EXECUTOR", "k8s", "COURSE_EXECUTOR: got 'k8s', expected one of embedded, ray"),
        ("COURSE_ACCESS_LOG", "t", "COURSE_ACCESS_LOG: got 't', expected 1/true/yes/on or 0/false/no/off"),
        ("COURSE_SMTP_URL", "http://mail", "COURSE_SMTP_URL: got scheme 'http', expected smtp://, smtp+starttls://"),
    ],
)
def test_a_value_it_cannot_read_is_one_line_naming_it(name, raw, message):
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({name: raw})
    assert str(caught.value).startswith(message)


def test_unset_or_empty_is_the_default_and_the_code_gets_its_units():
    defaults = Settings.from_env({})
    assert Settings.from_env({f.alias: "" for f in FIELDS if f.alias != "COURSE_SECRET_KEY"}) == defaults
    assert defaults.embedded_workers == 1 and defaults.session_idle_s == 72 * 3600
    assert defaults.data_dir == ROOT / "data" and defaults.db_url == f"sqlite:///{ROOT / 'data' / 'course.db'}"
    s = Settings.from_env(
        {
            "COURSE_SESSION_IDLE_HOURS": "2",
            "COURSE_SESSION_MAX_DAYS": "3",
            "COURSE_RESET_LINK_HOURS": "5",
            "COURSE_JOB_MEMORY_MB": "1024",
            "COURSE_WEB_QUEUE_TIMEOUT": "7",
            "COURSE_LOG_LEVEL": "debug",
            "COURSE_EXECUTOR": " Ray ",
            "COURSE_PUBLIC_URL": "https://course.example.org/",
        }
    )
    assert (s.session_idle_s, s.session_max_s, s.reset_link_s) == (2 * 3600, 3 * 86400, 5 * 3600)
    assert s.job_memory_bytes == 1024 * MIB and s.web_queue_timeout_s == 7.0
    assert (s.log_level, s.executor, s.public_url) == ("DEBUG", "ray", "https://course.example.org")


def test_only_the_mapping_given_is_read(monkeypatch):
    """A test's or a node's own mapping: the process environment does not leak in."""
    monkeypatch.setenv("COURSE_WORKERS", "5")
    assert Settings.from_env({}).embedded_workers == 1
    assert Settings.from_env().embedded_workers == 5
    assert Settings.from_env({}, embedded_workers=0).embedded_workers == 0  # overrides win


def test_names_are_case_sensitive_as_the_shell_is():
    assert Settings.from_env({"course_workers": "5"}).embedded_workers == 1
