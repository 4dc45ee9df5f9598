"""The Ray side of a lab run, on a node: the task that runs `python -m labs run` and streams its outcome back,
and what a node tells the cluster about itself.

    python -m app ray-node-flags    # on a GPU host: the `ray start` flags that advertise what its labs can do
    python -m app ray-node-health   # 0 if this node's raylet runs and the cluster lists it ALIVE (compose)

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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.config import Settings
from app.executors import ray_fence as fence
from app.executors.labproc import LAB_NICE, JobCgroup, LabRun, Outcome, lab_command, lab_env, lab_threads, timed_out
from app.services.cluster.nodes import LABEL_PREFIX, TE_RESOURCE
from app.services.jobs import bundles
from labs import catalog
from labs.api import MIB, MIN_CPU_SLOTS, byte_size

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

    `spec`: job id, attempt, lab, params, backend, time limit, and the dispatcher's lease tenure it runs under
    (app/executors/ray_fence.py: the task stops its lab once that tenure is over). Runs in a Ray worker process on
    the node; the lab is its child (PR_SET_PDEATHSIG), so it dies with the worker when Ray kills it or the node goes.
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
    fenced = spec.get("lease") is not None  # the dispatcher's tenure (ray_fence); absent: nothing to watch
    marker = {
        "state": "running",
        "node_id": ctx.get_node_id(),
        "hostname": socket.gethostname(),
        "task_id": ctx.get_task_id(),
        "worker_pid": os.getpid(),
        "worker_start": fence.process_start(os.getpid()),
        **(spec.get("lease") or {}),
    }
    try:
        if fenced:
            fence.write_marker(spec["job_id"], spec["attempt"], marker)  # before the lease is read: ray_fence says why
        yield {
            "event": "placed",
            "node_id": ctx.get_node_id(),
            "hostname": socket.gethostname(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "worker_pid": os.getpid(),
            "task_id": marker["task_id"],  # Ray's id of this attempt's task
            "memory_limit_bytes": memory_bytes,  # in the job's placement, so an "out of memory" can be read against it
            "at": time.time(),
        }
        yield from _run(spec, out, memory_bytes, ctx, marker, fenced)
    finally:
        shutil.rmtree(out, ignore_errors=True)
        if fenced:
            try:
                fence.write_marker(spec["job_id"], spec["attempt"], {**marker, "state": "ended"})
            except Exception:  # the GCS is away: a dispatcher's probe closes the marker instead
                log.warning(
                    "job %s attempt %s: could not mark it ended", spec["job_id"], spec["attempt"], exc_info=True
                )


def _lost(error: str) -> dict:
    return {"event": "end", "ok": False, "error": error, "message": "lost", "zip": None, "at": time.time()}


def _run(spec: dict, out: Path, memory_bytes: int, ctx: Any, marker: dict, fenced: bool) -> Iterator[dict]:
    refused = budget_refusal(spec, memory_bytes, _advertised_mb(ctx))
    if refused is not None:  # the lab would refuse it as the learner's error; the course sent it to the wrong node
        yield {
            "event": "end",
            "ok": False,
            "error": refused.error,
            "message": refused.message,
            "zip": None,
            "at": time.time(),
        }
        return
    watch = fence.Watch(spec["lease"], spec.get("fence_after_s") or 10.0) if fenced else None
    stale = watch.stale(now=True) if watch else None
    if stale is not None:  # submitted by a dispatcher that has lost its lease since: no lab starts under it
        yield _lost(f"this attempt did not start: {stale}")
        return
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
    if fenced:  # the lab's pid and start time: what a dispatcher's probe kills if this task cannot
        marker.update(lab_pid=run.proc.pid, lab_start=fence.process_start(run.proc.pid))
        fence.write_marker(spec["job_id"], spec["attempt"], marker)
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
            elif watch is not None and (stale := watch.stale()) is not None:
                run.kill()  # another attempt may start as soon as this one's marker says ended
                outcome = Outcome(False, f"this attempt was stopped: {stale}", "lost")
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


def _advertised_mb(ctx: Any) -> str | None:
    """This node's `job_memory_mb` label as Ray holds it (Ray 2.60 `RuntimeContext.get_node_labels`, read from the
    GCS's node info in ray/_private/node.py: label name to string); None when Ray cannot say."""
    try:
        value = (ctx.get_node_labels() or {}).get(f"{LABEL_PREFIX}job_memory_mb")
    except Exception:  # the label only sharpens a message; the task must run without it
        return None
    if isinstance(value, list):
        value = value[0] if value else None
    return None if value is None else str(value)


