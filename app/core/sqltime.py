"""Timestamp arithmetic that SQLite and PostgreSQL both run.

    epoch_s(Job.finished_at)      seconds since 1970 of a timestamp column, as a float expression

SQLite keeps timestamps as text (julianday keeps their milliseconds); PostgreSQL reads EXTRACT(EPOCH …). Used by
the fair queue's decayed usage (app/services/jobs/queue.py) and the reading-time bound
(app/services/learning/progress.py), each in one statement instead of a read and a write.
"""

from __future__ import annotations

from sqlalchemy import Float
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement


class epoch_s(FunctionElement):
    """Seconds since 1970 of a timestamp column."""

    type = Float()
    inherit_cache = True


@compiles(epoch_s, "sqlite")
def _epoch_s_sqlite(element, compiler, **kw):
    return f"((julianday({compiler.process(element.clauses, **kw)}) - 2440587.5) * 86400.0)"


@compiles(epoch_s, "postgresql")
def _epoch_s_postgresql(element, compiler, **kw):
    return f"CAST(EXTRACT(EPOCH FROM {compiler.process(element.clauses, **kw)}) AS DOUBLE PRECISION)"
