"""pipeline: torch.distributed.pipelining's schedules on a stack of layers split into stages, on real timelines.

    # CPU (gloo, 2 ranks, GPipe, 1F1B, interleaved 1F1B and zero-bubble, 4 micro-batches):
    python -m labs run pipeline --params '{}' --out /tmp/pipeline --backend cpu
    # the GPipe-vs-1F1B preset, 8 micro-batches:
    python -m labs run pipeline --params '{"schedules": ["gpipe", "1f1b"], "microbatches": 8}' --out /tmp/pp8
    # GPU node (NCCL, CUDA events; unverified: no GPU has run it yet):
    python -m labs run pipeline --params '{"ranks": 4, "microbatches": 8}' --out /tmp/pipeline --backend torch-cuda

Reads as: model (`layers` Linear+tanh layers of one width, seeded identically on every rank) -> parallel
wrapping (split manually into p x v contiguous stages, each a `PipelineStage`; rank r holds stage r, or
stages r, r+p, ... in the looped schedules) -> run, per schedule, the module's own `step()`:

    gpipe             ScheduleGPipe                 all forwards, then all backwards
    1f1b              Schedule1F1B                  p - rank forwards, then one forward / one backward
    interleaved-1f1b  ScheduleInterleaved1F1B       1F1B over v looped stages per rank
    zero-bubble       ScheduleInterleavedZeroBubble backward split into I (inputs) and W (weights); W fills bubbles

All four run on gloo/CPU in torch 2.13: the stages' p2p is `batch_isend_irecv` of isend/irecv, which gloo
implements (checked by running them). Schedule classes read in torch/distributed/pipelining/schedules.py and
stage.py of torch 2.13.0 (the installed wheel) and of github pytorch/pytorch@1fd7abc2f521 (same schedules, no
`defer_pp_recv`); the GPU path (NCCL, CUDA events) is written against the same files and is unverified. Every compute action (F, B, I, W) is timed by wrapping the stage's own `forward_one_chunk`,
`backward_one_chunk` and `backward_weight_one_chunk`, the methods the schedules call; sends are counted by
wrapping `get_fwd_send_ops` / `get_bwd_send_ops`; the bytes each forward saves for backward are counted with
`torch.autograd.graph.saved_tensors_hooks`. The schedule's own plan (`pipeline_order`) is kept beside what ran.
Before timing, every rank runs the whole model unpipelined on the whole batch: the pipelined loss and each
stage's gradients are compared to it. On CUDA no clock is compared across ranks: each rank's step is read on its
own events, and the step lasts as long as the slowest rank's (`step_frames`).
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING

from labs.parallel import dist as labdist
from labs.parallel import timing
from labs.pipeline import analysis, report
from labs.pipeline.params import Params, stages_for
from labs.trace import timeline as tl

if TYPE_CHECKING:
    from labs.runtime import LabContext


def _schedule_class(name: str):
    # torch 2.13 torch/distributed/pipelining/schedules.py: ScheduleGPipe and Schedule1F1B take one stage
    # (PipelineScheduleSingle); the interleaved and zero-bubble schedules take a list of stages
    # (_PipelineScheduleRuntime, which runs `pipeline_order` with explicit SEND/RECV actions).
    from torch.distributed.pipelining import (
        Schedule1F1B,
        ScheduleGPipe,
        ScheduleInterleaved1F1B,
        ScheduleInterleavedZeroBubble,
    )

    return {
        "gpipe": ScheduleGPipe,
        "1f1b": Schedule1F1B,
        "interleaved-1f1b": ScheduleInterleaved1F1B,
        "zero-bubble": ScheduleInterleavedZeroBubble,
    }[name]


def _layers(params: Params):
    """The model: `layers` x (Linear(width, width), tanh), seeded the same on every rank."""
    import torch
    from torch import nn

    torch.manual_seed(params.seed)
    return [nn.Sequential(nn.Linear(params.width, params.width), nn.Tanh()) for _ in range(params.layers)]


def _loss(out, target):
    return ((out - target) ** 2).mean()


class _Clock:
    """CPU: perf_counter (one CLOCK_MONOTONIC for all ranks). CUDA: events on the current stream, turned into
    host milliseconds after a synchronize (torch 2.13 torch/cuda/streams.py Event.elapsed_time; unverified)."""

    def __init__(self, torch, cuda: bool):
        self.torch, self.cuda = torch, cuda
        if cuda:
            torch.cuda.synchronize()
            self.origin_ms = time.perf_counter() * 1e3
            self.origin = torch.cuda.Event(enable_timing=True)
            self.origin.record()

    def now(self):
        if not self.cuda:
            return time.perf_counter()
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def ms(self, mark) -> float:
        return mark * 1e3 if not self.cuda else self.origin_ms + self.origin.elapsed_time(mark)

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()


def _instrument(stage, record: list, sends: dict, clock_ref: list, param_ptrs: set) -> None:
    """Time the stage's compute methods and count its sends; the schedules call these through the instance."""
    import torch

    fwd, bwd, wgt = stage.forward_one_chunk, stage.backward_one_chunk, stage.backward_weight_one_chunk
    fsend, bsend = stage.get_fwd_send_ops, stage.get_bwd_send_ops
    idx = stage.stage_index

    def forward_one_chunk(mb, *args, **kwargs):
        saved: dict[int, int] = {}

        def pack(t):
            if t.data_ptr() not in param_ptrs:  # weights are not activations
                saved[t.data_ptr()] = t.numel() * t.element_size()
            return t

        clock = clock_ref[0]
        s, c = clock.now(), time.thread_time()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = fwd(mb, *args, **kwargs)
        record.append((idx, "F", mb, s, clock.now(), sum(saved.values()), time.thread_time() - c))
        return out

    def backward_one_chunk(mb, *args, **kwargs):
        clock = clock_ref[0]
        s, c = clock.now(), time.thread_time()
        out = bwd(mb, *args, **kwargs)
        kind = "B" if kwargs.get("full_backward", True) else "I"
        record.append((idx, kind, mb, s, clock.now(), 0, time.thread_time() - c))
        return out

    def backward_weight_one_chunk(mb, *args, **kwargs):
        clock = clock_ref[0]
        s, c = clock.now(), time.thread_time()
        out = wgt(mb, *args, **kwargs)
        record.append((idx, "W", mb, s, clock.now(), 0, time.thread_time() - c))
        return out

    def counted(get, kind):
        def get_ops(mb):
            ops = get(mb)
            sends[kind] += len(ops)
            sends[kind + "_bytes"] += sum(op.tensor.numel() * op.tensor.element_size() for op in ops)
            return ops

        return get_ops

    stage.forward_one_chunk = forward_one_chunk
    stage.backward_one_chunk = backward_one_chunk
    stage.backward_weight_one_chunk = backward_weight_one_chunk
    stage.get_fwd_send_ops = counted(fsend, "activations")
    stage.get_bwd_send_ops = counted(bsend, "gradients")


