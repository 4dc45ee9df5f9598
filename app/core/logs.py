"""Logging for the server and the workers, configured once per process with the stdlib.

`python -m app serve` and `python -m app worker` call `configure(settings.log_level)` before doing
anything else (and so does each web process the server spawns). Modules log through
`logging.getLogger(__name__)`; uvicorn's own loggers propagate to the same handler.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

FORMAT = "%(asctime)s %(levelname)s %(name)s [pid %(process)d] %(message)s"
_configured = False


class JsonLines(logging.Formatter):
    """One JSON object per record (COURSE_LOG_FORMAT=json), for a log collector: time (UTC, ISO 8601), level,
    logger, pid, message, and the traceback as one string when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure(level: str = "INFO", *, access_log: bool = False, fmt: str = "text") -> None:
    """One stderr handler on the root logger at `level`; repeated calls only change the level. uvicorn's
    per-request lines reach it only with `access_log` (COURSE_ACCESS_LOG). `fmt`: "text" or "json"
    (COURSE_LOG_FORMAT)."""
    global _configured
    root = logging.getLogger()
    root.setLevel(level)
    _access(access_log)
    if _configured:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if fmt == "json" else logging.Formatter(FORMAT))
    root.addHandler(handler)
    # uvicorn's loggers carry their own handlers only when uvicorn configures logging itself; the server
    # passes log_config=None, so they propagate here.
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    _configured = True


def _access(on: bool) -> None:
    """uvicorn logs a request only when its access logger has a handler (hasHandlers(), checked per
    connection), so "off" must leave it none: no propagation either. A web process of a multi-process server
    runs this after uvicorn switched the logger off, so it must not switch it back on."""
    access = logging.getLogger("uvicorn.access")
    access.handlers.clear()
    access.propagate = on
