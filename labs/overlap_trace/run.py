"""overlap-trace: an async all-gather and what each rank does while it is in flight, on real timelines.

    # CPU (gloo, 2 ranks, all three schedules):
    python -m labs run overlap-trace --params '{}' --out /tmp/overlap --backend cpu
    # 4 ranks, one schedule:
    python -m labs run overlap-trace --params '{"ranks": 4, "schedules": ["windowed"]}' --out /tmp/overlap4
    # GPU node (NCCL, CUDA events, NVTX ranges):
    python -m labs run overlap-trace --params '{"ranks": 8}' --out /tmp/overlap --backend torch-cuda

Reads as: model (seeded weights: a column-parallel linear, an independent linear, a dependent linear)
-> parallel wrapping (each rank keeps its rows of the column-parallel weight) -> run, per step:

    y_parallel = x @ W1_parallel^T                   compute        (tokens, ffn/p)
    handle = all_gather(y_parallel, async_op=True)   communication  -> (tokens, ffn) when done
    then one of three schedules:
      immediate  wait at once, then the independent linear      (the API is async; nothing overlaps)
      windowed   the independent linear, then wait              (the window holds real work)
      dependent  a linear that READS the gathered tensor: it must wait first, so nothing overlaps.
                 Reading before wait() is a race; the lab counts how much of the buffer was still
                 unwritten at the moment the consumer wanted it (the buffer starts as NaN).

Every schedule does the same work, so their step times compare directly. Spans come from real
timestamps after warm-up and a barrier. On CPU (gloo) the collective runs on gloo's background
thread: its span is launch -> completion, the completion stamped by a callback on the work's
future. On GPU the spans are CUDA events on the compute and communication streams, never CPU
timers around wait() (which returns before the GPU has done anything). torch.profiler never runs in these
steps: on GPU it records as many steps again, after them, whose kernels HTA's overlap is read from.

Per rank and schedule: overlap ratio = |compute ∩ comm| / |comm|, exposed communication, and the
identity T_step ≈ compute + communication - overlap checked against the measured step (residual).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from labs.overlap_trace import report
from labs.overlap_trace.params import Params
from labs.parallel import dist as labdist
from labs.parallel import timing
from labs.trace import timeline as tl
from labs.trace.profile import align_ranks, host_group, nvtx_range, profile_step, profiled

if TYPE_CHECKING:
    from labs.runtime import LabContext

# ---- per-rank clocks: CPU wall clock or CUDA events --------------------------------------------


class _CpuClock:
    def now(self):
        return time.perf_counter()

    def ms(self, mark) -> float:
        return mark * 1e3

    def nvtx(self, name, lane="compute"):
        return contextlib.nullcontext()

    def sync(self):
        pass


class _CudaClock:
    """CUDA events on whatever stream is current; converted to one host timeline at the end."""

    def __init__(self, torch):
        self.torch = torch
        torch.cuda.synchronize()
        self.origin_wall_ms = time.perf_counter() * 1e3
        self.origin = torch.cuda.Event(enable_timing=True)
        self.origin.record()

    def now(self):
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def ms(self, mark) -> float:
        return self.origin_wall_ms + self.origin.elapsed_time(mark)

    def nvtx(self, name, lane="compute"):
        # NVTX ranges (the nvtx package: domain course-labs, one colour per lane) show the phases in Nsight Systems.
        return nvtx_range(name, lane)

    def sync(self):
        self.torch.cuda.synchronize()


# ---- one step of one schedule ------------------------------------------------------------------


def _moved(out) -> dict:
    """The all-gather span's args: its kind and the bytes of the gathered tensor, counted as
    labs.parallel.tp.all_gather_into counts them for tp-sweep, so the viewer's readout and Perfetto show them."""
    return {"kind": "all-gather", "bytes": out.numel() * out.element_size()}


