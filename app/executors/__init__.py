"""Executors: how queued lab jobs get run. The jobs table is the source of truth for both.

    embedded (default)  app/executors/embedded.py   lab workers on this host claim jobs in fair order
    ray                 app/executors/ray.py        a dispatcher claims in fair order and submits one Ray task per
                                                    job, placed by Ray on a node with the GPUs/CPUs it needs;
                        app/executors/ray_resources.py  what a job needs from a node, which nodes can take work
                        app/executors/ray_health.py     reaching the head; the dispatcher's health file
                        app/executors/ray_node.py   the task on the node, and the node's flags and health

`processes(settings)` gives the commands `python -m app serve` starts and supervises for either
(app/executors/supervise.py). How many jobs run at once, which the queue's ETA divides by, is
`slots` in app/services/jobs/queue.py: services sit below executors and cannot ask them.

Both run `python -m labs run` through app/executors/labproc.py (process group, time limit, memory budget)
and both claim through app/services/jobs/lifecycle.py in the order of app/services/jobs/queue.py.
"""

from __future__ import annotations

import sys

from app.core.config import Settings


def processes(settings: Settings) -> tuple[str, list[list[str]]]:
    """(name, commands) of the processes the server supervises for this executor."""
    if settings.executor == "ray":
        return "dispatcher", [[sys.executable, "-m", "app", "dispatcher"]] if settings.dispatcher else []
    # The parent has already run the lab check; each worker need not import every runner again.
    cmd = [sys.executable, "-m", "app", "worker", "--skip-lab-check"]
    return "lab worker", [cmd for _ in range(settings.embedded_workers)]