def _reference(params: Params, x, y, device):
    """The unpipelined model on the whole batch: its loss and each layer's weight gradient."""
    import torch

    model = torch.nn.Sequential(*_layers(params)).to(device)
    loss = _loss(model(x), y)
    loss.backward()
    return float(loss.detach()), [_linear(blk).weight.grad.detach().clone() for blk in model]


def _linear(block):
    """The Linear of one (Linear, tanh) block."""
    return block[0]


def _plan(sched, rank: int) -> list[str]:
    """The schedule's own action list for this rank (compute actions only), in its notation (2F0, 1B3, 0W1)."""
    order = getattr(sched, "pipeline_order", None)
    if not order:
        return []
    return [str(a) for a in order.get(rank, []) if a is not None and a.is_compute_op]


def _rank_main(rank: int, world: int, params_dict: dict, device_kind: str) -> dict:
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage

    params = Params.model_validate(params_dict)
    cuda = device_kind == "cuda"
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    g = torch.Generator().manual_seed(params.seed + 1)
    batch = params.microbatches * params.microbatch_rows
    x = torch.randn(batch, params.width, generator=g).to(device)  # (m * rows, width)
    y = torch.randn(batch, params.width, generator=g).to(device)  # the regression target
    ref_loss, ref_grads = _reference(params, x, y, device)

    out = {}
    for name in params.schedules:
        v = stages_for(params, name)
        n_stages = world * v
        per_stage = params.layers // n_stages
        layers = [blk.to(device) for blk in _layers(params)]  # fresh weights and grads for every schedule
        mine = [rank + k * world for k in range(v)]  # looped placement: rank r holds r, r + p, ...
        record: list = []
        sends = {"activations": 0, "activations_bytes": 0, "gradients": 0, "gradients_bytes": 0}
        clock_ref = [_Clock(torch, cuda)]
        stages = []
        for i in mine:
            submod = torch.nn.Sequential(*layers[i * per_stage : (i + 1) * per_stage])
            stage = PipelineStage(submod, i, n_stages, device)
            ptrs = {p.data_ptr() for p in submod.parameters()}
            _instrument(stage, record, sends, clock_ref, ptrs)
            stages.append(stage)
        sched = _schedule_class(name)(stages if v > 1 else stages[0], n_microbatches=params.microbatches, loss_fn=_loss)
        is_last = (n_stages - 1) in mine

        steps, actions, counts, losses = [], [], [], []
        warmup = timing.warmup_for(device_kind, params.warmup)
        for s in range(warmup + params.steps):
            for p in (q for st in stages for q in st.submod.parameters()):
                p.grad = None
            record.clear()
            for k in sends:
                sends[k] = 0
            step_losses: list = []
            dist.barrier()  # every rank starts the measured step together
            clock = _Clock(torch, cuda)
            clock_ref[0] = clock
            t0 = clock.now()
            if rank == 0:
                sched.step(x, target=y if is_last else None, losses=step_losses if is_last else None)
            elif is_last:
                sched.step(target=y, losses=step_losses)
            else:
                sched.step()
            t1 = clock.now()
            clock.sync()
            if s < warmup:
                continue
            steps.append((clock.ms(t0), clock.ms(t1)))
            actions.append([(st, k, mb, clock.ms(a), clock.ms(b), nb, 1e3 * c) for st, k, mb, a, b, nb, c in record])
            counts.append(dict(sends))
            losses = [float(v_.detach()) for v_ in step_losses]

        grads = {}
        for i, st in zip(mine, stages, strict=True):
            for j, blk in enumerate(st.submod.children()):
                layer = i * per_stage + j
                got, want = _linear(blk).weight.grad, ref_grads[layer]
                grads[layer] = float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))
        out[name] = {
            "stages": mine,
            "steps": steps,
            "actions": actions,
            "sends": counts,
            "plan": _plan(sched, rank),
            "loss": statistics.fmean(losses) if is_last and losses else None,
            "grad_rel_err": grads,
        }
        del sched, stages, layers
    return {"schedules": out, "reference_loss": ref_loss}