def _step_cpu(schedule, x, w1_parallel, x2, w_ind, w_dep, group, world, clock):
    import torch

    from labs.parallel.tp import all_gather_into

    marks = []  # (lane, name, start, end[, span args])
    t_start = clock.now()
    c0 = clock.now()
    y_parallel = x @ w1_parallel.t()  # (tokens, ffn/p)
    marks.append(("compute", "column-parallel linear", c0, clock.now()))
    out = torch.full((world * y_parallel.shape[0], y_parallel.shape[1]), float("nan"))  # (p*tokens, ffn/p)
    done = []
    launch = clock.now()
    handle = all_gather_into(out, y_parallel, group, async_op=True)
    # gloo completes the work on its own thread; stamp the moment it finishes.
    handle.get_future().add_done_callback(lambda _f: done.append(time.perf_counter()))
    unwritten = None
    if schedule == "windowed":
        c0 = clock.now()
        z = x2 @ w_ind.t()  # (tokens, window_out): reads nothing the all-gather writes
        marks.append(("compute", "independent linear (in the window)", c0, clock.now()))
    if schedule == "dependent":
        # The consumer wants the gathered tensor now. Count what it would have read unfinished.
        unwritten = int(torch.isnan(out).sum())
    w0 = clock.now()
    handle.wait()
    w1 = clock.now()
    marks.append(("wait", "wait()", w0, w1))
    c0 = clock.now()
    if schedule == "immediate":
        z = x2 @ w_ind.t()  # same work as the window, but after the wait: nothing overlaps
        marks.append(("compute", "independent linear (after wait)", c0, clock.now()))
    elif schedule == "dependent":
        gathered = torch.cat(out.view(world, *y_parallel.shape).unbind(0), dim=-1)  # (tokens, ffn)
        # The last k columns come from the last rank's shard: data this rank only has via the collective.
        z = gathered[:, -w_dep.shape[1] :] @ w_dep.t()  # (tokens, window_out), same FLOPs as the window's linear
        marks.append(("compute", "dependent linear (reads gathered)", c0, clock.now()))
    t_end = clock.now()
    # Completion can be stamped a hair after wait() returned (callback scheduling); it cannot really be later.
    finish = min(done[0], w1) if done else w1
    marks.append(("communication", "all-gather (async)", launch, finish, _moved(out)))
    del z
    return marks, (t_start, t_end), unwritten, out.numel()


def _step_cuda(schedule, x, w1_parallel, x2, w_ind, w_dep, group, world, clock, comm_stream):
    import torch

    from labs.parallel.tp import all_gather_into

    main = torch.cuda.current_stream()
    marks = []
    t_start = clock.now()
    with clock.nvtx("column-parallel linear"):
        c0 = clock.now()
        y_parallel = x @ w1_parallel.t()  # (tokens, ffn/p)
        marks.append(("compute", "column-parallel linear", c0, clock.now()))
    out = torch.full((world * y_parallel.shape[0], y_parallel.shape[1]), float("nan"), device=x.device)
    # The collective is issued from a side stream so events on that stream bracket its kernel.
    comm_stream.wait_stream(main)
    with torch.cuda.stream(comm_stream), clock.nvtx("all-gather (async)", "communication"):
        launch = clock.now()
        handle = all_gather_into(out, y_parallel, group, async_op=True)
        handle.wait()  # on CUDA this makes comm_stream (not the CPU) wait for NCCL
        finish = clock.now()
    unwritten = None
    if schedule == "windowed":
        with clock.nvtx("independent linear"):
            c0 = clock.now()
            z = x2 @ w_ind.t()
            marks.append(("compute", "independent linear (in the window)", c0, clock.now()))
    w0 = clock.now()
    with clock.nvtx("wait", "wait"):
        main.wait_stream(comm_stream)  # the stream stalls here until the all-gather is done
    w1 = clock.now()
    marks.append(("wait", "wait()", w0, w1))
    c0 = clock.now()
    if schedule == "immediate":
        z = x2 @ w_ind.t()
        marks.append(("compute", "independent linear (after wait)", c0, clock.now()))
    elif schedule == "dependent":
        gathered = torch.cat(out.view(world, *y_parallel.shape).unbind(0), dim=-1)
        z = gathered[:, -w_dep.shape[1] :] @ w_dep.t()
        marks.append(("compute", "dependent linear (reads gathered)", c0, clock.now()))
    t_end = clock.now()
    marks.append(("communication", "all-gather (async)", launch, finish, _moved(out)))
    out.record_stream(comm_stream)
    del z
    return marks, (t_start, t_end), unwritten, out.numel()


