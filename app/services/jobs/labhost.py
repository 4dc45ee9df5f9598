"""What the lab workers of this host can run, learned once at start-up without importing torch here.

The embedded workers run on the same machine as the web server, so the server asks the labs package
about this machine in subprocesses (`python -m labs check` and `python -m labs probe`: both import
torch, which the web processes never do) and keeps the answer as a `HostCapacity` on app.state. Forms
and the API check every submission against it with the catalog's own rules, so a form never accepts a
run the job would refuse.

Without a probe (tests, `create_app()` on its own) the capacity is a cheap local default: CPU slots
from os.cpu_count(), no GPU.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from dataclasses import asdict, dataclass, replace

from labs.api import LabParams
from labs.catalog import BACKENDS, GPU_BACKENDS, Capacity, LabSpec, Problem

log = logging.getLogger(__name__)

# The environment variable through which `python -m app serve` hands its probe to the web processes it
# spawns, so N processes do not each import torch in a subprocess.
CAPACITY_ENV = "COURSE_HOST_CAPACITY"
# Importing torch and every runner takes a few seconds on a cold disk; far beyond that, something hangs.
SUBPROCESS_TIMEOUT_S = 300


class LabHostError(RuntimeError):
    """The labs cannot run here: a runner does not import, or the probe failed. The message says which and why."""


@dataclass(frozen=True)
class HostCapacity:
    """What one job can get on this host, and which backends it can run (best first)."""

    capacity: Capacity
    backends: tuple[str, ...]
    source: str  # "probe" (asked the labs) | "default" (no probe: CPU only)

    @classmethod
    def local_default(cls) -> HostCapacity:
        return cls(capacity=Capacity.local(gpus=0), backends=("cpu",), source="default")

    @classmethod
    def from_probe(cls, report: dict) -> HostCapacity:
        """From the JSON of `python -m labs probe` (labs/env.py `probe()`)."""
        device = report.get("device") or {}
        cuda = device.get("type") == "cuda"
        gpus = int(device.get("count") or 0) if cuda else 0
        backends = ["cpu"]
        if cuda:
            backends.insert(0, "torch-cuda")
            if (report.get("transformer_engine") or {}).get("available"):
                backends.insert(0, "te")
        return cls(capacity=Capacity.local(gpus=gpus), backends=tuple(backends), source="probe")

    def to_json(self) -> str:
        return json.dumps({"capacity": asdict(self.capacity), "backends": list(self.backends), "source": self.source})

    @classmethod
    def from_json(cls, text: str) -> HostCapacity:
        data = json.loads(text)
        return cls(capacity=Capacity(**data["capacity"]), backends=tuple(data["backends"]), source=data["source"])

    def with_time_limit(self, seconds: float) -> HostCapacity:
        """This capacity under the course's per-job time limit: the catalog then refuses a run whose estimate
        passes it (labs/timebudget.py)."""
        return replace(self, capacity=replace(self.capacity, time_limit_s=seconds))

    def resolve(self, spec: LabSpec, requested: str) -> str:
        """The backend a job of `spec` runs when `requested` (auto or a backend name) is asked for.

        `auto` is the best backend this host has; a named backend is kept (the lab's own fallback applied),
        and `spec.problems` then says why it cannot run here if the host lacks it.
        """
        best = next((b for b in BACKENDS if b in self.backends), "cpu")
        return spec.backend_for(best if requested == "auto" else requested)

    def problems(self, spec: LabSpec, params: LabParams, backend: str) -> list[Problem]:
        """The catalog's reasons this run cannot go ahead here, plus a GPU backend this host lacks."""
        out = spec.problems(params, backend, self.capacity)
        if backend in GPU_BACKENDS and self.capacity.gpus and backend not in self.backends:
            out.append(
                Problem(
                    "backend",
                    f"backend: {backend} needs Transformer Engine, which this host lacks; "
                    f"available: {', '.join(self.backends)}",
                )
            )
        return out


def _run_labs(python: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        return subprocess.run(
            [python, "-m", "labs", *args], capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabHostError(f"`python -m labs {' '.join(args)}` could not run: {exc}") from None


def check_labs(python: str) -> None:
    """Import every lab's runner in a subprocess; LabHostError naming each lab that fails and why."""
    out = _run_labs(python, "check")
    if out.returncode != 0:
        lines = [ln for ln in out.stderr.splitlines() if ln.startswith("lab ")]
        raise LabHostError("\n".join(lines) or out.stderr.strip()[-2000:] or f"exit status {out.returncode}")
    log.info("every lab runner imports")


def probe(python: str) -> HostCapacity:
    """Ask `python -m labs probe` about this host; LabHostError if it cannot answer."""
    out = _run_labs(python, "probe")
    if out.returncode != 0:
        raise LabHostError(f"`python -m labs probe` failed: {out.stderr.strip()[-2000:]}")
    try:
        host = HostCapacity.from_probe(json.loads(out.stdout))
    except (ValueError, KeyError, TypeError) as exc:
        raise LabHostError(f"`python -m labs probe` printed something unexpected: {exc}") from None
    log.info(
        "lab host: backends %s; %d CPU rank slots, %d GPU(s), per-job memory %d MiB",
        ", ".join(host.backends),
        host.capacity.cpu_slots,
        host.capacity.gpus,
        host.capacity.memory_bytes // 2**20,
    )
    return host


def from_environment() -> HostCapacity | None:
    """The capacity the serving parent probed and handed down, if any."""
    raw = os.environ.get(CAPACITY_ENV)
    return HostCapacity.from_json(raw) if raw else None
