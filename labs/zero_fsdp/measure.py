"""What a rank holds and moves, counted from its tensors and its collectives (torch imported lazily).

Bytes held: every parameter, gradient and optimizer-state tensor the rank holds, counted by numel x element
size; an FSDP2 parameter is a DTensor whose local shard (`to_local()`) is what this rank stores.

Bytes moved: `CollectiveRecorder`, a TorchDispatchMode (as torch/distributed/tensor/debug/_comm_mode.py
CommDebugMode @ v2.13 counts collectives, but keeping each one's buffer size and timing) sees every c10d
collective the rank issues through the dispatcher: FSDP2's all-gathers and reduce-scatters, ZeRO's
broadcasts and DDP's bucket all-reduces (its C++ Reducer calls ProcessGroup::allreduce, which dispatches
c10d::allreduce_, so the mode sees it: checked on gloo with torch 2.13). A collective's bytes are its full
buffer: the all-gather's output, the reduce-scatter's input, the all-reduce's and broadcast's tensor.

Timeline on CPU: the mode also times every other op the rank's thread runs; those intervals, merged, are the
compute lane. A collective's span runs from its launch to the completion of its Work (a callback on the
Work's future, stamped on gloo's thread), and the wait lane is the time the rank's thread ran no op while a
collective of its own was in flight. On CUDA the CPU times of launches say nothing about the GPU, so run.py
takes the spans from profiler kernels instead (labs.trace.kernels).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import torch
from torch.distributed.tensor import DTensor as _DTensor
from torch.utils._python_dispatch import TorchDispatchMode

c10d = torch.ops.c10d
# c10d's in-place collectives (the set CommDebugMode counts, torch 2.13), by the name the course uses.
KINDS = {
    c10d._allgather_base_: "all-gather",
    c10d.allgather_: "all-gather",
    c10d.allgather_coalesced_: "all-gather",
    c10d.allgather_into_tensor_coalesced_: "all-gather",
    c10d._reduce_scatter_base_: "reduce-scatter",
    c10d.reduce_scatter_: "reduce-scatter",
    c10d.reduce_scatter_tensor_coalesced_: "reduce-scatter",
    c10d.allreduce_: "all-reduce",
    c10d.allreduce_coalesced_: "all-reduce",
    c10d.broadcast_: "broadcast",
    c10d.reduce_: "reduce",
    c10d.alltoall_: "all-to-all",
    c10d.alltoall_base_: "all-to-all",
}
# Which argument holds the collective's full buffer (see the module docstring).
_FULL_ARG = {"all-gather": 0, "reduce-scatter": 1}


def nbytes(x) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(nbytes(y) for y in x)
    return 0


def local_bytes(t) -> int:
    """Bytes this rank stores for `t`: a DTensor's local shard, or the tensor itself."""
    from torch.distributed.tensor import DTensor

    if t is None:
        return 0
    return nbytes(t.to_local() if isinstance(t, DTensor) else t)