def _rank_main(rank: int, world: int, params_dict: dict, device_kind: str, out_dir: str) -> dict:
    import torch
    import torch.distributed as dist

    params = Params.model_validate(params_dict)
    device = torch.device(f"cuda:{rank}" if device_kind == "cuda" else "cpu")
    # model: full weights from the seed, identical on every rank
    g = torch.Generator().manual_seed(params.seed)
    w1 = torch.randn(params.ffn, params.hidden, generator=g) / params.hidden**0.5  # (ffn, hidden)
    w_ind = torch.randn(params.window_out, params.hidden, generator=g) / params.hidden**0.5  # (window_out, hidden)
    k_dep = min(params.hidden, params.ffn)
    w_dep = torch.randn(params.window_out, k_dep, generator=g) / k_dep**0.5  # (window_out, k_dep): same FLOPs as w_ind
    x = torch.randn(params.tokens, params.hidden, generator=g)  # (tokens, hidden)
    x2 = torch.randn(params.tokens, params.hidden, generator=g)  # input of the independent work
    # parallel wrapping: this rank's rows of the column-parallel weight
    rows = params.ffn // world
    w1_parallel = w1[rank * rows : (rank + 1) * rows].contiguous()  # (ffn/p, hidden)
    x, x2, w1_parallel, w_ind, w_dep = (t.to(device) for t in (x, x2, w1_parallel, w_ind, w_dep))
    group = dist.group.WORLD
    host = host_group(list(range(world)))  # gloo: the per-step rendezvous launches no GPU kernel
    comm_stream = torch.cuda.Stream() if device_kind == "cuda" else None

    out = {}
    for schedule in params.schedules:

        def step(clock, schedule=schedule):
            if device_kind == "cuda":
                return _step_cuda(schedule, x, w1_parallel, x2, w_ind, w_dep, group, world, clock, comm_stream)
            return _step_cpu(schedule, x, w1_parallel, x2, w_ind, w_dep, group, world, clock)

        cpu_clock = device_kind == "cpu"
        for _ in range(timing.warmup_for(device_kind, params.warmup)):
            step(_CpuClock() if cpu_clock else _CudaClock(torch))
        spans, steps, unwritten = [], [], []
        for s in range(params.steps):
            # Every rank starts the measured step together (labs.trace.profile.align_ranks: no kernel).
            align_ranks(host, cuda=not cpu_clock)
            clock = _CpuClock() if cpu_clock else _CudaClock(torch)
            marks, (a, b), n_unwritten, numel = step(clock)
            clock.sync()
            spans += [
                tl.Span(rank, lane, name, clock.ms(s0), clock.ms(s1), {"step": s, **extra}).to_dict()
                for lane, name, s0, s1, *more in marks
                for extra in [more[0] if more else {}]
            ]
            steps.append((clock.ms(a), clock.ms(b)))
            unwritten.append(n_unwritten)
        # On CUDA, as many steps again under torch.profiler, for HTA's overlap from the kernels: a window of its
        # own, so the profiler never runs in a measured step.
        profile = Path(out_dir) / f"profile_{schedule}_rank{rank}.json" if not cpu_clock else None
        with profiled(profile, enabled=profile is not None) as prof:
            for s in range(params.steps if prof is not None else 0):
                align_ranks(host, cuda=True)
                with profile_step(prof, s):
                    step(_CudaClock(torch))
                    torch.cuda.synchronize()
        out[schedule] = {
            "spans": spans,
            "steps": steps,
            "unwritten": unwritten,
            "gathered_numel": numel,
            "profile": str(profile) if profile is not None else None,
        }
    return out


# ---- run ----------------------------------------------------------------------------------------


def _median(xs):
    xs = [v for v in xs if v is not None]
    return statistics.median(xs) if xs else None


