"""Engine and session factory. SQLite gets WAL, a busy timeout and enforced foreign keys.

A web process sizes its pool from its concurrency (`web_engine`): the admission gate (app/web/middleware/admission.py)
lets at most `web_concurrency` requests in at once and each holds at most one connection, so a request
that is in never waits for the pool. `release` hands a request's connection back between its queries
and the page render, so a connection is held only while queries run.
"""

from __future__ import annotations

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.core.config import Settings

DEFAULT_TIMEOUT_S = 30.0  # scripts and lab workers: wait long for a lock rather than fail a job's bookkeeping
_WROTE = "wrote"  # Session.info key: this transaction flushed changes it has not committed yet


def make_engine(
    url: str, *, pool_size: int = 5, max_overflow: int = 10, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Engine:
    """An engine whose pool holds `pool_size` (+ `max_overflow`) connections and whose waits end after
    `timeout_s`: a checkout from a full pool raises sqlalchemy.exc.TimeoutError, a SQLite write lock held
    elsewhere raises OperationalError ("database is locked"). The web app answers both with 503."""
    pool = {"pool_size": pool_size, "max_overflow": max_overflow, "pool_timeout": timeout_s}
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": timeout_s}, **pool)
        busy_ms = int(timeout_s * 1000)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")  # readers never block the worker's writes
            cur.execute(f"PRAGMA busy_timeout={busy_ms}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, **pool)


def web_engine(settings: Settings) -> Engine:
    """The engine of one web process: a connection for every request the gate admits, plus two for work
    outside requests (start-up checks); waits bounded by the queue timeout."""
    return make_engine(
        settings.db_url,
        pool_size=settings.web_threads,
        max_overflow=2,
        timeout_s=settings.web_queue_timeout_s,
    )


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    factory = sessionmaker(engine, expire_on_commit=False)
    event.listen(factory, "after_flush", _mark_written)
    event.listen(factory, "after_commit", _clear_written)
    event.listen(factory, "after_soft_rollback", _clear_written)
    return factory


def _mark_written(session: Session, _flush_context) -> None:
    session.info[_WROTE] = True


def _clear_written(session: Session, *_args) -> None:
    session.info.pop(_WROTE, None)


def release(db: Session) -> None:
    """End the session's transaction so its connection goes back to the pool; the session stays usable.

    Called once a request's queries are done (after the user lookup, before a page renders). A transaction
    that only read is committed, which keeps what it loaded readable (expire_on_commit is off); one holding
    changes nobody committed is rolled back, exactly what closing the session would have done with them.
    """
    if not db.in_transaction():
        return
    if db.info.get(_WROTE) or db.new or db.dirty or db.deleted:
        db.rollback()
    else:
        db.commit()
