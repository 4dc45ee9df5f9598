"""The embedded executor's GPUs: which of this host's GPUs each running job holds, so that with COURSE_WORKERS > 1
two GPU jobs never share a device (each lab sees only its own as cuda:0, cuda:1, ...).

A job asks for the GPUs the catalog declares for it (labs.catalog `resources(...).gpus`), the same count the Ray
executor asks Ray for (app/executors/ray_resources.py `need_for`). Each GPU is a lock file under `lock_dir`, held
with flock(2) by the worker process running the job:
- atomic across the host's workers (separate processes) and across threads, since flock locks belong to an open
  file, not to a process;
- released when the job finishes (`Claim.release`) and, without anyone's help, when the worker dies: the kernel
  drops a dead process's flock locks with its files (the lab itself dies with its worker, PR_SET_PDEATHSIG).
  A crashed worker's job is requeued by its lease (app/executors/supervise.py Reaper), its GPUs already free.
The files are named by the device id CUDA would be given, so two deployments on one host share the devices' locks.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_LOCK_DIR = Path(tempfile.gettempdir()) / "course-gpu-locks"


@dataclass
class Claim:
    """GPUs held for one job until `release` (or the holder's death)."""

    devices: list[str]  # what CUDA_VISIBLE_DEVICES is set to for the lab
    _fds: list[int] = field(default_factory=list, repr=False)

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)  # closing the only descriptor of the open file drops its flock
        self._fds = []


class GpuAllocator:
    """This host's `count` GPUs, handed out whole to one job at a time.

    `visible`: the worker's own CUDA_VISIBLE_DEVICES, if the host limits it (a container given GPUs 2,3): device i
    of the count is then that list's i-th id, which is what the lab's CUDA_VISIBLE_DEVICES must name."""

    def __init__(self, count: int, lock_dir: Path = DEFAULT_LOCK_DIR, visible: str | None = None):
        if count < 0:
            raise ValueError(f"count: got {count}, expected 0 or more GPUs")
        ids = [v.strip() for v in (visible or "").split(",") if v.strip()]
        self.devices = ids[:count] if len(ids) >= count else [str(i) for i in range(count)]
        self.lock_dir = lock_dir
        lock_dir.mkdir(parents=True, exist_ok=True)

    @property
    def count(self) -> int:
        return len(self.devices)

    def _path(self, device: str) -> Path:
        return self.lock_dir / f"gpu-{device}.lock"

    def _try(self, device: str) -> int | None:
        fd = os.open(self._path(device), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    def free(self) -> int:
        """How many GPUs no job holds right now (a hint for choosing work: `claim` decides)."""
        n = 0
        for device in self.devices:
            fd = self._try(device)
            if fd is not None:
                os.close(fd)
                n += 1
        return n

    def claim(self, n: int) -> Claim | None:
        """`n` GPUs held for one job, lowest free ids first; None (holding nothing) when fewer are free."""
        if n > self.count:
            return None
        got = Claim(devices=[])
        for device in self.devices:
            if len(got.devices) == n:
                break
            fd = self._try(device)
            if fd is not None:
                got.devices.append(device)
                got._fds.append(fd)
        if len(got.devices) < n:
            got.release()
            return None
        return got
