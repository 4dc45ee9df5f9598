"""Start one process per rank, run a function in each, and bring back what it returns.

    from labs.parallel.dist import launch
    results = launch(my_rank_fn, world_size=4, args=(cfg,), device="cpu", timeout_s=120)

    # in a lab's run(params, ctx): my_rank_main(rank, world, params_dict, device, out_dir) in params.ranks processes
    per_rank = run_ranks(ctx, my_rank_main, params, str(ctx.out_dir), world=params.ranks)

Each rank is a fresh `spawn`ed Python process (fork is unsafe once torch has started threads).
On CPU the ranks talk over gloo with one intra-op thread each, so a rank's timings are not inflated by
its own thread pool fighting the other ranks; on GPU rank r owns cuda:r and talks over NCCL. The
ranks rendezvous through a FileStore in a private temporary directory, so there is no port to race for.

Failure handling, because a distributed job must never hang the worker that started it:
- a rank that raises: its traceback comes back, the other ranks (probably stuck in a collective
  waiting for it) are terminated, and `RankFailed` names the rank and the error;
- a rank that dies without a word: `RankFailed` with its exit code or the signal it crashed with
  (SIGSEGV), or `RankStopped` when a signal from outside stopped it (SIGKILL from the machine's OOM killer);
- ranks still running at `timeout_s`: all are terminated and `RankTimeout` names the missing ranks;
- the parent dying: each child asked Linux to SIGKILL it when its parent goes (PR_SET_PDEATHSIG).
In every case all children are joined before `launch` returns or raises: no stray processes.
"""

from __future__ import annotations

import os
import pickle
import queue
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from labs import exits
from labs.resources import MIN_CPU_SLOTS, cpu_slots_why, gpu_slots_why

if TYPE_CHECKING:
    from labs.runtime import LabContext


def cpu_slots() -> int:
    return max(MIN_CPU_SLOTS, os.cpu_count() or 1)


def slots_explained(device: str) -> tuple[int, str]:
    """(how many ranks fit, the sentence that says why) for device 'cpu' or 'cuda'."""
    if device == "cuda":
        import torch

        n = torch.cuda.device_count()
        return n, gpu_slots_why(n)
    return cpu_slots(), cpu_slots_why(os.cpu_count() or 1)


def check_world_size(world_size: int, device: str, *, field: str = "degree") -> str | None:
    """None if `world_size` ranks fit on this machine, else a message naming what is available."""
    n, why = slots_explained(device)
    if world_size > n:
        return f"{field}: {world_size} ranks need {world_size} devices but this machine has {why}; use {field} <= {n}"
    return None


class RankFailed(RuntimeError):
    def __init__(self, rank: int, detail: str, message: str | None = None):
        self.rank = rank
        self.detail = detail
        super().__init__(message or f"rank {rank} failed: {detail}")


class RankStopped(RankFailed):
    """A rank ended by a signal from outside the run (labs/exits.py EXTERNAL_STOPS): the machine's doing, not
    the lab's. `python -m labs run` exits with exits.STOPPED for it, so the course requeues the attempt."""

    def __init__(self, rank: int, signal_name: str):
        detail = f"process was stopped from outside the run ({signal_name})"
        super().__init__(rank, detail, f"rank {rank}'s {detail}")


def _silent_exit(rank: int, exitcode: int) -> RankFailed:
    """Why a rank that ended without reporting ended: stopped from outside, crashed, or an exit code."""
    sig = exits.signal_of(exitcode)
    if sig in exits.EXTERNAL_STOPS:
        return RankStopped(rank, sig.name)
    if sig is not None:
        return RankFailed(rank, f"process crashed ({sig.name}) without reporting")
    return RankFailed(rank, f"process exited with code {exitcode} without reporting")


class RankTimeout(RuntimeError):
    def __init__(self, missing: list[int], timeout_s: float):
        self.missing = missing
        super().__init__(
            f"ranks {missing} did not finish within {timeout_s:g} s (hung or too slow); all ranks were stopped"
        )