# ---- run ----------------------------------------------------------------------------------------


def run(params: Params, ctx: LabContext) -> dict:
    device = ctx.device
    per_rank = labdist.run_ranks(ctx, _rank_main, params, world=params.ranks, what="pipeline ranks")
    ctx.progress(0.8, "measuring bubbles and activations")
    schedules = {}
    for name in params.schedules:
        schedules[name] = _schedule(params, ctx, name, [rec["schedules"][name] for rec in per_rank], device)
    ref_loss = per_rank[0]["reference_loss"]
    ctx.progress(0.95, "writing tables")
    return report.results(params, ctx, schedules, ref_loss, device)


def step_frames(steps: list[list[tuple[float, float]]], device: str) -> tuple[list[list[float]], list[tl.Interval]]:
    """Where each rank's step sits on the drawn timeline: (per rank, per step, the ms to subtract from its times;
    per step, its window on that timeline), from each rank's (start, end) per step.

    A step lasts until its slowest rank is done: a training step's optimizer waits for every stage, so a rank
    that finished early idles until then (the formulas count it that way too). On CPU every rank read one clock
    (perf_counter on one host), so the window runs from the first rank's start to the last rank's end. On CUDA
    the times are each rank's own CUDA events on a host origin of its own, whose offsets across ranks are as
    large as the sends being measured: no clock is compared across ranks. Each rank's step starts at its own first
    event (the ranks left a barrier together), lasts as long as the slowest rank's, and the steps are laid end to
    end."""
    n_steps = len(steps[0])
    if device != "cuda":
        t0 = min(st[0] for rank in steps for st in rank)
        windows = [(min(r[s][0] for r in steps) - t0, max(r[s][1] for r in steps) - t0) for s in range(n_steps)]
        return [[t0] * n_steps for _ in steps], windows
    lengths = [max(r[s][1] - r[s][0] for r in steps) for s in range(n_steps)]
    offsets = [sum(lengths[:s]) for s in range(n_steps)]
    shifts = [[r[s][0] - offsets[s] for s in range(n_steps)] for r in steps]
    return shifts, [(offsets[s], offsets[s] + lengths[s]) for s in range(n_steps)]


