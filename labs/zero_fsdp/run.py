"""zero-fsdp: the same small transformer trained a few steps under DDP, ZeRO-1 and FSDP2, rank by rank.

    # CPU (gloo, 2 ranks, all four strategies):
    python -m labs run zero-fsdp --params '{}' --out /tmp/zf --backend cpu
    # 4 ranks, DDP against FSDP2:
    python -m labs run zero-fsdp --params '{"ranks": 4, "strategies": ["ddp", "fsdp2"]}' --out /tmp/zf4
    # GPU node (NCCL, CUDA allocator peaks, profiler kernels on the timeline; unverified until a GPU runs it):
    python -m labs run zero-fsdp --params '{"ranks": 8, "hidden": 1024, "layers": 8}' --out /tmp/zf --backend torch-cuda

Reads as: model (model.py, the same seeded weights and data for every strategy) -> parallel wrapping (wrap.py:
DDP, ZeroRedundancyOptimizer or fully_shard) -> run (`train`): warm-up steps; timed steps, each alone between two
events with no recorder or profiler on; as many recorded steps, whose collectives and (CPU) op intervals or
(CUDA) profiler kernels make the timeline; then one census step in which the rank counts the bytes it holds
(measure.py): parameters after forward and at rest, gradients after backward, Adam's moments after the step. The
strategies run one after another in the same rank processes (one start-up instead of four); between them the
rank frees everything and hands freed heap back to the system, and each peak is taken over the timed steps
only, after warm-up. Every step's loss is averaged over ranks between steps and compared across strategies
(they see the same data and the same weights, so they train identically up to the order of floating-point sums
in the reductions).

Does FSDP2 run on gloo/CPU? Yes in torch 2.13: fully_shard's all-gather (all_gather_into_tensor, c10d
_allgather_base_) and reduce-scatter (reduce_scatter_tensor, _reduce_scatter_base_) both run on gloo, and the
DTensor parameters and optimizer state stay on the CPU. What does not carry over is the overlap mechanism:
FSDP2 overlaps through CUDA streams, so the lab prefetches with async all-gathers instead (wrap.py).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from labs.parallel import comm, timing
from labs.parallel import dist as labdist
from labs.trace import timeline as tl
from labs.zero_fsdp import anatomy, report
from labs.zero_fsdp.params import Params

if TYPE_CHECKING:
    from labs.runtime import LabContext

# Ops closer together than this are one stretch of compute on the timeline (Python between two small ops).
MERGE_GAP_S = 2e-4


def _rank_main(rank: int, world: int, params_dict: dict, device_kind: str, out_dir: str) -> dict:
    """Every strategy in turn on this rank: {strategy: what it held, moved, took and lost}."""
    import torch

    from labs.trace.profile import host_group

    params = Params.model_validate(params_dict)
    device = torch.device(f"cuda:{rank}" if device_kind == "cuda" else "cpu")
    # A collective's completion is stamped by Python code on another thread (gloo's callback, or the waiter for a
    # Work without a future), which must first take the GIL from this thread: at the default 5 ms switch interval
    # the stamp could land up to 5 ms late and fake overlap with the compute that follows. 0.1 ms bounds that.
    sys.setswitchinterval(1e-4)
    # Rendezvous and the loss average go over gloo (host only) so that on CUDA no barrier or loss all-reduce
    # kernel lands on the profiled timeline (labs/trace/profile.py align_ranks); on CPU the world is gloo already.
    host = host_group(list(range(world))) if device_kind == "cuda" else None
    out = {}
    for strategy in params.strategies:
        out[strategy] = _train(rank, world, params, strategy, device, out_dir, host)
        _release_memory(device)
    return out


def _release_memory(device) -> None:
    """Hand the last strategy's freed memory back, so the next one's peak starts from what it really holds."""
    import ctypes
    import gc

    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # glibc keeps freed heap pages resident otherwise
    except (OSError, AttributeError):
        pass


def _train(rank: int, world: int, params: Params, strategy: str, device, out_dir: str, host) -> dict:
    cuda = device.type == "cuda"
    # On CUDA the recorded window is profiled too: its kernels are the GPU timeline (labs.trace.kernels).
    profile = Path(out_dir) / f"profile_{strategy}_rank{rank}.json" if cuda else None
    return train(rank, world, params, strategy, device, host, profile)


def train(rank: int, world: int, params: Params, strategy: str, device, host, profile: Path | None) -> dict:
    """One strategy on this rank, in three windows after warm-up, each step after every rank has met:

    timed      `steps` steps, each alone between two events (labs.parallel.timing.time_steps): the step time, with
               no recorder or profiler on; the memory peak is taken over these steps
    recorded   as many again under the CollectiveRecorder (what each collective moves; on CPU every op's interval,
               the timeline's compute lane) and, given `profile`, torch.profiler: what the step is made of
    census     one step in which the rank counts the bytes it holds, phase by phase
    """
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from labs.trace.profile import align_ranks, profile_step, profiled
    from labs.zero_fsdp import measure, model, wrap

    cuda = device.type == "cuda"
    kind = device.type
    peak = measure.PeakMemory(device)  # its base: this process before the model exists
    net = model.build(params, params.seed)
    shapes = [tuple(p.shape) for p in net.parameters()]
    wrapped, opt = wrap.apply(strategy, net, params, device)
    tokens = model.batch_for(params, rank).to(device)
    inp, target = tokens[:, :-1], tokens[:, 1:]  # (batch, seq) each
    rec = measure.CollectiveRecorder(time_ops=not cuda)
    losses: list[float] = []
    pending: list = []  # this window's losses, averaged over ranks between steps (never inside a timed one)
    windows, per_step, held = [], [], {}

    def one_step(census: bool = False):
        rec.phase = "forward"
        logits = wrapped(inp)  # (batch, seq, vocab)
        loss = F.cross_entropy(logits.reshape(-1, params.vocab), target.reshape(-1))
        if census:
            rec.paused = True
            held["param_bytes_after_forward"] = measure.held_bytes(net, opt)["param_bytes"]
            rec.paused = False
        rec.phase = "backward"
        loss.backward()
        if census:
            rec.paused = True
            held["grad_bytes"] = measure.held_bytes(net, opt)["grad_bytes"]
            rec.paused = False
        rec.phase = "optimizer step"
        opt.step()
        if census:
            rec.paused = True
            h = measure.held_bytes(net, opt)
            held.update(param_bytes=h["param_bytes"], optim_bytes=h["optim_bytes"])
            held["optim_step_counter_bytes"] = h["optim_step_counter_bytes"]
            rec.paused = False
        opt.zero_grad(set_to_none=True)
        pending.append(loss.detach())

    def align() -> None:
        """Average the last step's loss over ranks, then start the next step on every rank together."""
        while pending:
            mean = pending.pop(0).float().cpu()
            dist.all_reduce(mean, group=host)
            losses.append(mean.item() / world)
        if cuda:
            align_ranks(host, cuda=True)  # gloo, host only: no barrier kernel on the GPU timeline
        else:
            dist.barrier()

    for _ in range(timing.warmup_for(kind, params.warmup)):
        align()
        one_step()
    # The peak is taken over the timed steps only (warm-up's first-call costs and Adam's state allocation are
    # behind), counted from the base: resting state (weights, Adam's moments) plus what a step adds.
    align()
    _release_memory(device)
    peak.reset()
    step_ms = timing.time_steps(
        one_step, steps=params.steps, align=align, sync=timing.sync_for(kind), new_event=timing.events_for(kind)
    )
    peak_bytes, peak_growth = peak.peak()
    with profiled(profile, enabled=profile is not None, cuda=cuda) as prof:
        for i in range(params.steps):
            align()
            rec.reset()
            with profile_step(prof, i):
                t0 = time.perf_counter()
                with rec:
                    one_step()
                if cuda:
                    torch.cuda.synchronize(device)
                t1 = time.perf_counter()
            if not cuda:  # the CPU timeline's collective spans end at these stamps (GPU spans come from the profiler)
                rec.settle()  # every collective was waited on inside the step; the stamps land within microseconds
            windows.append((t0, t1))
            per_step.append({"collectives": list(rec.collectives), "ops": list(rec.ops)})
    align()
    one_step(census=True)
    align()
    return {
        "losses": losses,
        "step_ms": step_ms,
        "steps": windows,
        "per_step": [_spans_and_tally(rank, i, st, windows[i]) for i, st in enumerate(per_step)],
        "held": held,
        "peak_bytes": peak_bytes,
        "peak_growth_bytes": peak_growth,
        "peak_kind": peak.kind,
        "n_params": sum(_numel(s) for s in shapes),
        "profile": str(profile) if profile is not None else None,
        **_shard_info(strategy, shapes, world, opt),
    }


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _shard_info(strategy: str, shapes, world: int, opt) -> dict:
    """What sharding should give this rank: FSDP2's padded dim-0 shard, ZeRO-1's whole-parameter partition."""
    out: dict = {"largest_param_numel": max(_numel(s) for s in shapes)}
    # fully_shard pads dim 0 to a multiple of N and stores ceil(d0/N) rows per rank (FSDPParam._init_sharded_param)
    out["padded_shard_numel"] = sum(-(-s[0] // world) * (_numel(s) // s[0]) for s in shapes)
    if strategy == "zero1":
        # ZeroRedundancyOptimizer's partition: its local optimizer (`.optim`) holds only this rank's parameters
        out["owned_numel"] = sum(p.numel() for group in opt.optim.param_groups for p in group["params"])
    return out


def _spans_and_tally(rank: int, index: int, rec: dict, window: tuple[float, float]) -> dict:
    """This step's compute/communication/wait spans (CPU: from the recorder) and bytes by collective kind."""
    a, b = window
    tally: dict[str, dict] = {}
    for c in rec["collectives"]:
        t = tally.setdefault(c["kind"], {"count": 0, "bytes": 0})
        t["count"] += 1
        t["bytes"] += c["bytes"]
    spans = []
    merged: list[list] = []  # [start, end, phase]
    for s0, s1, phase in rec["ops"]:
        if merged and phase == merged[-1][2] and s0 - merged[-1][1] <= MERGE_GAP_S:
            merged[-1][1] = max(merged[-1][1], s1)
        else:
            merged.append([s0, s1, phase])
    for s0, s1, phase in merged:
        spans.append(tl.Span(rank, "compute", phase, s0 * 1e3, s1 * 1e3, {"step": index}).to_dict())
    comm = []
    for c in rec["collectives"]:
        end = c["done"] if c["done"] is not None else c["issued"]
        end = max(end, c["issued"])
        comm.append((c["launch"], end))
        spans.append(
            tl.Span(
                rank,
                "communication",
                f"{c['kind']} ({c['phase']})",
                c["launch"] * 1e3,
                end * 1e3,
                {"step": index, "kind": c["kind"], "bytes": c["bytes"]},
            ).to_dict()
        )
    # Wait: the rank's thread ran no op while one of its collectives was in flight.
    busy = tl.union([(s0, s1) for s0, s1, _ in merged])
    gaps, prev = [], a
    for s0, s1 in busy:
        if s0 > prev:
            gaps.append((prev, s0))
        prev = max(prev, s1)
    if b > prev:
        gaps.append((prev, b))
    for g0, g1 in tl.intersection(gaps, comm):
        spans.append(tl.Span(rank, "wait", "waiting for a collective", g0 * 1e3, g1 * 1e3, {"step": index}).to_dict())
    return {"tally": tally, "spans": spans}


# ---- run ----------------------------------------------------------------------------------------


def run(params: Params, ctx: LabContext) -> dict:
    device = ctx.device
    per_rank = labdist.run_ranks(
        ctx,
        _rank_main,
        params,
        str(ctx.out_dir),
        world=params.ranks,
        then="; strategies run one after another",
        finished_at=0.8,
    )
    strategies = {
        strategy: _strategy_result(ctx, params, strategy, [rec[strategy] for rec in per_rank], device)
        for strategy in params.strategies
    }
    ctx.progress(0.95, "writing tables")
    return report.results(params, ctx, strategies, device)


def _strategy_result(ctx: LabContext, params: Params, strategy: str, per_rank: list[dict], device: str) -> dict:
    world = params.ranks
    n_params = per_rank[0]["n_params"]
    pred_mem = anatomy.zero_memory(n_params, world, anatomy.STAGE[strategy])
    traffic = anatomy.predicted_traffic(strategy, params=n_params)
    spans, rows = _timeline(ctx, params, strategy, per_rank, device)
    for r, rec in enumerate(per_rank):
        if rec["profile"] is not None:  # CUDA: each rank's torch.profiler trace, for Perfetto and HTA
            name = Path(rec["profile"]).name
            ctx.add_artifact(
                f"profile_{strategy}_rank{r}", name, "application/json", f"Profiler trace: {strategy}, rank {r}"
            )
    last = per_rank[0]["per_step"][-1]["tally"] if per_rank[0]["per_step"] else {}
    collectives = []
    for kind in sorted(set(last) | set(traffic)):
        got = last.get(kind, {"count": 0, "bytes": 0})
        collectives.append(
            {
                "kind": kind,
                "count": got["count"],
                "bytes": got["bytes"],
                "bus_bytes": comm.bus_bytes(kind, world, got["bytes"]),
                "predicted_bytes": traffic.get(kind, 0.0),
            }
        )
    ranks = []
    for r, rec in enumerate(per_rank):
        step_ms = rec["step_ms"]  # the timed window's, no recorder or profiler on
        ranks.append(
            {
                "rank": r,
                **{
                    k: rec["held"][k] for k in ("param_bytes", "param_bytes_after_forward", "grad_bytes", "optim_bytes")
                },
                "optim_step_counter_bytes": rec["held"]["optim_step_counter_bytes"],
                "peak_bytes": rec["peak_bytes"],
                "peak_growth_bytes": rec["peak_growth_bytes"],
                "step_ms": statistics.median(step_ms) if step_ms else 0.0,
                **rows[r],
            }
        )
    z = per_rank[0]
    return {
        "ranks": ranks,
        "losses": per_rank[0]["losses"],
        "loss_spread_over_ranks": max(
            abs(a - b) for rec in per_rank for a, b in zip(rec["losses"], per_rank[0]["losses"])
        ),
        "collectives": collectives,
        "bus_bytes_per_step": sum(c["bus_bytes"] for c in collectives),
        "predicted_bus_bytes_per_step": anatomy.predicted_bus_bytes(traffic, world),
        "predicted": {k: pred_mem[k] for k in ("param_bytes", "grad_bytes", "optim_bytes")},
        "params": n_params,
        "largest_param_numel": z["largest_param_numel"],
        "padded_shard_numel": z["padded_shard_numel"],
        "step_ms": max(r["step_ms"] for r in ranks),
        "peak_kind": z["peak_kind"],
        "artifacts": report.strategy_artifacts(ctx, params, strategy, spans, device),
        **({"owned_numel": [rec["owned_numel"] for rec in per_rank]} if strategy == "zero1" else {}),
    }


def _timeline(ctx: LabContext, params: Params, strategy: str, per_rank: list[dict], device: str):
    """All timed steps' spans (shifted to start at 0) and each rank's overlap numbers for its median step."""
    rows = []
    if device == "cuda":
        return _timeline_cuda(per_rank)
    t0 = min(st[0] for rec in per_rank for st in rec["steps"]) * 1e3 if per_rank[0]["steps"] else 0.0
    spans = []
    for r, rec in enumerate(per_rank):
        mine = [
            tl.Span(d["rank"], d["lane"], d["name"], d["start_ms"] - t0, d["end_ms"] - t0, d["args"])
            for st in rec["per_step"]
            for d in st["spans"]
        ]
        spans += mine
        per_step = []
        for i, (a, b) in enumerate(rec["steps"]):
            step_spans = [s for s in mine if s.args["step"] == i]
            per_step.append(tl.overlap_metrics(step_spans, r, step=(a * 1e3 - t0, b * 1e3 - t0)))
        rep = sorted(per_step, key=lambda p: p["step_ms"])[(len(per_step) - 1) // 2] if per_step else None
        rows.append(_overlap_row(rep))
    return spans, rows


def _timeline_cuda(per_rank: list[dict]):
    """GPU kernels from each rank's profiler trace (labs.trace.kernels), each given the ProfilerStep it started in
    (every step ends with a device synchronize, so its kernels finish inside it), and each rank's median step."""
    import json

    from labs.trace.kernels import kernel_intervals, profiler_steps

    spans, rows = [], []
    docs = {r: json.loads(Path(rec["profile"]).read_text()) for r, rec in enumerate(per_rank)}
    traces = {r: kernel_intervals(doc) for r, doc in docs.items()}
    starts = [s for k in traces.values() for lane in ("compute", "communication") for s, _ in k[lane]]
    t0 = min(starts) if starts else 0.0
    for r, k in traces.items():
        windows = profiler_steps(docs[r]) or [(0, min(starts, default=0.0), float("inf"))]
        mine = [
            tl.Span(r, lane, f"{lane} kernels", s - t0, e - t0, {"step": _step_of(s, windows)})
            for lane in ("compute", "communication")
            for s, e in k[lane]
        ]
        spans += mine
        per_step = [
            tl.overlap_metrics([x for x in mine if x.args["step"] == n], r, step=(a - t0, min(b, 1e12) - t0))
            for n, a, b in windows
            if any(x.args["step"] == n for x in mine)
        ]
        rep = sorted(per_step, key=lambda m: m["step_ms"])[(len(per_step) - 1) // 2] if per_step else None
        # Kernels have no wait lane: a collective kernel spinning for a late peer is communication time here,
        # so the wait is unknown (None), not zero.
        rows.append(_overlap_row(rep) | {"wait_ms": None})
    return spans, rows


def _step_of(start: float, windows: list) -> int:
    """The ProfilerStep (number, start, end) a kernel starting at `start` ran in; the last one if none holds it."""
    return next((n for n, a, b in windows if a <= start < b), windows[-1][0])


def _overlap_row(m: dict | None) -> dict:
    if m is None:
        return {
            "compute_ms": 0.0,
            "communication_ms": 0.0,
            "overlap_ms": 0.0,
            "overlap_ratio": None,
            "exposed_communication_ms": 0.0,
            "wait_ms": 0.0,
        }
    return {
        k: m[k]
        for k in (
            "compute_ms",
            "communication_ms",
            "overlap_ms",
            "overlap_ratio",
            "exposed_communication_ms",
            "wait_ms",
        )
    }