def _die_with_parent() -> None:
    """Linux only: have the kernel SIGKILL this process if the launching process dies."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:
        pass  # best effort; the parent's own cleanup still joins or kills us


def _rank_entry(rank, world_size, fn, args, store_path, device, timeout_s, parent_pid, results) -> None:
    _die_with_parent()
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
    try:
        import torch
        import torch.distributed as dist

        from labs import precision

        if device == "cuda":
            torch.cuda.set_device(rank)
        else:
            torch.set_num_threads(1)  # one core's worth per rank; see module docstring
        pinned = precision.pin()  # FP32 as IEEE FP32 in every rank, whatever the image set (labs/precision.py)
        store = dist.FileStore(store_path, world_size)
        dist.init_process_group(
            store=store,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
            **init_options(rank, device),
        )
        value = fn(rank, world_size, *args)
    except BaseException as exc:  # noqa: BLE001  (report everything, including KeyboardInterrupt)
        # Report before tearing down: tearing down closes our sockets, and the peers' resulting
        # "connection closed" errors must not arrive ahead of the real cause.
        tb = traceback.format_exc(limit=8)
        results.put(("error", rank, f"{type(exc).__name__}: {exc}\n{tb}"))
        return
    finally:
        _destroy_group()
    # Plain pickle to bytes: torch.multiprocessing would otherwise pass tensors as shared-memory
    # handles that die with this process, which is about to exit.
    results.put(("ok", rank, pickle.dumps((value, pinned))))


def init_options(rank: int, device: str) -> dict[str, Any]:
    """init_process_group's backend, and on CUDA the rank's device_id.

    device_id binds the default group to cuda:rank and connects its NCCL communicator at once, and every later
    `new_group` then creates its communicator at creation, split from that one, rather than on its first
    collective, which would otherwise be a timed step's (torch 2.13.0 torch/distributed/distributed_c10d.py:
    `_new_process_group_helper` takes `split_from` when the default group has a `bound_device_id`, and calls
    `eager_connect_single_device(device_id)`)."""
    if device == "cuda":
        import torch

        return {"backend": "nccl", "device_id": torch.device("cuda", rank)}
    return {"backend": "gloo"}


def _destroy_group() -> None:
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:
        pass


# Errors a rank sees because a *peer* failed; the peer's own error is the one worth showing.
_SECONDARY = (
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "Timed out",
    "NCCL communicator was aborted",
)


def _primary_error(errors: dict[int, str]) -> tuple[int, str]:
    for rank in sorted(errors):
        if not any(marker in errors[rank] for marker in _SECONDARY):
            return rank, errors[rank]
    rank = min(errors)
    return rank, errors[rank]


def launch(
    fn: Callable[..., Any],
    world_size: int,
    *,
    args: tuple = (),
    device: str = "cpu",
    timeout_s: float = 300.0,
    on_rank_done: Callable[[int], None] | None = None,
    states: dict[int, dict] | None = None,
) -> list[Any]:
    """Run `fn(rank, world_size, *args)` in `world_size` processes; return the values in rank order.

    `fn` and `args` must be picklable (a module-level function). `states`, when given, receives each rank's FP32
    precision as it read it back after pinning (labs.precision.state). Raises RankFailed or RankTimeout.
    """
    import torch.multiprocessing as mp

    problem = check_world_size(world_size, device, field="world_size")
    if problem:
        raise ValueError(problem)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    tmp = tempfile.mkdtemp(prefix="labs-dist-")
    store_path = os.path.join(tmp, "store")
    procs = [
        ctx.Process(
            target=_rank_entry,
            args=(r, world_size, fn, args, store_path, device, timeout_s, os.getpid(), results),
            name=f"labs-rank-{r}",
            daemon=True,
        )
        for r in range(world_size)
    ]
    values: dict[int, Any] = {}
    deadline = time.monotonic() + timeout_s
    try:
        for p in procs:
            p.start()
        while len(values) < world_size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RankTimeout(sorted(set(range(world_size)) - set(values)), timeout_s)
            try:
                status, rank, value = results.get(timeout=min(0.2, remaining))
            except queue.Empty:
                for r, p in enumerate(procs):
                    # Exited without reporting: killed by a signal or os._exit. Give the queue a beat
                    # in case its message is still in flight, then call it.
                    if r not in values and p.exitcode is not None and p.exitcode != 0:
                        time.sleep(0.2)
                        if results.empty():
                            raise _silent_exit(r, p.exitcode) from None
                continue
            if status == "error":
                errors = {rank: value}
                settle = time.monotonic() + 1.0  # let the other ranks' errors arrive, then pick the cause
                while time.monotonic() < settle:
                    try:
                        status2, rank2, value2 = results.get(timeout=0.1)
                    except queue.Empty:
                        continue
                    if status2 == "error":
                        errors[rank2] = value2
                # A rank that died without a word while a peer reported an error (often the peer's "connection
                # closed" as it still connected to the dead one) is the likelier cause: it competes too.
                silent = {
                    r: _silent_exit(r, p.exitcode)
                    for r, p in enumerate(procs)
                    if r not in errors and r not in values and p.exitcode not in (None, 0)
                }
                stopped = [e for e in silent.values() if isinstance(e, RankStopped)]
                if stopped:  # the machine stopped a rank; the peers' errors are its fallout
                    raise stopped[0]
                errors.update({r: e.detail for r, e in silent.items()})
                raise RankFailed(*_primary_error(errors))
            values[rank], pinned = pickle.loads(value)
            if states is not None:
                states[rank] = pinned
            if on_rank_done is not None:
                on_rank_done(rank)
        for p in procs:
            p.join(timeout=max(1.0, deadline - time.monotonic()))
        return [values[r] for r in range(world_size)]
    finally:
        _stop_all(procs)
        results.close()
        results.join_thread()
        shutil.rmtree(tmp, ignore_errors=True)


class RankedParams(Protocol):
    """What `run_ranks` reads of a multi-rank lab's Params (labs/params.py rank_timeout_field)."""

    rank_timeout_s: int

    def model_dump(self) -> dict[str, Any]: ...