def _schedule(params: Params, ctx: LabContext, name: str, recs: list[dict], device: str) -> dict:
    p, m, v = params.ranks, params.microbatches, stages_for(params, name)
    shifts, windows = step_frames([rec["steps"] for rec in recs], device)
    median = sorted(range(params.steps), key=lambda s: windows[s][1] - windows[s][0])[(params.steps - 1) // 2]
    step = windows[median]
    ranks, all_spans, order, measured = [], [], {}, []
    for r, rec in enumerate(recs):
        for s, acts in enumerate(rec["actions"]):
            t0 = shifts[r][s]
            actions = [analysis.Action(st, k, mb, x - t0, y - t0, nb, c) for st, k, mb, x, y, nb, c in acts]
            all_spans += _spans(r, actions, windows[s], s)
            if s == median:
                mine = actions
        met = analysis.idle(mine, step)
        flight = analysis.in_flight(mine)
        sends = rec["sends"][median]
        ran = sorted(mine, key=lambda a: a.start_ms)
        order[r] = [(a.stage, a.kind, a.microbatch) for a in ran]
        measured += mine
        f = [a for a in mine if a.kind == "F"]
        ranks.append(
            {
                "rank": r,
                "stages": rec["stages"],
                **{k: met[k] for k in ("step_ms", "busy_ms", "idle_ms", "idle_fraction", "idle_over_busy")},
                "forward_ms": sum(a.end_ms - a.start_ms for a in f),
                "backward_ms": sum(a.end_ms - a.start_ms for a in mine if a.kind in ("B", "I")),
                "weight_grad_ms": sum(a.end_ms - a.start_ms for a in mine if a.kind == "W"),
                "peak_microbatches_in_flight": flight["peak_microbatches"],
                "expected_peak_in_flight": analysis.expected_peak_in_flight(name, p, m, r),
                "activation_bytes_per_microbatch": max((a.saved_bytes for a in f), default=0),
                "peak_activation_bytes": flight["peak_bytes"],
                "sends": sends["activations"] + sends["gradients"],
                "send_bytes": sends["activations_bytes"] + sends["gradients_bytes"],
                "ran": [a.label() for a in ran],
                "plan": rec["plan"],
                "max_grad_rel_err": max(rec["grad_rel_err"].values()),
            }
        )
    # The same order with this step's mean F/B/I/W compute times and free, instant p2p: what the schedule idles
    # with these stages on ideal links and dedicated devices. On CPU the times are each action's thread CPU time,
    # which other processes on the shared cores cannot inflate (with one intra-op thread, the GEMMs and CPU
    # autograd run on the calling thread); on CUDA, the event spans. Measured minus this is what p2p,
    # wake-ups and shared cores cost.
    sim = analysis.simulate(order, analysis.mean_durations(measured, cpu_time=device == "cpu"))
    last = params.steps - 1
    drawn = [sp for sp in all_spans if sp.args["step"] == last]
    lo = min(sp.start_ms for sp in drawn)
    drawn = [tl.Span(sp.rank, sp.lane, sp.name, sp.start_ms - lo, sp.end_ms - lo, sp.args) for sp in drawn]
    form = analysis.formulas(name, p, m, v)
    idle_fraction = statistics.fmean(r["idle_fraction"] for r in ranks)
    ratios = [r["idle_over_busy"] for r in ranks if r["idle_over_busy"] is not None]
    loss = next(rec["loss"] for rec in recs if rec["loss"] is not None)
    return {
        "stages_per_rank": v,
        "stages": p * v,
        "ranks": ranks,
        "step_ms": step[1] - step[0],
        "bubble_fraction": idle_fraction,
        "bubble_over_ideal": statistics.fmean(ratios) if ratios else None,
        "formula_step_fraction": form["step_fraction"],
        "formula_over_ideal": form["over_ideal"],
        "simulated_step_ms": sim["step_ms"],
        "simulated_bubble_fraction": statistics.fmean(sim["idle_fraction"].values()),
        "schedule_bubble_fraction": analysis.uniform_bubble(order),
        "peak_microbatches_in_flight": max(r["peak_microbatches_in_flight"] for r in ranks),
        "peak_activation_bytes": max(r["peak_activation_bytes"] for r in ranks),
        "sends_per_step": sum(r["sends"] for r in ranks),
        "send_bytes_per_step": sum(r["send_bytes"] for r in ranks),
        "loss": loss,
        "max_grad_rel_err": max(r["max_grad_rel_err"] for r in ranks),
        "artifacts": report.schedule_artifacts(ctx, params, name, all_spans, drawn, idle_fraction, device),
    }


def _spans(rank: int, actions: list, step: tl.Interval, s: int) -> list[tl.Span]:
    """Compute spans named in the module's notation (2F0: stage 2, forward, micro-batch 0), and the step's idle
    gaps on the wait lane. p2p is not timed on its own: its latency is inside those gaps."""
    words = {"F": "forward", "B": "backward", "I": "backward for inputs", "W": "backward for weights"}
    out = [
        tl.Span(
            rank,
            "compute",
            a.label(),
            a.start_ms,
            a.end_ms,
            {"step": s, "stage": a.stage, "microbatch": a.microbatch, "kind": words[a.kind]},
        )
        for a in actions
    ]
    out += [
        tl.Span(rank, "wait", "idle: bubble, or waiting on a peer's send", a, b, {"step": s})
        for a, b in analysis.gaps(actions, step)
    ]
    return out
