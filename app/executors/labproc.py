"""One `python -m labs run` subprocess, as both executors run it: in its own process group, dying with its
parent, at lower CPU priority, inside its memory budget, with its progress lines read as they come.

Used by the embedded worker (app/executors/embedded.py) on the web host and by the Ray task
(app/executors/ray.py) on a GPU host; neither needs anything else from the app here (no database).

Memory: the budget (the per-job budget of labs.resources, COURSE_JOB_MEMORY_MB) is enforced on the whole
process group, ranks included, two ways:
- a memory cgroup of its own where the host lets this process create one (cgroup v2 with the memory
  controller delegated, or a v1 memory hierarchy it can write): the kernel's hard limit, OOM-kills inside it;
- everywhere, a watchdog that sums the group's resident memory from /proc every WATCH_S and kills the group
  when it passes the budget (a fast allocation can overshoot by what it allocates in WATCH_S).
RLIMIT_AS was not used: it limits address space per process, not the group, and torch (CUDA most of all)
reserves several times the memory it uses, so a limit tight enough to matter breaks start-up.
A run that goes over is reported as "ran out of its memory budget": the learner's parameters asked for more
than the course gives one job, so it is their result (not retried, and not an infrastructure failure).

CPU priority (embedded mode): `nice` (default 10) so a running lab never starves page loads; in a v2 cgroup
also cpu.weight.

Stopping (a cancel, the time limit, a worker's shutdown): SIGTERM to the whole group, STOP_GRACE_S for the lab to
undo what it set up (the collectives lab deletes its network namespaces on SIGTERM), then SIGKILL. The memory
watchdog kills at once: a run past its budget gets no time to allocate more. Once the group is gone, whatever the
lab left on the host is deleted by its pid (labs.api release_host_state: namespaces, veths and their qdiscs), so a
SIGKILL or a crash leaves nothing behind, and another job's state, named by another pid, is never touched.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.services.jobs.lifecycle import Progress
from labs.api import exits, release_host_state

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1
WATCH_S = 0.1  # how often the watchdog sums the group's memory
STOP_GRACE_S = 5.0  # SIGTERM to SIGKILL: the collectives lab's teardown of 4 nodes takes well under a second
LAB_NICE = 10  # the lab's CPU priority below the web server (0) in the embedded mode
CGROUP_NAME = "course-labs"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended, in the learner's words. `ok`: result.json was written."""

    ok: bool
    error: str | None
    message: str  # finished | refused | failed | timed out | out of memory | cancelled | lost

    @property
    def lost(self) -> bool:
        """The attempt was lost to infrastructure: the executor requeues it (`jobs.lost`), never charging it;
        `error` then says why in words that follow "because of the course's infrastructure: "."""
        return self.message == "lost"


def lab_command(python: str, *, lab: str, params: dict, out: Path, backend: str) -> list[str]:
    return [python, "-m", "labs", "run", lab, "--params", json.dumps(params), "--out", str(out), "--backend", backend]