def run_ranks(
    ctx: LabContext,
    rank_main: Callable[..., Any],
    params: RankedParams,
    *args: Any,
    world: int,
    what: str | None = "rank processes",
    then: str = "",
    finished_at: float = 0.7,
    finished: str = "rank {rank} finished",
) -> list[Any]:
    """The launch a multi-rank lab's run() makes: `world` processes of `rank_main(rank, world, params_dict, device,
    *args)` on the run's device (ctx.device), stopped after params.rank_timeout_s; what each returned, in rank order.

    Progress says "starting {world} {what} on {device}{then}" as they start (what=None: the lab said it already),
    and `finished` (formatted with the rank) as each rank finishes, at `finished_at` of the run. Raises as `launch`.
    """
    device = ctx.device
    if what is not None:
        ctx.progress(0.05, f"starting {world} {what} on {device}{then}")
    states: dict[int, dict] = {}
    values = launch(
        rank_main,
        world,
        args=(params.model_dump(), device, *args),
        device=device,
        timeout_s=params.rank_timeout_s,
        on_rank_done=lambda r: ctx.progress(finished_at, finished.format(rank=r)),
        states=states,
    )
    ctx.environment["precision"] = ranks_precision(states)
    return values


def ranks_precision(states: dict[int, dict]) -> dict:
    """The precision the ranks ran in, for result.json: their common state, or where they differ the lowest rank
    whose FP32 matmuls ran in TF32 (the run is as precise as its least precise rank)."""
    ordered = [states[r] for r in sorted(states)]
    worst = next((s for s in ordered if s["fp32_matmul"] != "ieee"), ordered[0])
    return worst | {"checked_in": "every rank"}


def _stop_all(procs) -> None:
    procs = [p for p in procs if p.pid is not None]  # never started: nothing to stop
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=3)
        if p.is_alive():
            p.kill()
            p.join(timeout=3)
