"""What runs once before serving: migrate the database, publish the lesson files, sync rubrics.

`python -m app serve` runs `prepare` once in the serving parent, before any web process starts, so
several web processes never race to migrate or publish. `create_app(prepare=True)` (tests, scripts)
runs it in the app's lifespan instead.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable

from sqlalchemy.orm import Session

from app import migrate
from app.config import Settings
from app.content import ContentError
from app.db import make_engine, make_sessionmaker
from app.services import publishing

log = logging.getLogger(__name__)
_errors: dict[str, dict[str, list[ContentError]]] = {}  # lessons dir -> folder errors of the last prepare


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
        from app.services import lessons as lesson_service

        _errors[key] = lesson_service.folder_errors(settings.lessons_dir)
    return _errors[key]


def settle(sessions: Callable[[], Session]) -> None:
    """Build the published lessons now (not on a learner's first page) and move everything alive after
    start-up out of the garbage collector's sight (gc.freeze). Without it, a full collection walked the
    lessons, templates and libraries every few thousand requests: an 80 ms pause (python/cpython gc docs:
    freeze "moves all the objects tracked by the garbage collector into a permanent generation"), which
    was the slowest percent of lesson pages in bench/lesson_throughput.py."""
    from app.services import lessons as lesson_service

    with sessions() as db:
        lesson_service.catalogue(db)
    gc.collect()
    gc.freeze()
