"""Cost of the per-request login lookup: the server-side session (token digest -> session, user and roles in one
statement) against the signed-cookie lookup it replaced (user id -> user and roles), in the same process; and
the lesson pages' read of the same session as plain columns (`sessions.peek`, app/web/deps.py Viewer), no ORM.

    .venv/bin/python bench/session_lookup.py [--rounds 5] [--calls 2000] [--database-url URL]

Both run against one SQLite file (or the given database) holding a learner and a few hundred other sessions,
interleaved in rounds so a busy machine slows both alike; prints microseconds per call (fastest round: the
least disturbed by other load; and the median round) and each one's ratio to the first. Nothing here asserts
a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import migrate  # noqa: E402
from app.core.db import make_engine, make_sessionmaker  # noqa: E402
from app.services.accounts import (
    sessions,
    users,  # noqa: E402
)

DAY = 86400


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--database-url", default="")
    args = ap.parse_args()
    url = args.database_url or f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-sessions-')) / 'course.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    with make_sessionmaker(engine)() as db:
        others = [users.create_user(db, email=f"l{i}@example.org", password="bench password") for i in range(20)]
        for u in others:
            for _ in range(15):
                sessions.start(db, user=u, idle_s=DAY, max_s=14 * DAY)
        me = users.create_user(db, email="me@example.org", password="bench password", roles=["admin", "author"])
        token = sessions.start(db, user=me, idle_s=DAY, max_s=14 * DAY)

        def by_user_id() -> None:  # what every request did before: the user id from the signed cookie
            db.expunge_all()
            assert users.get(db, user_id=me.id) is not None

        def by_session() -> None:  # what every request does now
            db.expunge_all()
            assert sessions.lookup(db, token=token, idle_s=DAY, max_s=14 * DAY) is not None

        def by_peek() -> None:  # what lesson pages and the dashboard do: columns, no ORM objects
            db.expunge_all()
            assert sessions.peek(db.connection(), token=token, idle_s=DAY, max_s=14 * DAY) is not None

        lookups = (("user id (before)", by_user_id), ("session (now)", by_session), ("peek (pages)", by_peek))
        rounds: dict[str, list[float]] = {name: [] for name, _ in lookups}
        for _ in range(args.rounds):
            for name, fn in lookups:
                start = time.perf_counter()
                for _ in range(args.calls):
                    fn()
                rounds[name].append((time.perf_counter() - start) / args.calls * 1e6)
    engine.dispose()
    print(f"{engine.dialect.name}; {args.rounds} rounds x {args.calls} calls; 320 sessions in the table")
    print(f"{'lookup':<18} {'fastest us':>10} {'median us':>10} {'x first':>8} {'(median)':>8}")
    first = rounds["user id (before)"]
    for name, values in rounds.items():
        fastest, median = min(values), statistics.median(values)
        ratios = f"{fastest / min(first):8.2f} {median / statistics.median(first):8.2f}"
        print(f"{name:<18} {fastest:10.1f} {median:10.1f} {ratios}")


if __name__ == "__main__":
    main()
