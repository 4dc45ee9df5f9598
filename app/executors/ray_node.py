"""The Ray side of a lab run, on a node: the task that runs `python -m labs run` and streams its outcome back,
and what a node tells the cluster about itself.

    python -m app ray-node-flags    # on a GPU host: the `ray start` flags that advertise what its labs can do
    python -m app ray-node-health   # 0 if a raylet runs here and the head answers (compose health check)

Nothing here opens a database connection: GPU hosts share neither disk nor database with the web tier. The
dispatcher that submits these tasks is app/executors/ray.py, which also names the Ray version and the source
each call was checked against.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.core.config import Settings
from app.executors.labproc import LAB_NICE, JobCgroup, LabRun, Outcome, lab_command, lab_env, lab_threads, timed_out
from app.services import bundles
from app.services.cluster import LABEL_PREFIX, TE_RESOURCE
from labs.api import MIB, MIN_CPU_SLOTS

log = logging.getLogger(__name__)

NODE_DATA_ENV = "COURSE_NODE_DATA_DIR"  # where a node writes lab output before zipping it (default: a temp dir)


# ---------------------------------------------------------------- on the node


def _zip_dir(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                zf.write(path, path.relative_to(folder).as_posix())
    return buf.getvalue()


def run_lab_on_node(spec: dict) -> Iterator[dict]:
    """The body of the Ray task: placement, then progress events, then {"event": "end", ...} with the zip.

    `spec`: job id, attempt, lab, params, backend, time limit. Runs in a Ray worker process on the node; the lab is
    its child (PR_SET_PDEATHSIG), so it dies with the worker when Ray kills it or the node goes.
    """
    import ray

    # The memory budget is this node's own (its COURSE_JOB_MEMORY_MB, else a share of its own memory), not the
    # dispatcher's: a GPU host sized for GPU labs must not be held to the dispatcher host's default. The Ray worker
    # inherits the environment `ray start` ran with here, which `ray-node-flags` checked and advertised, and
    # `python -m labs run`'s up-front check on this node reads the same variable (labs.resources.Capacity.local).
    memory_bytes = Settings.from_env(signs_sessions=False).job_memory_bytes
    ctx = ray.get_runtime_context()
    base = Path(os.environ.get(NODE_DATA_ENV) or tempfile.gettempdir()) / "course-node"
    out = base / f"job-{spec['job_id']}-attempt-{spec['attempt']}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    yield {
        "event": "placed",
        "node_id": ctx.get_node_id(),
        "hostname": socket.gethostname(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        "worker_pid": os.getpid(),
        "memory_limit_bytes": memory_bytes,  # in the job's placement, so an "out of memory" can be read against it
        "at": time.time(),
    }
    cmd = lab_command(sys.executable, lab=spec["lab"], params=spec["params"], out=out, backend=spec["backend"])
    cgroup = JobCgroup(f"course-job-{spec['job_id']}-{spec['attempt']}", memory_bytes)
    # The task's num_cpus are the job's CPU slots (ray_resources.need_for); a cpu job must not see the node's GPUs,
    # which Ray leaves visible to a task granted none (labproc.lab_env says where in Ray's source), and a GPU job
    # keeps the CUDA_VISIBLE_DEVICES Ray set to its grant.
    cpus = float(ctx.get_assigned_resources().get("CPU") or 1)
    threads = lab_threads(backend=spec["backend"], ranks=int(spec.get("ranks") or 1), cpu_slots=cpus)
    env = lab_env(os.environ, backend=spec["backend"], threads=threads)
    # niced as on the web host: with `ray start --head` on the web host offering CPUs (bare metal), a lab must not
    # starve page loads there either; on a dedicated node it costs nothing
    run = LabRun(cmd, cwd=out, memory_bytes=memory_bytes, nice=LAB_NICE, cgroup=cgroup, env=env)
    yield {
        "event": "lab",
        "pid": run.proc.pid,
        "lab_cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "threads": threads,
        "at": time.time(),
    }
    deadline = time.monotonic() + spec["time_limit_s"]
    outcome: Outcome | None = None
    last = None
    try:
        while run.proc.poll() is None:
            time.sleep(0.2)
            if run.progress is not last and run.progress is not None:
                last = run.progress
                yield {"event": "progress", "fraction": last.fraction, "message": last.message}
            if time.monotonic() > deadline:
                run.kill()
                outcome = timed_out(spec["time_limit_s"])
        run.join_readers()
        outcome = outcome or run.outcome(out)
        data = _zip_dir(out) if outcome.ok else None
        if data is not None and len(data) > bundles.MAX_UPLOAD_BYTES:
            mb = bundles.MAX_UPLOAD_BYTES // 2**20
            outcome = Outcome(
                False, f"The lab's output is {len(data) / 2**20:.1f} MB zipped; at most {mb} MB.", "failed"
            )
            data = None
        yield {
            "event": "end",
            "ok": outcome.ok,
            "error": outcome.error,
            "message": outcome.message,
            "zip": data,
            "at": time.time(),
        }
    finally:
        if run.proc.poll() is None:  # cancelled (KeyboardInterrupt) or the consumer went away: no orphan lab
            run.kill()
        shutil.rmtree(out, ignore_errors=True)


_remote: Any = None


def remote_task() -> Any:
    """The Ray remote function, made once per process (importing this module must not need Ray)."""
    global _remote
    if _remote is None:
        import ray

        _remote = ray.remote(num_returns="streaming", max_retries=0)(run_lab_on_node)
    return _remote


# ---------------------------------------------------------------- node capabilities


def node_flags(report: dict, *, job_memory_bytes: int) -> list[str]:
    """`ray start` flags for a node, from its `python -m labs probe` report (labs/env.py `probe()`).

    CPUs: as many rank slots as the catalog allows a CPU job (max(4, cores): ranks share cores), so a CPU job Ray
    accepts is one the labs accept. GPUs: the CUDA devices the probe counted. `course_te_gpu`: one per GPU where
    Transformer Engine's FP8 works, which `te` jobs ask for. Labels: what the instructor page shows, and
    `job_memory_mb`, the per-job budget this node enforces (its Settings, as run_lab_on_node reads them), which the
    dispatcher sizes a task's Ray memory request by.
    """
    device = report.get("device") or {}
    cuda = device.get("type") == "cuda"
    gpus = int(device.get("count") or 0) if cuda else 0
    cpus = max(MIN_CPU_SLOTS, int(device.get("cpu_count") or os.cpu_count() or 1))
    recipes = [name for name, r in (report.get("fp8_recipes") or {}).items() if r.get("supported")]
    te = bool((report.get("transformer_engine") or {}).get("available")) and bool(recipes) and gpus > 0
    labels = {
        "te": "yes" if te else "no",
        "cc": str(device.get("compute_capability") or "none"),
        "fp8": ".".join(recipes) or "none",
        "gpus": str(gpus),
        "torch": str((report.get("versions") or {}).get("torch") or "none").replace("+", "_"),
        "job_memory_mb": str(job_memory_bytes // MIB),
    }
    flags = [f"--num-cpus={cpus}", f"--num-gpus={gpus}"]
    if te:
        flags.append("--resources=" + json.dumps({TE_RESOURCE: gpus}, separators=(",", ":")))
    flags.append("--labels=" + ",".join(f"{LABEL_PREFIX}{k}={v}" for k, v in labels.items()))
    return flags


def node_flags_main(settings: Settings) -> int:
    out = subprocess.run([settings.python, "-m", "labs", "probe"], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        print(f"`python -m labs probe` failed: {out.stderr.strip()[-2000:]}", file=sys.stderr)
        return 1
    # no spaces or quotes in any flag, so `ray start ... $(python -m app ray-node-flags)` splits them right
    print(" ".join(node_flags(json.loads(out.stdout), job_memory_bytes=settings.job_memory_bytes)))
    return 0


def node_health_main() -> int:
    """`python -m app ray-node-health`: 0 if a raylet runs in this container and the head (RAY_ADDRESS) answers."""
    raylet = False
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"raylet" in (entry / "cmdline").read_bytes().split(b"\0")[0]:
                raylet = True
                break
        except OSError:
            continue
    if not raylet:
        print("no raylet runs here", file=sys.stderr)
        return 1
    host, _, port = os.environ.get("RAY_ADDRESS", "127.0.0.1:6379").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except (OSError, ValueError) as exc:
        print(f"the Ray head at {host}:{port} does not answer: {exc}", file=sys.stderr)
        return 1
    return 0
