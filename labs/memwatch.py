"""Peak memory of a whole process tree: run a command and sample the summed RSS of it and its descendants.

    from labs.memwatch import run_measured
    m = run_measured([sys.executable, "-m", "labs", "run", "tp-sweep", "--out", "/tmp/tp"])
    m.peak_rss_bytes, m.peak_processes, m.returncode

A lab job is a process group: `python -m labs run` plus, for the parallel labs, one spawned process per
rank (and multiprocessing's resource tracker). `resource.getrusage(RUSAGE_CHILDREN).ru_maxrss` only
reports the largest single descendant, so this samples /proc instead: every `interval_s` it reads the
children of every process it knows (/proc/PID/task/TID/children) and sums their resident set sizes
(/proc/PID/statm). The sum counts shared library pages once per process, so it errs high, the safe
side for a budget. One exception: a child that has not yet exec'd (same command line as its parent,
e.g. `uname` between vfork and exec, which platform.processor() runs) shares its parent's pages, so it
is not counted; otherwise one sample would count the parent twice. A peak shorter than one interval can
be missed; the labs hold their large tensors for far longer than the default 5 ms.

Linux only (it reads /proc); torch-free.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Measured:
    returncode: int
    peak_rss_bytes: int  # largest sum over the tree at one sample
    peak_processes: int  # processes alive at that sample
    samples: int
    wall_s: float
    stdout: str
    stderr: str


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError:
            continue
    return out


def _rss(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0  # exited between listing and reading


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def tree_rss(root: int) -> tuple[int, int]:
    """(summed RSS in bytes, number of processes) of `root` and all its descendants, right now."""
    total, count, seen = 0, 0, set()
    todo: list[tuple[int, bytes | None]] = [(root, None)]  # (pid, its parent's command line)
    while todo:
        pid, parent_cmd = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        cmd = _cmdline(pid)
        rss = _rss(pid)
        if rss and cmd != parent_cmd:  # equal: forked, not yet exec'd, sharing the parent's pages
            total += rss
            count += 1
        todo += [(child, cmd) for child in _children(pid)]
    return total, count


def run_measured(
    argv: list[str],
    *,
    interval_s: float = 0.005,
    timeout_s: float = 600.0,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
) -> Measured:
    """Run `argv` to completion, sampling its process tree's RSS; raises subprocess.TimeoutExpired."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0, 0, 0]  # bytes, processes, samples
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            rss, n = tree_rss(proc.pid)
            peak[2] += 1
            if rss > peak[0]:
                peak[0], peak[1] = rss, n
            done.wait(interval_s)

    watcher = threading.Thread(target=sample, name="memwatch", daemon=True)
    watcher.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    finally:
        done.set()
        watcher.join()
    return Measured(proc.returncode, peak[0], peak[1], peak[2], time.monotonic() - start, stdout, stderr)