def run(params: Params, ctx: LabContext) -> dict:
    device = ctx.device
    per_rank = labdist.run_ranks(ctx, _rank_main, params, str(ctx.out_dir), world=params.ranks)
    t0 = min(st[0] for rec in per_rank for sch in rec.values() for st in sch["steps"])
    schedules = {}
    for schedule in params.schedules:
        all_spans, ranks = [], []
        for r in range(params.ranks):
            rec = per_rank[r][schedule]
            spans = [
                tl.Span(d["rank"], d["lane"], d["name"], d["start_ms"] - t0, d["end_ms"] - t0, d["args"])
                for d in rec["spans"]
            ]
            all_spans += spans
            per_step = []
            for s, (a, b) in enumerate(rec["steps"]):
                mine = [sp for sp in spans if sp.args["step"] == s]
                per_step.append(tl.overlap_metrics(mine, r, step=(a - t0, b - t0)))
            # Report the median step (by step time) whole, so its numbers satisfy the identity together;
            # per-field medians would mix different steps.
            rep = sorted(per_step, key=lambda p: p["step_ms"])[(len(per_step) - 1) // 2]
            row = {**rep, "rank": r, "median_overlap_ratio_all_steps": _median(p["overlap_ratio"] for p in per_step)}
            row["identity_residual_fraction"] = row["identity_residual_ms"] / row["step_ms"] if row["step_ms"] else None
            if schedule == "dependent" and device == "cpu":
                row["unwritten_at_read"] = max(v for v in rec["unwritten"] if v is not None)
            ranks.append(row)
        last = params.steps - 1
        drawn = [s for s in all_spans if s.args["step"] == last]
        lo = min(s.start_ms for s in drawn)
        drawn = [tl.Span(s.rank, s.lane, s.name, s.start_ms - lo, s.end_ms - lo, s.args) for s in drawn]
        mean_ratio = _mean([r["overlap_ratio"] for r in ranks])
        arts = report.schedule_artifacts(ctx, params, schedule, all_spans, drawn, mean_ratio, device)
        schedules[schedule] = {
            "profiler": _profiler(ctx, per_rank, schedule, ranks, device),
            "ranks": ranks,
            "overlap_ratio": mean_ratio,
            "exposed_comm_ms": _mean([r["exposed_communication_ms"] for r in ranks]),
            "step_ms": max(r["step_ms"] for r in ranks),
            **report.safety(schedule, ranks, device),
            "artifacts": arts,
        }
    numel = per_rank[0][params.schedules[0]]["gathered_numel"]
    comparison = None
    if "windowed" in schedules and "immediate" in schedules:
        w, i = schedules["windowed"], schedules["immediate"]
        comparison = {
            "windowed_overlap_gt_immediate_per_rank": [
                (a["overlap_ratio"] or 0) > (b["overlap_ratio"] or 0) for a, b in zip(w["ranks"], i["ranks"])
            ],
            "windowed_over_immediate_step": w["step_ms"] / i["step_ms"] if i["step_ms"] else None,
        }
    ctx.progress(0.95, "writing tables")
    return report.results(params, ctx, schedules, comparison, numel * 4, device)


def _profiler(ctx: LabContext, per_rank: list[dict], schedule: str, ranks: list[dict], device: str) -> dict:
    """HTA's overlap per rank beside the lab's kernel count and its CUDA-event spans (CUDA); why not (CPU)."""
    from labs.trace import kernels

    if device != "cuda":
        return kernels.not_applicable(ctx.backend)
    files = {r: Path(per_rank[r][schedule]["profile"]) for r in range(len(per_rank))}
    check = kernels.cross_check(
        files, {row["rank"]: row["overlap_ratio"] for row in ranks}, device_name=ctx.environment["device"].get("name")
    )
    for r, f in files.items():
        ctx.add_artifact(
            f"profile_{schedule}_rank{r}", f.name, "application/json", f"Profiler trace: {schedule}, rank {r}"
        )
    return check


def _mean(xs):
    xs = [v for v in xs if v is not None]
    return sum(xs) / len(xs) if xs else None