def budget_refusal(spec: dict, memory_bytes: int, advertised_mb: str | None = None) -> Outcome | None:
    """A run this node's per-job memory budget cannot hold, as a lost attempt (requeued, never charged): the web tier
    and the dispatcher size runs by the budget each node advertises (its `job_memory_mb` label), so a run that
    reaches a node too small for it is the course's mistake, not the learner's. `python -m labs run` would refuse it
    with exit 2, "bad parameters", which the learner would be charged for. None when it fits, or when the
    parameters do not validate (the lab then refuses them itself, naming the field).

    `advertised_mb`: this node's `job_memory_mb` label. When it differs from the budget the node enforces, the node
    was started with a budget the label did not see (`COURSE_JOB_MEMORY_MB=N ray start ... $(python -m app
    ray-node-flags)`: the shell expands the flags before the assignment applies), and the message says so, since
    every run between the two budgets will land here until the node is restarted."""
    try:
        lab = catalog.get(spec["lab"])
        need = lab.resources(lab.params.model_validate(spec["params"]), spec["backend"]).memory_bytes
    except Exception:
        return None
    if need <= memory_bytes:
        return None
    label_mismatch = ""
    if advertised_mb is not None and advertised_mb != str(memory_bytes // MIB):
        label_mismatch = (
            f" (its label advertises {advertised_mb} MiB per job, but it enforces {memory_bytes // MIB} MiB, from "
            "the environment its `ray start` ran in: restart the node with COURSE_JOB_MEMORY_MB exported before "
            "`ray start ... $(python -m app ray-node-flags)`, as docs/deploying.md says)"
        )
    return Outcome(
        False,
        f"node {socket.gethostname()} allows {byte_size(memory_bytes)} per job and this run needs about "
        f"{byte_size(need)}, which the course should have seen before sending it there{label_mismatch}",
        "lost",
    )


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


@dataclass(frozen=True)
class Raylet:
    pid: int
    node_id: str  # hex, as the GCS and ray.nodes() name the node
    gcs_address: str  # host:port of the head the raylet joined
    head: bool
    lab_labels: bool  # started with the course's labels (`ray-node-flags`): a node that runs labs


def raylets() -> list[Raylet]:
    """The raylet processes on this host, read from their command lines (Ray 2.60 starts each with --node_id,
    --gcs-address, --labels as JSON, and --head on the head: ray/_private/services.py `start_raylet`)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if not argv or Path(argv[0]).name != "raylet":
            continue
        flags = dict(a[2:].split("=", 1) for a in argv[1:] if a.startswith("--") and "=" in a)
        if flags.get("node_id") and flags.get("gcs-address"):
            try:
                labels = json.loads(flags.get("labels") or "{}")
            except ValueError:
                labels = {}
            ours = isinstance(labels, dict) and any(str(k).startswith(LABEL_PREFIX) for k in labels)
            out.append(Raylet(int(entry.name), flags["node_id"], flags["gcs-address"], "--head" in argv, ours))
    return out


def _started_with(pid: int, name: str, value: str) -> bool:
    """Whether process `pid` runs with environment variable `name` set to `value` (what its `ray start` had)."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{name}={value}".encode() in env


def this_nodes_raylets(env: Mapping[str, str]) -> tuple[list[Raylet], list[Raylet]]:
    """(this node's raylets, the head's) on this host. A lab node is a raylet without --head, or a head started with
    the course's labels (a one-host trial whose head runs labs): the head of a bare-metal install, started with no
    labels, may run on the same host and is no lab node. Where COURSE_NODE_DATA_DIR is set, as on every lab node
    (docker-compose.yml, docs/deploying.md), only the raylet whose `ray start` ran with the same value is this
    node's, so a second node on the host (or another cluster's) does not answer for it."""
    found = raylets()
    mine = [r for r in found if not r.head or r.lab_labels]
    heads = [r for r in found if r not in mine]
    data_dir = env.get(NODE_DATA_ENV)
    if data_dir:
        mine = [r for r in mine if _started_with(r.pid, NODE_DATA_ENV, data_dir)]
    return mine, heads


def node_state(gcs_address: str, node_id: str) -> str:
    """ALIVE or DEAD as the cluster's GCS lists `node_id`, or "unknown to the cluster"; OSError/RuntimeError when
    the head does not answer. The head is probed with a plain TCP connect first (ray_health.not_a_ray_head), since
    a GcsClient waits in C++ for a head that is not there."""
    from app.executors.ray_health import head_address, not_a_ray_head, token_missing

    missing = token_missing()  # a GcsClient would abort this process instead of raising
    if missing is not None:
        raise RuntimeError(missing)
    where = head_address(gcs_address)
    if where is not None:
        why = not_a_ray_head(where)
        if why is not None:
            raise RuntimeError(why)
    # Ray 2.60: python/ray/includes/gcs_client.pxi, get_all_node_info (compiled: no type stubs)
    from ray._raylet import GcsClient  # type: ignore[attr-defined]
    from ray.core.generated.gcs_pb2 import GcsNodeInfo  # type: ignore[attr-defined]

    infos = GcsClient(address=gcs_address).get_all_node_info(timeout=5)
    for key, info in infos.items():
        if key.hex() == node_id:
            return "ALIVE" if info.state == GcsNodeInfo.GcsNodeState.ALIVE else "DEAD"
    return "unknown to the cluster"


def node_health_main() -> int:
    """`python -m app ray-node-health`: 0 if this node's raylet runs here and the cluster's GCS lists its node id
    ALIVE; 1 with the reason otherwise (no raylet of this node, the head does not answer, or the node is DEAD in
    the cluster's view although a raylet process remains, as when it hangs)."""
    mine, heads = this_nodes_raylets(os.environ)
    if not mine:
        data_dir = os.environ.get(NODE_DATA_ENV)
        which = f" ({NODE_DATA_ENV}={data_dir})" if data_dir else ""
        others = f"; the head's raylet (pid {heads[0].pid}) runs here but runs no labs" if heads else ""
        print(f"no raylet of this lab node runs here{which}{others}", file=sys.stderr)
        return 1
    for r in mine:
        try:
            state = node_state(r.gcs_address, r.node_id)
        except Exception as exc:  # OSError, RuntimeError, or Ray's own (an AuthenticationError names the token)
            print(f"the Ray head at {r.gcs_address} does not answer this node: {exc}", file=sys.stderr)
            return 1
        if state != "ALIVE":
            print(
                f"this node (raylet pid {r.pid}, node id {r.node_id}) is {state} in the view of the cluster at "
                f"{r.gcs_address}",
                file=sys.stderr,
            )
            return 1
        print(f"node {r.node_id} (raylet pid {r.pid}) is ALIVE in the cluster at {r.gcs_address}")
    return 0
