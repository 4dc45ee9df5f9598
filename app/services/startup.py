"""What runs once before serving: migrate the database, publish the lesson files, sync rubrics.

`python -m app serve` runs `prepare` once in the serving parent, before any web process starts, so
several web processes never race to migrate or publish. `create_app(prepare=True)` (tests, scripts)
runs it in the app's lifespan instead.
"""

from __future__ import annotations

import gc
import logging
import os
import tempfile
from collections.abc import Callable

from sqlalchemy import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session

from app.content import ContentError
from app.core import migrate
from app.core.config import Settings, SettingsError
from app.core.db import make_engine, make_sessionmaker
from app.services.learning import publishing

log = logging.getLogger(__name__)
_errors: dict[str, dict[str, list[ContentError]]] = {}  # lessons dir -> folder errors of the last prepare


PG_EXAMPLE = "postgresql+psycopg://user:password@host:5432/dbname"


def check_database(settings: Settings) -> None:
    """Make the data dir and open the database once, before anything else does; SettingsError names the setting
    to fix, where each would otherwise end start-up in a long traceback from deep inside a migration."""
    _check_data_dir(settings)
    name = "DATABASE_URL" if settings.database_url else "COURSE_DATA_DIR"
    fix = "name a file in a folder" if settings.database_url else "point it at a folder"  # SQLite's errors' advice
    try:
        url = make_url(settings.db_url)
        engine = make_engine(settings.db_url)
    except NoSuchModuleError:  # an ArgumentError too, so caught first
        scheme = settings.db_url.partition(":")[0]
        hint = (
            " (postgres:// is Heroku's spelling; SQLAlchemy knows only postgresql://)" if scheme == "postgres" else ""
        )
        raise SettingsError(f"DATABASE_URL: no database dialect {scheme!r}{hint}; expected {PG_EXAMPLE}") from None
    except ArgumentError:  # the message would repeat the URL, password and all
        raise SettingsError(f"DATABASE_URL: not a database URL; expected {PG_EXAMPLE}") from None
    except ModuleNotFoundError as exc:
        raise SettingsError(
            f"DATABASE_URL: the driver of {url.drivername!r} is not installed ({exc.name}); "
            f"use psycopg, which the app installs: {PG_EXAMPLE}"
        ) from None
    try:
        with engine.connect():
            pass
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        if url.get_backend_name() == "sqlite":
            raise SettingsError(
                f"{name}: cannot open the SQLite database {url.database}: {reason}; {fix} this user can write"
            ) from None
        raise SettingsError(
            f"DATABASE_URL: cannot connect to {url.render_as_string(hide_password=True)}: {reason}; "
            "check that PostgreSQL runs there and that the host, port, user, password and database name are right"
        ) from None
    finally:
        engine.dispose()
    if url.get_backend_name() == "sqlite":
        _check_sqlite_writable(url.database, name, fix)


def _check_sqlite_writable(database: str | None, name: str, fix: str) -> None:
    """SQLite opens a file it may not write read-only, so the connect above succeeds and the first migration or
    sign-up failed deep inside a write. access(2) answers for this user and for a read-only mount, root included.
    (A read-only folder fails the connect already: WAL mode opens its -wal and -shm files there.)"""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = os.path.abspath(database)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise SettingsError(
            f"{name}: the SQLite database {path} is read-only for this user; give this user write access to it, "
            f"or {fix} this user can write"
        )


def _check_data_dir(settings: Settings) -> None:
    """Job bundles and uploads go here whichever database is used, so it must take a file now, not at the first
    finished lab."""
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=settings.data_dir):
            pass
    except OSError as exc:
        raise SettingsError(
            f"COURSE_DATA_DIR: cannot create or write {settings.data_dir} ({exc.strerror or exc}); "
            "point COURSE_DATA_DIR at a folder this user can write"
        ) from None


def prepare(settings: Settings) -> dict[str, list[ContentError]]:
    """Migrate, publish changed lesson folders and recompute grades of changed rubrics; returns folder errors."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    migrate.upgrade(settings.db_url)
    engine = make_engine(settings.db_url)
    try:
        with make_sessionmaker(engine)() as db:
            errors = publishing.sync_from_files(db, settings.lessons_dir)
    finally:
        engine.dispose()
    _errors[str(settings.lessons_dir)] = errors
    log.info("database migrated and lessons published from %s", settings.lessons_dir)
    return errors


def content_errors(settings: Settings) -> dict[str, list[ContentError]]:
    """The lesson folders that did not validate (shown on the instructor page).

    From this process's `prepare` if it ran one; a web process spawned after the parent prepared
    validates the folders itself (read-only: it publishes nothing).
    """
    key = str(settings.lessons_dir)
    if key not in _errors:
        from app.services.learning import lessons as lesson_service

        _errors[key] = lesson_service.folder_errors(settings.lessons_dir)
    return _errors[key]


def settle(sessions: Callable[[], Session]) -> None:
    """Build the published lessons now (not on a learner's first page) and move everything alive after
    start-up out of the garbage collector's sight (gc.freeze). Without it, a full collection walked the
    lessons, templates and libraries every few thousand requests: an 80 ms pause (python/cpython gc docs:
    freeze "moves all the objects tracked by the garbage collector into a permanent generation"), which
    was the slowest percent of lesson pages in bench/lesson_throughput.py."""
    from app.services.learning import lessons as lesson_service

    with sessions() as db:
        lesson_service.catalogue(db)
    gc.collect()
    gc.freeze()