class CollectiveRecorder(TorchDispatchMode):
    """Collectives (kind, bytes, launch, completion) and, when `time_ops`, the other ops' intervals.

    `phase` names what the rank is doing (forward, backward, optimizer step) and labels both; `paused` hides the
    lab's own bookkeeping (counting bytes runs a few aten ops) from the compute lane.
    """

    def __init__(self, *, time_ops: bool):
        super().__init__()
        self.time_ops = time_ops
        self.phase = "setup"
        self.paused = False
        self.collectives: list[dict] = []
        self.ops: list[tuple[float, float, str]] = []  # (start s, end s, phase)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # A DTensor op first desugars into plain ops (local shards, collectives), which come back through this
        # mode; as CommDebugMode does, let DTensor run by answering NotImplemented for its types only.
        if any(issubclass(t, _DTensor) for t in types):
            return NotImplemented
        kwargs = kwargs or {}
        kind = KINDS.get(getattr(func, "_overloadpacket", None))
        t0 = time.perf_counter()
        out = func(*args, **kwargs)
        t1 = time.perf_counter()
        if kind is not None:
            self._collective(kind, args, out, t0, t1)
        elif self.time_ops and not self.paused:
            self.ops.append((t0, t1, self.phase))
        return out

    def _collective(self, kind, args, out, t0, t1) -> None:
        arg = _FULL_ARG.get(kind, 0)
        rec = {"kind": kind, "bytes": nbytes(args[arg]), "phase": self.phase, "launch": t0, "issued": t1, "done": None}
        self.collectives.append(rec)
        work = out[-1] if isinstance(out, tuple) else None
        try:
            w = torch._C._distributed_c10d.Work.unbox(work)  # type: ignore[arg-type]  # None raises: handled below
        except Exception:  # no Work came back: the call was synchronous, done when it returned
            rec["done"] = t1
            return
        # Stamped on the thread that completes the Work (gloo's); `done` stays None if it never completes.
        try:
            fut = w.get_future()
        except RuntimeError:  # gloo's reduce-scatter Work has no future (torch 2.13): a thread waits on it instead
            if w.is_completed():
                rec["done"] = t1
            else:
                threading.Thread(target=_stamp_when_done, args=(w, rec), daemon=True).start()
            return
        fut.add_done_callback(lambda _f: rec.__setitem__("done", time.perf_counter()))

    def settle(self, timeout_s: float = 5.0) -> None:
        """Wait (briefly) until every recorded collective has its completion stamp."""
        deadline = time.perf_counter() + timeout_s
        while any(c["done"] is None for c in self.collectives) and time.perf_counter() < deadline:
            time.sleep(1e-4)

    def reset(self) -> None:
        self.collectives, self.ops = [], []


def _stamp_when_done(work, rec: dict) -> None:
    try:
        work.wait()  # Work::wait is a condition variable: safe beside the rank's own wait on it
    finally:
        rec["done"] = time.perf_counter()


def held_bytes(model, optimizer) -> dict:
    """Parameter, gradient and optimizer-state bytes this rank holds now (optimizer: Adam's two moments; its
    per-tensor step counters apart, since they are replicated even when the moments are sharded)."""
    inner = getattr(optimizer, "optim", optimizer)  # ZeroRedundancyOptimizer keeps this rank's shard in .optim
    moments, steps = 0, 0
    for state in inner.state.values():
        for key, t in state.items():
            if key in ("exp_avg", "exp_avg_sq"):
                moments += local_bytes(t)
            elif key == "step" and isinstance(t, torch.Tensor):
                steps += local_bytes(t)
    return {
        "param_bytes": sum(local_bytes(p) for p in model.parameters()),
        "grad_bytes": sum(local_bytes(p.grad) for p in model.parameters()),
        "optim_bytes": moments,
        "optim_step_counter_bytes": steps,
    }


# ---- peak memory ---------------------------------------------------------------------------------


class PeakMemory:
    """Peak memory of the timed steps above what the process held before the model existed.

    GPU: the CUDA caching allocator's peak (max_memory_allocated) over memory_allocated at construction (the
    previous strategy's tensors freed). CPU: the process's resident high-water mark (VmHWM) over its resident
    size at construction; `reset()` restarts the high-water mark by writing 5 to /proc/self/clear_refs (Linux
    4.0+) so warm-up and earlier strategies stay out. The CPU figure counts pages, not tensors: the allocator's
    slack and torch's lazily loaded kernels are in it, so only differences of megabytes mean something.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.kind = "cuda-max-allocated" if device.type == "cuda" else "process-rss-high-water"
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            self.base = torch.cuda.memory_allocated(device)
        else:
            self.base = _status_bytes("VmRSS")

    def reset(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass  # the high-water mark then covers the whole process life: an upper bound, still a peak

    def peak(self) -> tuple[int, int]:
        """(peak bytes, peak minus the base held before the model was built)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            p = torch.cuda.max_memory_allocated(self.device)
        else:
            p = _status_bytes("VmHWM")
        return p, max(0, p - self.base)


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024  # kB
    return 0
