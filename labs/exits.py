"""How `python -m labs run` says it ended, for whoever runs it (app/executors/labproc.py). Torch-free.

Exit codes: 0 success, 1 any other failure, 2 bad parameters, 3 a rank process was stopped from outside the
run. A stop from outside is a signal the lab never sends itself (EXTERNAL_STOPS): the machine's OOM killer
when the machine as a whole ran short, an operator, a host going down. The course treats such an attempt as
its own loss, not the learner's result.
"""

from __future__ import annotations

import signal

OK, FAILED, BAD_PARAMS, STOPPED = 0, 1, 2, 3

EXTERNAL_STOPS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT})


def signal_of(exitcode: int | None) -> signal.Signals | None:
    """The signal that ended a process with this exit code (subprocess and multiprocessing give -N), if any."""
    if exitcode is None or exitcode >= 0:
        return None
    try:
        return signal.Signals(-exitcode)
    except ValueError:
        return None