def lab_threads(*, backend: str, ranks: int, cpu_slots: float) -> int:
    """CPU threads for each process of one lab run: its CPU slots shared among the processes that compute on the CPU.

    On cpu every rank computes on the CPU, so each gets its share (labs/parallel/dist.py pins a gloo rank to one
    thread as well). On a GPU backend the ranks drive GPUs, and the CPU work (the FP32 or emulated references a lab
    compares against) runs in the lab's own process, which gets the job's slots whole."""
    slots = max(1, int(cpu_slots))
    return max(1, slots // max(1, ranks)) if backend == "cpu" else slots


def lab_env(
    base: Mapping[str, str], *, backend: str, threads: int, gpus: Sequence[str] | None = None
) -> dict[str, str]:
    """The environment of one lab run: threads set explicitly, and only the GPUs the job holds visible.

    A cpu job sees no GPU at all (CUDA_VISIBLE_DEVICES=""): otherwise on a GPU host torch finds the GPUs, labs.env
    imports Transformer Engine and the result reads "cpu on NVIDIA H200". Ray does not hide them for it: a task granted no GPUs
    keeps the worker's CUDA_VISIBLE_DEVICES (ray-project/ray issue 54868; checked in Ray 2.60.0,
    python/ray/_private/accelerators/accelerator.py, RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO, and
    python/ray/_private/utils.py `set_visible_accelerator_ids`, which skips a resource with no ids).
    A GPU job sees the devices granted to it (`gpus`: the embedded executor's allocator, app/executors/gpus.py);
    None keeps what the caller's environment says (a Ray task: Ray set CUDA_VISIBLE_DEVICES to its grant).
    Threads: Ray sets OMP_NUM_THREADS to a task's num_cpus only where it is unset (python/ray/_private/utils.py
    `set_omp_num_threads_if_unset`, Ray 2.60.0), and the embedded workers set nothing; torch reads OMP_NUM_THREADS
    for its intra-op pool at start-up, MKL its own variable."""
    env = dict(base)
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(max(1, threads))
    if backend == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    return env


# ---------------------------------------------------------------- cgroups (where available)


def _own_cgroup_v2() -> Path | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                rel = line[3:].strip().lstrip("/")
                for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
                    base = root / rel
                    if (base / "cgroup.controllers").is_file():
                        return base
    except OSError:
        pass
    return None


def _own_cgroup_v1_memory() -> Path | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3 and "memory" in parts[1].split(","):
                base = Path("/sys/fs/cgroup/memory") / parts[2].strip().lstrip("/")
                if (base / "memory.limit_in_bytes").is_file():
                    return base
    except OSError:
        pass
    return None


class JobCgroup:
    """A memory cgroup for one lab run, if this host lets us make one; `path` is None otherwise."""

    def __init__(self, name: str, memory_bytes: int, cpu_weight: int | None = None):
        self.path: Path | None = None
        self.version = 0
        self._oom_at_removal: bool | None = None  # read before the directory goes, with the counters in it
        v2 = _own_cgroup_v2()
        try:
            if v2 is not None and "memory" in (v2 / "cgroup.subtree_control").read_text().split():
                path = v2 / name
                path.mkdir(exist_ok=True)
                (path / "memory.max").write_text(str(memory_bytes))
                (path / "memory.swap.max").write_text("0") if (path / "memory.swap.max").exists() else None
                if cpu_weight is not None and (path / "cpu.weight").exists():
                    (path / "cpu.weight").write_text(str(cpu_weight))
                self.path, self.version = path, 2
                return
        except OSError as exc:
            log.debug("no v2 cgroup for %s: %s", name, exc)
        v1 = _own_cgroup_v1_memory()
        try:
            if v1 is not None:
                path = v1 / name
                path.mkdir(exist_ok=True)
                (path / "memory.limit_in_bytes").write_text(str(memory_bytes))
                self.path, self.version = path, 1
        except OSError as exc:
            log.debug("no v1 memory cgroup for %s: %s", name, exc)
            self.path = None

    def procs_file(self) -> str | None:
        return str(self.path / "cgroup.procs") if self.path else None

    def oom_killed(self) -> bool:
        """Whether the kernel hit this cgroup's limit (v2: an OOM kill; v1: a failed charge)."""
        if self._oom_at_removal is not None:
            return self._oom_at_removal
        if self.path is None:
            return False
        try:
            if self.version == 2:
                for line in (self.path / "memory.events").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key in ("oom_kill", "oom") and int(value) > 0:
                        return True
                return False
            return int((self.path / "memory.failcnt").read_text()) > 0
        except (OSError, ValueError):
            return False

    def remove(self) -> None:
        if self.path is None:
            return
        # The run's outcome is read after its cgroup is removed: a kill by the kernel at the limit (before the
        # watchdog saw the RSS pass it) must still read as out of memory, not as a stop from outside.
        self._oom_at_removal = self.oom_killed()
        for _ in range(50):  # the kernel frees the cgroup once its last process has been reaped
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


# ---------------------------------------------------------------- the process


def group_rss_bytes(pgid: int) -> int:
    """Resident memory of every process in process group `pgid`, from /proc (ranks included)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:  # fields after the command: state, ppid, pgrp, ... rss is the 22nd
                total += int(fields[21]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue
    return total


class LabRun:
    """One lab subprocess with its stdout progress, a bounded stderr tail, and its limits."""

    def __init__(
        self,
        cmd: list[str],
        cwd: Path,
        *,
        memory_bytes: int | None = None,
        nice: int = 0,
        cgroup: JobCgroup | None = None,
        env: dict | None = None,
        on_progress=None,
    ):
        self.memory_bytes = memory_bytes
        self.cgroup = cgroup
        self.memory_exceeded = False
        self.peak_rss = 0
        self.on_progress = on_progress
        procs = cgroup.procs_file() if cgroup else None

        def prepare() -> None:  # runs in the child between fork and exec
            try:
                ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            except OSError:
                pass
            if nice:
                os.nice(nice)
            if procs:
                try:
                    with open(procs, "w") as f:
                        f.write(str(os.getpid()))
                except OSError:
                    pass

        self.proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=dict(env if env is not None else os.environ, PYTHONUNBUFFERED="1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, so a timeout kills rank children too
            preexec_fn=prepare,
        )
        self.progress: Progress | None = None
        self.backend: str | None = None
        self.stderr_tail: deque[str] = deque(maxlen=40)
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        if memory_bytes:
            self._threads.append(threading.Thread(target=self._watch_memory, daemon=True))
        for t in self._threads:
            t.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None  # opened with stdout=PIPE
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict) and "fraction" in event:
                self.progress = Progress(float(event["fraction"]), str(event.get("message", "")))
            elif isinstance(event, dict) and event.get("event") == "start":
                self.backend = str(event.get("backend"))
                self.progress = Progress(0.0, f"running on {event.get('backend')}")
            else:
                continue
            if self.on_progress is not None:
                self.on_progress(self.progress)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None  # opened with stderr=PIPE
        for line in self.proc.stderr:
            self.stderr_tail.append(line.rstrip())

    def _watch_memory(self) -> None:
        assert self.memory_bytes is not None
        while self.proc.poll() is None:
            rss = group_rss_bytes(self.proc.pid)
            self.peak_rss = max(self.peak_rss, rss)
            if rss > self.memory_bytes:
                self.memory_exceeded = True
                self.kill(grace_s=0)
                return
            time.sleep(WATCH_S)

    def kill(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the whole group: SIGTERM, up to `grace_s` for the lab to clean up, then SIGKILL; then delete what it
        left on the host."""
        if grace_s > 0 and self._signal_group(signal.SIGTERM):
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        self._signal_group(signal.SIGKILL)  # the ranks too, even when the lab's own process has already gone
        self.proc.wait()
        self.release_host_state()

    def _signal_group(self, sig: signal.Signals) -> bool:
        try:
            os.killpg(self.proc.pid, sig)
            return True
        except ProcessLookupError:
            return False

    def release_host_state(self) -> list[str]:
        """Delete what the lab process left on the host (network namespaces and links), once its group is gone;
        the names deleted. Nothing is run when nothing is left (it reads /run/netns and /sys/class/net)."""
        try:
            gone = release_host_state(self.proc.pid)
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("lab process %s: could not delete what it left on the host: %s", self.proc.pid, exc)
            return []
        if gone:
            log.info("lab process %s left %s on the host; deleted", self.proc.pid, ", ".join(gone))
        return gone

    def join_readers(self) -> None:
        for t in self._threads:
            t.join(timeout=5)
        if self.cgroup is not None:
            self.cgroup.remove()
        self.release_host_state()

    def reason(self) -> str:
        lines = [ln for ln in self.stderr_tail if ln.strip()]
        return lines[-1] if lines else f"the lab exited with status {self.proc.returncode}"

    def _out_of_memory(self) -> bool:
        if self.memory_exceeded or (self.cgroup is not None and self.cgroup.oom_killed()):
            return True
        text = "\n".join(self.stderr_tail)
        # what torch and Python print when an allocation fails inside the limit
        return "MemoryError" in text or "can't allocate memory" in text or "std::bad_alloc" in text

    def outcome(self, out: Path) -> Outcome:
        code = self.proc.returncode
        if code == 0 and (out / "result.json").is_file():
            return Outcome(True, None, "finished")
        if code == exits.BAD_PARAMS:
            return Outcome(False, f"Bad parameters: {self.reason()}", "refused")
        if self.memory_bytes and self._out_of_memory():
            budget = self.memory_bytes / 2**20
            return Outcome(
                False,
                f"The lab ran out of its memory budget of {budget:.0f} MiB (the course's limit for one job) and was "
                f"stopped. Make the run smaller: fewer ranks or smaller sizes need less memory.",
                "out of memory",
            )
        if code == exits.STOPPED:  # a rank, not the lab's own process: the reason names it and the signal
            return Outcome(False, f"{self.reason()}, {_MOST_LIKELY}", "lost")
        if code is not None and code < 0:
            return signal_outcome(-code)
        return Outcome(False, f"The lab failed: {self.reason()}", "failed")


# A stop the course never sends a lab itself: its own kills (the memory watchdog, the time limit, a cancel, a
# worker's shutdown) are all told apart before `outcome` looks at the exit code, and a kill inside the job's
# own cgroup is "out of memory" above. Such a stop came from outside the run (labs/exits.py says which signals):
# not the learner's doing, so the attempt is lost, not charged. The lab's ranks are told the same way
# (labs/parallel/dist.py RankStopped, exit code exits.STOPPED).
_MOST_LIKELY = "most likely because the machine ran short of memory or was shutting down"


def signal_outcome(number: int) -> Outcome:
    """How a lab process that signal `number` ended went: lost (stopped from outside) or failed (crashed)."""
    sig = exits.signal_of(-number)
    if sig is None:
        return Outcome(False, f"The lab process was ended by signal {number}.", "failed")
    if sig in exits.EXTERNAL_STOPS:
        return Outcome(False, f"its process was stopped from outside the run ({sig.name}), {_MOST_LIKELY}", "lost")
    # SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE: the process crashed. Retrying would crash again, so it fails.
    return Outcome(
        False,
        f"The lab process crashed ({sig.name}, signal {number}): a fault in the lab's code or a library it calls, "
        f"not an error in your parameters' values. Tell your instructor this job's number.",
        "failed",
    )


def timed_out(limit_s: int) -> Outcome:
    return Outcome(False, f"The lab ran past its time limit of {limit_s} s and was stopped.", "timed out")
